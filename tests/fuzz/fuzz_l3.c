/* fuzz_l3.c - an L3 snapshot file, read through the code `elastic-snapshot
 * verify` and libelastic's resume use (src/libelastic/l3_format.c)
 *
 * Input: the bytes of a snapshot file (the seed was written by l3_write:
 * tests/l3/l3_test on 2 ranks).  They are written to a file and read as
 * the product reads it: l3_probe (open and load the catalog in a child
 * process), then, when HDF5 did not crash the child, the same in this
 * process under the sanitizers: l3_file_open_serial, l3_catalog_load,
 * l3_catalog_verify of every checksum, close.  After each input no HDF5
 * object may be left open: an id leaked on an error path would keep a
 * damaged file open in a resume that falls back past it.
 *
 * HDF5 1.10 itself reads out of bounds on malformed metadata (ASan sees
 * its memcpy calls) and leaks the metadata it was parsing when it fails:
 * those reports are suppressed here, as bugs of HDF5, which is not
 * instrumented; the product contains what they can do (l3_probe), and a
 * file that crashes the child is the probe's job, not this process's.
 */
#include <stdio.h>
#include <unistd.h>

#include "fuzz.h"
#include "libelastic/l3_format.h"

static char path[64];

/* HDF5's own faults (see above): its memcpy/memmove/strlen... through
 * ASan's interceptors, and what it leaves allocated when it fails to parse
 * an object (H5C_protect under H5Fopen, H5Dopen2, H5Aopen).  HDF5 is built
 * without frame pointers, so the stack of such a leak often ends at its
 * first HDF5 frame: the suppression names the library.  The one HDF5
 * allocation our code owns, a variable-length string attribute
 * (attr_read_string), is given back with H5free_memory on its only path;
 * the HDF5 ids our code could leak are counted after each input.  A
 * sanitizer report exits 86, so that one in l3_probe's child is told from
 * the child's other ends. */
const char *__asan_default_options (void);
const char *__asan_default_options (void)
{
    return "exitcode=86";
}
const char *__asan_default_suppressions (void);
const char *__asan_default_suppressions (void)
{
    return "interceptor_via_lib:libhdf5\n";
}
const char *__lsan_default_suppressions (void);
const char *__lsan_default_suppressions (void)
{
    return "leak:libhdf5\n";
}

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    const char *base = access ("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

    snprintf (path, sizeof (path), "%s/fuzz_l3.%d.h5", base, (int)getpid ());
    H5Eset_auto2 (H5E_DEFAULT, NULL, NULL);
    return 0;
}

static void count_fault (const char *what, void *arg)
{
    (*(int *)arg)++;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct l3_catalog *c = NULL;
    struct l3_header hdr;
    elastic_error_t err;
    const char *why = err.text;
    int kind, faults = 0;
    hid_t fid;
    FILE *f;

    if (!(f = fopen (path, "wb")) || fwrite (data, 1, size, f) != size || fclose (f))
        abort ();
    /* FUZZ_L3_NOPROBE=1: in this process only (faster; a crash of HDF5 then
     * stops the run) */
    if (!getenv ("FUZZ_L3_NOPROBE") && l3_probe (path, &hdr, &err) == L3_DAMAGED) {
        /* a sanitizer report in the child is a finding, as here */
        if (strstr (why, "exited with status 86"))
            abort ();
        /* contained: HDF5 killed the child (or libFuzzer's allocation
         * limit did), not this process */
        if (strncmp (why, "HDF5 crashed", 12) == 0 ||
            strncmp (why, "HDF5 failed", 11) == 0) {
            unlink (path);
            return 0;
        }
    }
    if ((fid = l3_file_open_serial (path, &kind, &err)) >= 0) {
        if (l3_catalog_load (fid, &c, &err) == L3_GOOD) {
            l3_catalog_verify (c, H5P_DEFAULT, 0, 1, count_fault, &faults);
            l3_catalog_nitems (c);
            l3_catalog_destroy (c);
        }
        H5Fclose (fid);
    }
    if (H5Fget_obj_count (H5F_OBJ_ALL, H5F_OBJ_ALL) != 0) {
        fprintf (stderr,
                 "fuzz_l3: %d HDF5 objects left open\n",
                 (int)H5Fget_obj_count (H5F_OBJ_ALL, H5F_OBJ_ALL));
        abort ();
    }
    unlink (path);
    H5garbage_collect (); /* HDF5's free lists would grow the process */
    return 0;
}
