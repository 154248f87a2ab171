/* fuzz_errorfile.c - a worker's torchelastic error file, as elastic-exec
 * reads it for the failure report and /metrics (src/exec/errorfile.c)
 *
 * Input: the file's bytes (either of torchelastic's two JSON shapes, or
 * anything else a dying worker leaves behind).
 */
#include <stdio.h>
#include <unistd.h>

#include "errorfile.h"
#include "fuzz.h"

static char path[64];

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    snprintf (path,
              sizeof (path),
              "%s/fuzz_errorfile.%d.json",
              access ("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
              (int)getpid ());
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct error_record rec = {0};
    FILE *f;

    if (!(f = fopen (path, "wb")) || fwrite (data, 1, size, f) != size || fclose (f))
        abort ();
    errorfile_read (path, &rec);
    errorfile_clear (&rec);
    unlink (path);
    return 0;
}
