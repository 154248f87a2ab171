/* elastic-snapshot - list, verify, inspect and prune L3 snapshots
 *
 * A plain process: files are read with HDF5's serial (sec2) driver, no MPI
 * initialization.  Exit status: 0 success (verify: every checked snapshot
 * is valid), 1 failure, 2 usage error.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <elastic/version.h>
#include "common/parse.h"
#include "libelastic/l3_dir.h"
#include "libelastic/l3_format.h"

#define USAGE_LINE                                                                       \
    "usage: elastic-snapshot list DIR | verify FILE|DIR | show FILE | prune DIR --keep " \
    "K "                                                                                 \
    "[--run-id ID] (see --help)"

static const char *prog = "elastic-snapshot";

static void help (void)
{
    printf (
        "Usage: elastic-snapshot COMMAND ARGS\n"
        "\n"
        "List, verify, inspect and prune the L3 snapshots (HDF5 files) that\n"
        "libelastic writes to its snapshot_dir.\n"
        "\n"
        "Commands:\n"
        "  list DIR              one line per snapshot file: step, creation time,\n"
        "                        world size, size, run id, file, status (structure\n"
        "                        checked; add --verify to check every checksum)\n"
        "  verify FILE|DIR       check every block's checksum of one snapshot, or of\n"
        "                        every committed snapshot in DIR; exit 0 only if all\n"
        "                        are valid; each bad block is named (array, old rank,\n"
        "                        offset)\n"
        "  show FILE             header attributes, arrays (type, shape, element size,\n"
        "                        blocks), values and blobs\n"
        "  prune DIR --keep K [--run-id ID]\n"
        "                        keep the newest K readable snapshots (of run ID, if\n"
        "                        given) and remove the older ones\n"
        "\n"
        "Options: --help, --version.  Exit status: 0 success, 1 failure, 2 usage.\n");
}

static int usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static int usage_error (const char *fmt, ...)
{
    va_list ap;

    fprintf (stderr, "%s: ", prog);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fprintf (stderr, "; " USAGE_LINE "\n");
    return 2;
}

static void human (char *buf, size_t len, double bytes)
{
    const char *unit[] = {"B", "K", "M", "G", "T"};
    int u = 0;

    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf (buf, len, u == 0 ? "%.0f%s" : "%.1f%s", bytes, unit[u]);
}

/* One line on stderr for a file load() refuses: "prog: path: [what]why",
 * what only when the file is damaged (not when it cannot be read). */
static void
complain (const char *path, int kind, const char *what, const char *why, int quiet)
{
    if (!quiet)
        fprintf (
            stderr, "%s: %s: %s%s\n", prog, path, kind == L3_DAMAGED ? what : "", why);
}

/* Open path and load its catalog; on failure print one line and return -1. */
static int load (const char *path,
                 hid_t *fid,
                 struct l3_catalog **cat,
                 int quiet,
                 elastic_error_t *err)
{
    struct l3_header hdr;
    int kind;

    /* the metadata in a child process first: HDF5 may crash on a damaged
     * file (l3_probe); then here, where it parses the same way */
    if ((kind = l3_probe (path, &hdr, err)) != L3_GOOD) {
        *fid = -1;
        complain (path, kind, "damaged snapshot: ", err->text, quiet);
        return -1;
    }
    if ((*fid = l3_file_open_serial (path, &kind, err)) < 0) {
        complain (path, kind, "damaged HDF5 file: ", err->text, quiet);
        return -1;
    }
    if ((kind = l3_catalog_load (*fid, cat, err)) != L3_GOOD) {
        complain (path, kind, "damaged snapshot: ", err->text, quiet);
        H5Fclose (*fid);
        *fid = -1;
        return -1;
    }
    return 0;
}

struct faults {
    const char *path;
    int n;
};

static void print_fault (const char *what, void *arg)
{
    struct faults *f = arg;

    printf ("%s: CORRUPT: %s\n", f->path, what);
    f->n++;
}

static void first_fault (const char *what, void *arg)
{
    char *buf = arg;

    if (!*buf)
        snprintf (buf, 256, "%s", what);
}

