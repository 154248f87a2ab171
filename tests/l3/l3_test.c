/* l3_test.c - write L3 snapshots with N ranks, restore them with M ranks
 *
 *   l3_test write DIR STEP[,STEP...] [--keep K] [--run ID] [--rows G] [--verify]
 *   l3_test read DIR --step S --world N [--run ID] [--rows G]
 *   l3_test readfile FILE --step S --world N [--rows G]
 *   l3_test restore DIR|FILE --step S --world N [--run ID] [--rows G]
 *                                          one pass (l3_restore_latest, or
 *                                          l3_restore of a FILE): the read
 *                                          callback reads "field" only; rank
 *                                          0 prints a line per pass
 *   l3_test nosnap DIR [--run ID]          expect ELASTIC_ERR_NO_SNAPSHOT
 *   l3_test invalid DIR                    l3_write must refuse bad layouts
 *
 * The state has deterministic contents derived from (step, global index):
 * arrays "field" (float64 rows of 7, uneven blocks), "bytes" (13-byte rows,
 * rank 1 owns none), "ints" (int64), "none" (no elements); values "step",
 * "seed", "dt"; blobs "rng" (a different size per rank, 0 on rank 2) and
 * "empty".  A reader at any world size checks every element of its new
 * block (split evenly, unlike the writer's), every value and the blobs of
 * the old ranks r, r+M, r+2M...  Rank 0 prints one summary line.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mpi.h>
#include "libelastic/l3.h"

#define COLS    7
#define SEEDLEN 16

static int rank, size;
static long rows = 1000;
static long errors;

static void fail (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void fail (const char *fmt, ...)
{
    va_list ap;
    if (errors++ < 5) {
        fprintf (stderr, "rank %d: ", rank);
        va_start (ap, fmt);
        vfprintf (stderr, fmt, ap);
        va_end (ap);
        fputc ('\n', stderr);
    }
}

static uint64_t g_field (void)
{
    return (uint64_t)rows;
}
static uint64_t g_bytes (void)
{
    return (uint64_t)rows / 2 + 3;
}
static uint64_t g_ints (void)
{
    return (uint64_t)rows + 17;
}

static double field_val (int64_t step, uint64_t row, int col)
{
    return (double)step * 1e7 + (double)row * 16.0 + col;
}
static uint8_t bytes_val (int64_t step, uint64_t row, int j)
{
    return (uint8_t)(step * 31 + row * 7 + j * 3 + 1);
}
static int64_t ints_val (int64_t step, uint64_t row)
{
    return step * 1000003 - (int64_t)row * 3 - 5;
}
static size_t blob_size (int64_t step, int r)
{
    return r == 2 ? 0 : (size_t)((r * 37 + step) % 200 + 1);
}
static uint8_t blob_val (int64_t step, int r, size_t i)
{
    return (uint8_t)(step + r * 13 + i);
}

/* Split g into n blocks with weights: kind 0 1+(r%3), kind 1 r+1 but 0
 * for rank 1 when n > 2, kind 2 even. */
static void split (uint64_t g, int n, int kind, int r, uint64_t *off, uint64_t *count)
{
    uint64_t total = 0, before = 0, w;
    for (int i = 0; i < n; i++) {
        w = kind == 0   ? 1 + (uint64_t)(i % 3)
            : kind == 1 ? ((i == 1 && n > 2) ? 0 : (uint64_t)i + 1)
                        : 1;
        if (i < r)
            before += w;
        total += w;
    }
    w = kind == 0   ? 1 + (uint64_t)(r % 3)
        : kind == 1 ? ((r == 1 && n > 2) ? 0 : (uint64_t)r + 1)
                    : 1;
    *off = g * before / total;
    *count = g * (before + w) / total - *off;
}

static int
do_write (const char *dir, const char *steps, int keep, const char *run, int verify)
{
    char *list = strdup (steps), *save = NULL, *tok;
    int rc = 0;

    for (tok = strtok_r (list, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        int64_t step = strtoll (tok, NULL, 10);
        uint64_t fo, fc, bo, bc, io, ic;
        split (g_field (), size, 0, rank, &fo, &fc);
        split (g_bytes (), size, 1, rank, &bo, &bc);
        split (g_ints (), size, 2, rank, &io, &ic);
        double *field = malloc ((fc ? fc : 1) * COLS * sizeof (double));
        uint8_t *bytes = malloc ((bc ? bc : 1) * 13);
        int64_t *ints = malloc ((ic ? ic : 1) * sizeof (int64_t));
        size_t bsz = blob_size (step, rank);
        uint8_t *blob = malloc (bsz ? bsz : 1);
        uint8_t seed[SEEDLEN];
        double dt[3] = {step * 0.5, 1.25, -3};
        for (uint64_t i = 0; i < fc; i++)
            for (int c = 0; c < COLS; c++)
                field[i * COLS + c] = field_val (step, fo + i, c);
        for (uint64_t i = 0; i < bc; i++)
            for (int j = 0; j < 13; j++)
                bytes[i * 13 + j] = bytes_val (step, bo + i, j);
        for (uint64_t i = 0; i < ic; i++)
            ints[i] = ints_val (step, io + i);
        for (size_t i = 0; i < bsz; i++)
            blob[i] = blob_val (step, rank, i);
        for (int i = 0; i < SEEDLEN; i++)
            seed[i] = (uint8_t)(step + i * 5);
        struct l3_array arrays[] = {
            {"field", COLS * sizeof (double), fc, fo, g_field (), field, L3_TYPE_FLOAT64},
            {"bytes", 13, bc, bo, g_bytes (), bytes, L3_TYPE_BYTES},
            {"ints", 8, ic, io, g_ints (), ints, L3_TYPE_INT64},
            {"none", 4, 0, 0, 0, NULL, L3_TYPE_FLOAT32},
        };
        struct l3_value values[] = {
            {"step", sizeof (step), &step, L3_TYPE_INT64},
            {"seed", SEEDLEN, seed, L3_TYPE_BYTES},
            {"dt", sizeof (dt), dt, L3_TYPE_FLOAT64},
        };
        struct l3_blob blobs[] = {
            {"rng", bsz, blob},
            {"empty", 0, NULL},
        };
        struct l3_state st = {arrays, 4, values, 3, blobs, 2};
        struct l3_write_opts opts = {
            .dir = dir, .run_id = run, .keep = keep, .verify = verify};
        elastic_error_t err;
        double t0 = MPI_Wtime ();
        int e = l3_write (MPI_COMM_WORLD, &opts, &st, step, &err);
        if (rank == 0) {
            if (e == ELASTIC_OK)
                printf ("wrote step %" PRId64 " (%.3f s)\n", step, MPI_Wtime () - t0);
            else
                printf ("l3_write failed: %s: %s\n", elastic_strerror (e), err.text);
            fflush (stdout);
        }
        free (field);
        free (bytes);
        free (ints);
        free (blob);
        if (e != ELASTIC_OK) {
            rc = 1;
            break;
        }
    }
    free (list);
    return rc;
}

static void
check_array (struct l3_file *f, const char *name, int kind, int64_t step, long *checked)
{
    size_t es;
    uint64_t g, off, count;
    elastic_error_t err;

    if (l3_array_info (f, name, &es, &g) != ELASTIC_OK) {
        fail ("array %s missing", name);
        return;
    }
    split (g, size, 2, rank, &off, &count);
    unsigned char *buf = malloc (count * es + 1);
    int e = l3_read_array (f, name, off, count, buf, &err);
    if (e != ELASTIC_OK) {
        fail ("l3_read_array %s: %s: %s", name, elastic_strerror (e), err.text);
        free (buf);
        return;
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t row = off + i;
        if (kind == 0) {
            const double *d = (const double *)buf + i * COLS;
            for (int c = 0; c < COLS; c++)
                if (d[c] != field_val (step, row, c))
                    fail ("field[%" PRIu64 "][%d] = %g, expected %g",
                          row,
                          c,
                          d[c],
                          field_val (step, row, c));
        } else if (kind == 1) {
            for (int j = 0; j < 13; j++)
                if (buf[i * 13 + j] != bytes_val (step, row, j))
                    fail ("bytes[%" PRIu64 "][%d] wrong", row, j);
        } else {
            int64_t v;
            memcpy (&v, buf + i * 8, 8);
            if (v != ints_val (step, row))
                fail ("ints[%" PRIu64 "] = %" PRId64 ", expected %" PRId64,
                      row,
                      v,
                      ints_val (step, row));
        }
    }
    (*checked) += (long)count;
    free (buf);
}

static int check_file (struct l3_file *f, int64_t want_step, int want_world)
{
    int64_t step = l3_step (f), vstep = -1;
    int old = l3_world_size (f);
    long checked = 0, total_checked = 0, total_errors = 0;
    elastic_error_t err;
    uint8_t seed[SEEDLEN];
    double dt[3];
    size_t es;
    uint64_t g;

    if (step != want_step)
        fail ("restored step %" PRId64 ", expected %" PRId64, step, want_step);
    if (old != want_world)
        fail ("written by %d ranks, expected %d", old, want_world);
    check_array (f, "field", 0, step, &checked);
    check_array (f, "bytes", 1, step, &checked);
    check_array (f, "ints", 2, step, &checked);
    if (l3_array_info (f, "none", &es, &g) != ELASTIC_OK || g != 0 || es != 4)
        fail ("array none wrong");
    else if (l3_read_array (f, "none", 0, 0, NULL, &err) != ELASTIC_OK)
        fail ("read none: %s", err.text);
    if (l3_read_array (f, "nosuch", 0, 0, NULL, &err) != ELASTIC_ERR_NOT_FOUND)
        fail ("reading a missing array did not give NOT_FOUND");
    if (l3_read_value (f, "step", &vstep, sizeof (vstep), &err) != ELASTIC_OK ||
        vstep != step)
        fail ("value step: %" PRId64 " (%s)", vstep, err.text);
    if (l3_read_value (f, "seed", seed, sizeof (seed), &err) != ELASTIC_OK)
        fail ("value seed: %s", err.text);
    else
        for (int i = 0; i < SEEDLEN; i++)
            if (seed[i] != (uint8_t)(step + i * 5))
                fail ("seed[%d] wrong", i);
    if (l3_read_value (f, "dt", dt, sizeof (dt), &err) != ELASTIC_OK ||
        dt[0] != step * 0.5 || dt[1] != 1.25 || dt[2] != -3)
        fail ("value dt wrong (%s)", err.text);
    if (l3_read_value (f, "dt", dt, 8, &err) != ELASTIC_ERR_INVAL)
        fail ("a value read with the wrong size did not give INVAL");
    for (int r = rank; r < old; r += size) {
        void *b = NULL;
        size_t n = 0;
        int e = l3_read_blob (f, "rng", r, &b, &n, &err);
        if (e != ELASTIC_OK)
            fail ("blob rng of old rank %d: %s", r, err.text);
        else if (n != blob_size (step, r))
            fail ("blob rng of old rank %d has %zu bytes, expected %zu",
                  r,
                  n,
                  blob_size (step, r));
        else
            for (size_t i = 0; i < n; i++)
                if (((uint8_t *)b)[i] != blob_val (step, r, i)) {
                    fail ("blob rng of old rank %d: byte %zu wrong", r, i);
                    break;
                }
        free (b);
        if (l3_read_blob (f, "empty", r, &b, &n, &err) != ELASTIC_OK || n != 0)
            fail ("blob empty of old rank %d: %s", r, err.text);
        free (b);
    }
    {
        void *b = NULL;
        size_t n;
        if (l3_read_blob (f, "rng", old, &b, &n, &err) != ELASTIC_ERR_NOT_FOUND)
            fail ("blob of a nonexistent old rank did not give NOT_FOUND");
    }
    MPI_Allreduce (&checked, &total_checked, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce (&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total_errors == 0)
            printf ("read ok: %s step %" PRId64
                    ", world %d -> %d, %ld elements checked\n",
                    l3_path (f),
                    step,
                    old,
                    size,
                    total_checked);
        else
            printf ("read FAILED: %ld errors\n", total_errors);
        fflush (stdout);
    }
    return total_errors ? 1 : 0;
}

static int
do_read (const char *dir, const char *file, const char *run, int64_t step, int world)
{
    struct l3_file *f = NULL;
    elastic_error_t err;
    int e, rc;

    e = file ? l3_open (MPI_COMM_WORLD, file, &f, &err)
             : l3_open_latest (MPI_COMM_WORLD, dir, run, &f, &err);
    if (e != ELASTIC_OK) {
        if (rank == 0)
            printf ("open failed: %s: %s\n", elastic_strerror (e), err.text);
        return 1;
    }
    rc = check_file (f, step, world);
    l3_close (f);
    return rc;
}

struct restore_pass {
    double *field; /* this rank's share of "field", read by the callback */
    uint64_t off, count;
    int passes;
};

/* l3_read_f: read this rank's share of "field" only (the rest is verified
 * by l3_verify_rest), as a resume reads what was registered. */
static int restore_cb (struct l3_file *f, void *arg, elastic_error_t *err)
{
    struct restore_pass *p = arg;
    size_t es;
    uint64_t g;
    int e;

    p->passes++;
    if ((e = l3_array_info (f, "field", &es, &g)) != ELASTIC_OK) {
        snprintf (err->text, sizeof (err->text), "no array field");
        return ELASTIC_ERR_INVAL;
    }
    split (g, size, 2, rank, &p->off, &p->count);
    free (p->field);
    if (!(p->field = malloc (p->count * es + 1)))
        return ELASTIC_ERR_NOMEM;
    e = l3_read_array (f, "field", p->off, p->count, p->field, err);
    if (rank == 0) {
        printf ("pass %d: %s: %s%s%s\n",
                p->passes,
                l3_path (f),
                elastic_strerror (e),
                e == ELASTIC_OK ? "" : ": ",
                e == ELASTIC_OK ? "" : err->text);
        fflush (stdout);
    }
    return e;
}

/* Restore in one pass: the field the callback read must be the one of the
 * step restored (not a damaged file's), and the whole file then checks. */
static int do_restore (const char *path, const char *run, int64_t step, int world)
{
    struct restore_pass p = {NULL, 0, 0, 0};
    struct l3_file *f = NULL;
    elastic_error_t err;
    struct stat sb;
    int e, rc, isdir = stat (path, &sb) == 0 && S_ISDIR (sb.st_mode);

    e = isdir ? l3_restore_latest (
                    MPI_COMM_WORLD, path, run, restore_cb, &p, &f, NULL, &err)
              : l3_restore (MPI_COMM_WORLD, path, restore_cb, &p, &f, &err);
    if (e != ELASTIC_OK) {
        if (rank == 0)
            printf ("restore failed: %s: %s\n", elastic_strerror (e), err.text);
        free (p.field);
        return 1;
    }
    for (uint64_t i = 0; i < p.count; i++)
        for (int c = 0; c < COLS; c++)
            if (p.field[i * COLS + c] != field_val (l3_step (f), p.off + i, c)) {
                fail ("restored field[%" PRIu64 "][%d] is wrong", p.off + i, c);
                i = p.count;
                break;
            }
    free (p.field);
    rc = check_file (f, step, world);
    l3_close (f);
    return rc;
}

static int do_nosnap (const char *dir, const char *run)
{
    struct l3_file *f = NULL;
    elastic_error_t err;
    int e = l3_open_latest (MPI_COMM_WORLD, dir, run, &f, &err);

    if (rank == 0)
        printf ("open_latest: %s: %s\n", elastic_strerror (e), err.text);
    if (e == ELASTIC_OK)
        l3_close (f);
    return e == ELASTIC_ERR_NO_SNAPSHOT ? 0 : 1;
}

/* Each case must fail with ELASTIC_ERR_INVAL on every rank and print the
 * same text everywhere. */
static int do_invalid (const char *dir)
{
    uint64_t off, count;
    double d[1000 * 2];
    int bad = 0;
    struct l3_write_opts opts = {.dir = dir, .run_id = "inv", .keep = 0};

    split (1000, size, 2, rank, &off, &count);
    memset (d, 0, sizeof (d));
    struct {
        const char *what, *expect;
        struct l3_array a;
        int64_t step;
    } cases[] = {
        {"global count differs",
         "global count",
         {"x", 8, count, off, 1000 + (rank == size - 1), d, L3_TYPE_FLOAT64},
         1},
        {"blocks overlap",
         "overlap",
         {"x", 8, count + (rank == 0), off, 1000, d, L3_TYPE_FLOAT64},
         1},
        {"gap",
         "gaps",
         {"x",
          8,
          rank == 0 && count > 0 ? count - 1 : count,
          off,
          1000,
          d,
          L3_TYPE_FLOAT64},
         1},
        {"bad name", "invalid", {"a/b", 8, count, off, 1000, d, L3_TYPE_FLOAT64}, 1},
        {"bad elem size", "multiple", {"x", 12, count, off, 1000, d, L3_TYPE_FLOAT64}, 1},
        {"bad type", "type 99", {"x", 8, count, off, 1000, d, 99}, 1},
        {"outside", "outside", {"x", 8, count, off + 5000, 1000, d, L3_TYPE_FLOAT64}, 1},
        {"negative step", "negative", {"x", 8, count, off, 1000, d, L3_TYPE_FLOAT64}, -4},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        struct l3_state st = {&cases[i].a, 1, NULL, 0, NULL, 0};
        elastic_error_t err;
        int e = l3_write (MPI_COMM_WORLD, &opts, &st, cases[i].step, &err);
        char mine[256], first[256];
        int same;
        snprintf (mine, sizeof (mine), "%s", err.text);
        memcpy (first, mine, sizeof (first));
        MPI_Bcast (first, sizeof (first), MPI_CHAR, 0, MPI_COMM_WORLD);
        same = strcmp (first, mine) == 0;
        MPI_Allreduce (MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        int good = e == ELASTIC_ERR_INVAL && strstr (err.text, cases[i].expect) && same;
        MPI_Allreduce (MPI_IN_PLACE, &good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (rank == 0)
            printf ("%s %s: %s: %s\n",
                    good ? "refused" : "NOT REFUSED",
                    cases[i].what,
                    elastic_strerror (e),
                    err.text);
        if (!good)
            bad++;
    }
    /* a value that differs between ranks */
    {
        int64_t v = rank == size - 1 ? 2 : 1;
        struct l3_value val = {"v", 8, &v, L3_TYPE_INT64};
        struct l3_state st = {NULL, 0, &val, 1, NULL, 0};
        elastic_error_t err;
        int e = l3_write (MPI_COMM_WORLD, &opts, &st, 1, &err);
        int good = (size == 1 && e == ELASTIC_OK) ||
                   (e == ELASTIC_ERR_INVAL && strstr (err.text, "replicated"));
        if (rank == 0)
            printf ("%s value differs: %s: %s\n",
                    good ? "refused" : "NOT REFUSED",
                    elastic_strerror (e),
                    err.text);
        if (!good)
            bad++;
    }
    /* ranks with different numbers of arrays */
    {
        struct l3_array a = {"x", 8, count, off, 1000, d, L3_TYPE_FLOAT64};
        struct l3_state st = {&a, rank == 0 ? 1 : 0, NULL, 0, NULL, 0};
        elastic_error_t err;
        int e = l3_write (MPI_COMM_WORLD, &opts, &st, 1, &err);
        int good = (size == 1 && e == ELASTIC_OK) ||
                   (e == ELASTIC_ERR_INVAL && strstr (err.text, "different state"));
        if (rank == 0)
            printf ("%s array count differs: %s: %s\n",
                    good ? "refused" : "NOT REFUSED",
                    elastic_strerror (e),
                    err.text);
        if (!good)
            bad++;
    }
    return bad ? 1 : 0;
}

static void usage (void)
{
    if (rank == 0)
        fprintf (
            stderr,
            "usage: l3_test write|read|readfile|restore|nosnap|invalid DIR|FILE ...\n");
}

int main (int argc, char **argv)
{
    const char *run = NULL, *steps = NULL;
    int keep = 0, world = -1, rc = 2, verify = 0;
    int64_t step = -1;

    signal (SIGXFSZ, SIG_IGN); /* ulimit -f: let write() fail with EFBIG */
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    if (argc < 3) {
        usage ();
        goto out;
    }
    int i = 3;
    if (!strcmp (argv[1], "write")) {
        if (argc < 4) {
            usage ();
            goto out;
        }
        steps = argv[3];
        i = 4;
    }
    for (; i < argc; i++) {
        if (!strcmp (argv[i], "--keep") && i + 1 < argc)
            keep = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--verify"))
            verify = 1;
        else if (!strcmp (argv[i], "--run") && i + 1 < argc)
            run = argv[++i];
        else if (!strcmp (argv[i], "--rows") && i + 1 < argc)
            rows = atol (argv[++i]);
        else if (!strcmp (argv[i], "--step") && i + 1 < argc)
            step = atoll (argv[++i]);
        else if (!strcmp (argv[i], "--world") && i + 1 < argc)
            world = atoi (argv[++i]);
        else {
            usage ();
            goto out;
        }
    }
    if (!strcmp (argv[1], "write"))
        rc = do_write (argv[2], steps, keep, run, verify);
    else if (!strcmp (argv[1], "read"))
        rc = do_read (argv[2], NULL, run, step, world);
    else if (!strcmp (argv[1], "readfile"))
        rc = do_read (NULL, argv[2], NULL, step, world);
    else if (!strcmp (argv[1], "restore"))
        rc = do_restore (argv[2], run, step, world);
    else if (!strcmp (argv[1], "nosnap"))
        rc = do_nosnap (argv[2], run);
    else if (!strcmp (argv[1], "invalid"))
        rc = do_invalid (argv[2]);
    else
        usage ();
out:
    MPI_Finalize ();
    return rc;
}