/* 0 valid, 1 not */
static int verify_file (const char *path)
{
    struct l3_catalog *c;
    struct faults f = {.path = path};
    elastic_error_t err;
    hid_t fid;
    long items;

    if (load (path, &fid, &c, 0, &err) < 0)
        return 1;
    l3_catalog_verify (c, H5P_DEFAULT, 0, 1, print_fault, &f);
    items = l3_catalog_nitems (c);
    if (f.n == 0)
        printf ("%s: ok (step %" PRId64
                ", world size %d, %d arrays, %d values, %d blobs; %ld "
                "checksums verified)\n",
                path,
                c->hdr.step,
                c->hdr.world_size,
                c->narrays,
                c->nvalues,
                c->nblobs,
                items);
    else
        printf ("%s: %d of %ld checksums failed\n", path, f.n, items);
    l3_catalog_destroy (c);
    H5Fclose (fid);
    return f.n ? 1 : 0;
}

static int cmd_verify (const char *path)
{
    struct stat sb;
    struct l3_entry *e;
    elastic_error_t err;
    int n, bad = 0, checked = 0;

    if (stat (path, &sb) < 0) {
        fprintf (stderr, "%s: %s: %s\n", prog, path, strerror (errno));
        return 1;
    }
    if (!S_ISDIR (sb.st_mode))
        return verify_file (path);
    if (l3_dir_list (path, &e, &n, &err) < 0) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (e[i].temporary) {
            printf ("%s: skipped (uncommitted temporary)\n", e[i].path);
            continue;
        }
        checked++;
        bad += verify_file (e[i].path);
    }
    l3_dir_free (e, n);
    if (checked == 0) {
        fprintf (
            stderr, "%s: %s: no committed snapshot (snap-*.h5) to verify\n", prog, path);
        return 1;
    }
    printf ("%s: %d of %d snapshots valid\n", path, checked - bad, checked);
    return bad ? 1 : 0;
}

static int cmd_list (const char *dir, int full)
{
    struct l3_entry *e;
    elastic_error_t err;
    int n;

    if (l3_dir_list (dir, &e, &n, &err) < 0) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        return 1;
    }
    printf ("%-12s  %-20s  %5s  %7s  %-12s  %-26s  %s\n",
            "STEP",
            "CREATED",
            "WORLD",
            "SIZE",
            "RUN",
            "FILE",
            "STATUS");
    for (int i = 0; i < n; i++) {
        char size[32], status[600], created[48] = "-", world[16] = "-", run[300] = "-";
        struct l3_catalog *c;
        hid_t fid;

        human (size, sizeof (size), (double)e[i].size);
        if (e[i].temporary)
            snprintf (status,
                      sizeof (status),
                      "temporary (not committed: being written, or stale)");
        else if (load (e[i].path, &fid, &c, 1, &err) < 0)
            snprintf (status, sizeof (status), "BAD: %s", err.text);
        else {
            char fault[256] = "";
            snprintf (created, sizeof (created), "%s", c->hdr.created);
            snprintf (world, sizeof (world), "%d", c->hdr.world_size);
            snprintf (run, sizeof (run), "%s", *c->hdr.run_id ? c->hdr.run_id : "\"\"");
            if (c->hdr.step != e[i].step)
                snprintf (status,
                          sizeof (status),
                          "BAD: step attribute %" PRId64 " does not match the name",
                          c->hdr.step);
            else if (full &&
                     l3_catalog_verify (c, H5P_DEFAULT, 0, 1, first_fault, fault) > 0)
                snprintf (status, sizeof (status), "CORRUPT: %s", fault);
            else
                snprintf (status, sizeof (status), full ? "ok (verified)" : "ok");
            l3_catalog_destroy (c);
            H5Fclose (fid);
        }
        printf ("%-12" PRId64 "  %-20s  %5s  %7s  %-12s  %-26s  %s\n",
                e[i].step,
                created,
                world,
                size,
                run,
                e[i].name,
                status);
    }
    if (n == 0)
        printf ("(no snapshots in %s)\n", dir);
    l3_dir_free (e, n);
    return 0;
}

static void print_value (hid_t memtype, const struct l3_cat_value *v)
{
    size_t ts = l3_type_size (v->type), n = v->size / ts, show = n < 8 ? n : 8;
    unsigned char *buf = malloc (v->size ? v->size : 1);

    if (!buf || (v->size > 0 &&
                 H5Dread (v->dset, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
        printf (" (unreadable)");
        free (buf);
        return;
    }
    printf (" =");
    for (size_t i = 0; i < show; i++) {
        const unsigned char *p = buf + i * ts;
        switch (v->type) {
            case L3_TYPE_BYTES:
                printf (" %02x", *p);
                break;
            case L3_TYPE_INT32: {
                int32_t x;
                memcpy (&x, p, 4);
                printf (" %" PRId32, x);
                break;
            }
            case L3_TYPE_UINT32: {
                uint32_t x;
                memcpy (&x, p, 4);
                printf (" %" PRIu32, x);
                break;
            }
            case L3_TYPE_INT64: {
                int64_t x;
                memcpy (&x, p, 8);
                printf (" %" PRId64, x);
                break;
            }
            case L3_TYPE_UINT64: {
                uint64_t x;
                memcpy (&x, p, 8);
                printf (" %" PRIu64, x);
                break;
            }
            case L3_TYPE_FLOAT32: {
                float x;
                memcpy (&x, p, 4);
                printf (" %.9g", x);
                break;
            }
            case L3_TYPE_FLOAT64: {
                double x;
                memcpy (&x, p, 8);
                printf (" %.17g", x);
                break;
            }
        }
    }
    if (show < n)
        printf (" ...");
    free (buf);
}

static int cmd_show (const char *path)
{
    struct l3_catalog *c;
    struct stat sb;
    elastic_error_t err;
    char size[32];
    hid_t fid;
    int world;

    if (load (path, &fid, &c, 0, &err) < 0)
        return 1;
    world = c->hdr.world_size;
    human (size, sizeof (size), stat (path, &sb) == 0 ? (double)sb.st_size : 0);
    printf ("file             %s\n", path);
    printf ("format           %s version %d\n", L3_FORMAT_NAME, c->hdr.format_version);
    printf ("step             %" PRId64 "\n", c->hdr.step);
    printf ("world size       %d\n", world);
    printf (
        "created          %s (unix %" PRId64 ")\n", c->hdr.created, c->hdr.created_unix);
    printf ("library version  %s\n", c->hdr.library_version);
    printf ("run id           %s\n", *c->hdr.run_id ? c->hdr.run_id : "\"\"");
    printf ("file size        %s\n", size);
    printf ("arrays           %d\n", c->narrays);
    for (int i = 0; i < c->narrays; i++) {
        const struct l3_cat_array *a = &c->arrays[i];
        size_t k = a->elem_size / l3_type_size (a->type);
        uint64_t lo = UINT64_MAX, hi = 0;
        char shape[64], total[32];
        int nonempty = 0;
        for (int r = 0; r < world; r++) {
            uint64_t cnt = a->blocks[3 * r + 1];
            lo = cnt < lo ? cnt : lo;
            hi = cnt > hi ? cnt : hi;
            nonempty += cnt > 0;
        }
        if (k == 1)
            snprintf (shape, sizeof (shape), "[%" PRIu64 "]", a->global_count);
        else
            snprintf (shape, sizeof (shape), "[%" PRIu64 "][%zu]", a->global_count, k);
        human (total, sizeof (total), (double)a->global_count * (double)a->elem_size);
        printf ("  /arrays/%-20s %-8s %-16s elem_size %zu, %s; %d blocks of %" PRIu64
                "..%" PRIu64 " elements (%d non-empty)\n",
                a->name,
                l3_type_name (a->type),
                shape,
                a->elem_size,
                total,
                world,
                lo,
                hi,
                nonempty);
    }
    printf ("values           %d\n", c->nvalues);
    for (int i = 0; i < c->nvalues; i++) {
        const struct l3_cat_value *v = &c->values[i];
        printf (
            "  /values/%-20s %-8s %zu bytes", v->name, l3_type_name (v->type), v->size);
        print_value (v->memtype, v);
        printf ("\n");
    }
    printf ("blobs            %d\n", c->nblobs);
    for (int i = 0; i < c->nblobs; i++) {
        const struct l3_cat_blob *b = &c->blobs[i];
        printf ("  /blobs/%-21s %" PRIu64 " bytes; per old rank:", b->name, b->total);
        for (int r = 0; r < world && r < 16; r++)
            printf (" %" PRIu64, b->index[3 * r + 1]);
        if (world > 16)
            printf (" ...");
        printf ("\n");
    }
    l3_catalog_destroy (c);
    H5Fclose (fid);
    return 0;
}

static void removed (const char *path, const char *reason, void *arg)
{
    printf ("removed %s (%s)\n", path, reason);
}

static int cmd_prune (const char *dir, long keep, const char *run_id)
{
    elastic_error_t err;
    int n;

    if ((n = l3_dir_prune (dir, (int)keep, run_id, -1, NULL, removed, NULL, &err)) < 0) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        return 1;
    }
    printf ("%s: %d snapshot%s removed\n", dir, n, n == 1 ? "" : "s");
    return 0;
}

int main (int argc, char **argv)
{
    struct l3_h5quiet q;
    const char *cmd;
    elastic_error_t err;
    int rc;

    if (argc < 2)
        return usage_error ("%s", "no command given");
    cmd = argv[1];
    if (!strcmp (cmd, "--help") || !strcmp (cmd, "-h") || !strcmp (cmd, "help")) {
        help ();
        return 0;
    }
    if (!strcmp (cmd, "--version")) {
        printf ("elastic-snapshot %s\n", ELASTIC_VERSION_STRING);
        return 0;
    }
    if (H5open () < 0) {
        fprintf (stderr, "%s: cannot initialize HDF5\n", prog);
        return 1;
    }
    l3_h5quiet_begin (&q);
    if (!strcmp (cmd, "list")) {
        int full = 0;
        const char *dir = NULL;
        for (int i = 2; i < argc; i++) {
            if (!strcmp (argv[i], "--verify"))
                full = 1;
            else if (argv[i][0] == '-' && argv[i][1] != '\0')
                return usage_error ("list: unknown option '%s' (accepted: --verify)",
                                    argv[i]);
            else if (dir)
                return usage_error ("list: unexpected argument '%s' (one DIR)", argv[i]);
            else
                dir = argv[i];
        }
        if (!dir)
            return usage_error ("%s", "list: no DIR given");
        rc = cmd_list (dir, full);
    } else if (!strcmp (cmd, "verify") || !strcmp (cmd, "show")) {
        if (argc != 3)
            return usage_error (
                argc < 3 ? "%s: no FILE given" : "%s: expected exactly one FILE", cmd);
        rc = !strcmp (cmd, "verify") ? cmd_verify (argv[2]) : cmd_show (argv[2]);
    } else if (!strcmp (cmd, "prune")) {
        const char *dir = NULL, *run_id = NULL;
        long keep = -1;
        for (int i = 2; i < argc; i++) {
            if (!strcmp (argv[i], "--keep")) {
                if (i + 1 >= argc)
                    return usage_error ("%s", "prune: --keep needs a value");
                if (parse_long ("--keep", argv[++i], 1, INT_MAX, &keep, &err) < 0)
                    return usage_error ("prune: %s", err.text);
            } else if (!strncmp (argv[i], "--keep=", 7)) {
                if (parse_long ("--keep", argv[i] + 7, 1, INT_MAX, &keep, &err) < 0)
                    return usage_error ("prune: %s", err.text);
            } else if (!strcmp (argv[i], "--run-id")) {
                if (i + 1 >= argc)
                    return usage_error ("%s", "prune: --run-id needs a value");
                run_id = argv[++i];
            } else if (argv[i][0] == '-' && argv[i][1] != '\0')
                return usage_error (
                    "prune: unknown option '%s' (accepted: --keep K, --run-id ID)",
                    argv[i]);
            else if (dir)
                return usage_error ("prune: unexpected argument '%s' (one DIR)", argv[i]);
            else
                dir = argv[i];
        }
        if (!dir)
            return usage_error ("%s", "prune: no DIR given");
        if (keep < 0)
            return usage_error ("%s", "prune: --keep K is required (K >= 1)");
        rc = cmd_prune (dir, keep, run_id);
    } else
        return usage_error ("unknown command '%s' (accepted: list, verify, show, prune)",
                            cmd);
    l3_h5quiet_end (&q);
    return rc;
}
