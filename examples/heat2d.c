/* heat2d.c - an elastic 2-D Jacobi heat stencil (libelastic example)
 *
 * The nx x ny grid is distributed by rows; the top edge is held at 1, the
 * other edges at 0.  Every point is computed with the same arithmetic
 * whatever the decomposition, so the final field, and its checksum, are
 * bit-identical for any number of ranks and any failures on the way.
 *
 * The elastic parts are the registration (the step, the grid), the calls at
 * the top of every step, maybe_reshard_down when an MPI call fails, and the
 * rebuild() handler.  Configure libelastic with ELASTIC_* variables
 * (ELASTIC_SNAPSHOT_PERIOD, ELASTIC_SPARE_RANKS, ...).
 *
 * With --persist-period N the grid goes to an HDF5 file (snapshot_dir) every
 * N steps: /arrays/u is float64 [ny][nx], /values/step int64.  SIGTERM or
 * SIGUSR1 suspends the job to such a file (exit 75); the same command with
 * ELASTIC_RESUME=1 continues from there, on any number of ranks.
 *
 * usage: heat2d [--nx N] [--ny N] [--steps N] [--ballast MIB]
 *               [--persist-period N] [--snapshot-dir DIR]
 *               [--sleep MS] [--progress N]
 *               [--fail RANK:STEP[:WHERE]]... [--fail-rank R --fail-step S]...
 *               [--mpi-error STEP] [--quiet] [--copy-restore] [--no-elastic]
 *               [--report-buffers]
 *
 * --no-elastic runs the same computation without any libelastic call (the
 * baseline of the overhead benchmark); --copy-restore restores the blocks
 * by copy (elastic_array_restore into a new buffer) instead of in place;
 * --report-buffers prints, at every rebuild, whether each rank kept its
 * grid and ballast buffers ("kept") or got new ones ("moved").
 */
#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <elastic.h>

#include "halo.h"
#include "inject.h"

struct app {
    elastic_manager_t *m;
    MPI_Comm comm; /* the working communicator (owned by libelastic) */
    int rank, size, world_rank;
    int nx, ny;
    int64_t steps;
    int64_t step;      /* registered: restored on rollback */
    uint64_t row0;     /* first global row of my block */
    uint64_t rows;     /* rows in my block */
    double *u, *v;     /* (rows + 2) x nx, with a ghost row above and below */
    uint64_t *ballast; /* extra state to make snapshots heavy (--ballast) */
    uint64_t ballast_count, ballast_off;
    uint64_t cap_rows; /* rows u and v have room for */
    double *u_seen;    /* u and ballast at the end of the last rebuild */
    uint64_t *ballast_seen;
    int report_buffers;
    int copy_restore; /* --copy-restore */
    int ballast_bad;
    int quiet;
};

static uint64_t splitmix64 (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double initial (uint64_t g)
{
    return (double)(splitmix64 (g) >> 11) / 9007199254740992.0;
}

/* Set the ghost rows that are domain edges. */
static void set_edges (struct app *a)
{
    for (int j = 0; j < a->nx; j++) {
        if (a->rank == 0)
            a->u[j] = 1.0;
        if (a->rank == a->size - 1)
            a->u[(a->rows + 1) * a->nx + j] = 0.0;
    }
}

/* Make room for rows rows (plus the ghost rows): realloc keeps the buffers
 * (and their pages) when the size is unchanged; the contents are rewritten
 * by the caller. */
static int alloc_grid (struct app *a, uint64_t rows)
{
    size_t n = (rows + 2) * a->nx;
    double *p;

    if (a->u && a->v && rows == a->cap_rows)
        return 0;
    if (!(p = realloc (a->u, n * sizeof (double))))
        return -1;
    a->u = p;
    if (!(p = realloc (a->v, n * sizeof (double))))
        return -1;
    a->v = p;
    a->cap_rows = rows;
    return 0;
}

/* libelastic's placement hook for "u" (elastic_array_set_realloc): the
 * new block is restored straight into the grid, kept when its size is
 * unchanged. */
static void *place_grid (void *data, uint64_t count, uint64_t new_count, void *arg)
{
    struct app *a = arg;

    (void)data;
    (void)count;
    if (alloc_grid (a, new_count) < 0)
        return NULL;
    return a->u + a->nx;
}

/* ... and for "ballast". */
static void *place_ballast (void *data, uint64_t count, uint64_t new_count, void *arg)
{
    struct app *a = arg;
    uint64_t *p;

    (void)data;
    (void)count;
    if (a->ballast && new_count == a->ballast_count)
        return a->ballast;
    if (!(p = realloc (a->ballast, new_count * sizeof (uint64_t) + 1)))
        return NULL;
    a->ballast = p;
    a->ballast_count = new_count;
    return p;
}

static void check_ballast (struct app *a)
{
    for (uint64_t i = 0; i < a->ballast_count; i++)
        if (a->ballast[i] != splitmix64 (a->ballast_off + i + 12345))
            a->ballast_bad++;
}

/* The elastic handler: the world changed.  Take the new communicator, get
 * this rank's new block of every array, rebuild what depends on them.  The
 * placement hooks have made room and libelastic has written the blocks in
 * place (after a resume from L3 it copies them in here).  The ballast is
 * never written, so its check at the end of the run covers every restore. */
static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_error_t err;
    elastic_info_t info;
    uint64_t count;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_array_block (m, "u", &a->row0, &a->rows, NULL);
    if (a->copy_restore) {
        /* new buffers, the blocks copied in (what an application that does
         * not use the placement hooks does) */
        free (a->u);
        free (a->v);
        free (a->ballast);
        a->u = a->v = NULL;
        a->ballast = NULL;
        a->cap_rows = a->ballast_count = 0;
    }
    if (alloc_grid (a, a->rows) < 0)
        return -1;
    if (elastic_array_restore (m, "u", a->u + a->nx, a->rows, &err) != ELASTIC_OK) {
        fprintf (stderr, "heat2d: %s\n", err.text);
        return -1;
    }
    set_edges (a);
    if (elastic_array_block (m, "ballast", &a->ballast_off, &count, NULL) == ELASTIC_OK) {
        if (!place_ballast (a->ballast, a->ballast_count, count, a))
            return -1;
        if (elastic_array_restore (m, "ballast", a->ballast, count, &err) != ELASTIC_OK) {
            fprintf (stderr, "heat2d: %s\n", err.text);
            return -1;
        }
    }
    if (a->report_buffers) {
        printf ("rank %d: buffers u %s ballast %s\n",
                a->world_rank,
                a->u == a->u_seen ? "kept" : "moved",
                a->ballast == a->ballast_seen ? "kept" : "moved");
        a->u_seen = a->u;
        a->ballast_seen = a->ballast;
    }
    elastic_manager_info (m, &info);
    if (a->rank == 0 && !a->quiet)
        printf ("resharded at step %lld: world %d -> %d\n",
                (long long)a->step,
                info.old_size,
                a->size);
    fflush (stdout);
    return 0;
}

/* One Jacobi step; returns an MPI error code. */
static int jacobi_step (struct app *a)
{
    int nx = a->nx, rc;
    int up = a->rank > 0 ? a->rank - 1 : MPI_PROC_NULL;
    int down = a->rank < a->size - 1 ? a->rank + 1 : MPI_PROC_NULL;
    double *u = a->u, *v = a->v;

    rc = halo_sendrecv (&u[nx], up, 0, &u[(a->rows + 1) * nx], down, 0, nx, a->comm);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = halo_sendrecv (&u[a->rows * nx], down, 1, &u[0], up, 1, nx, a->comm);
    if (rc != MPI_SUCCESS)
        return rc;
    for (uint64_t i = 1; i <= a->rows; i++) {
        for (int j = 0; j < nx; j++) {
            double left = j > 0 ? u[i * nx + j - 1] : 0.0;
            double right = j < nx - 1 ? u[i * nx + j + 1] : 0.0;
            v[i * nx + j] =
                0.25 * ((u[(i - 1) * nx + j] + u[(i + 1) * nx + j]) + (left + right));
        }
    }
    memcpy (&u[nx], &v[nx], a->rows * nx * sizeof (double));
    return MPI_SUCCESS;
}

/* The checksum of the whole field: a sum of per-point hashes, the same for
 * any decomposition.  Returns an MPI error code. */
static int checksum (struct app *a, uint64_t *sum)
{
    uint64_t mine = 0, bits;

    for (uint64_t i = 0; i < a->rows; i++) {
        for (int j = 0; j < a->nx; j++) {
            uint64_t g = (a->row0 + i) * a->nx + j;
            memcpy (&bits, &a->u[(i + 1) * a->nx + j], sizeof (bits));
            mine += splitmix64 (bits ^ splitmix64 (g + 1));
        }
    }
    return MPI_Allreduce (&mine, sum, 1, MPI_UINT64_T, MPI_SUM, a->comm);
}

static long
parse_num (const char *prog, const char *opt, const char *s, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol (s ? s : "", &end, 10);
    if (!s || *s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        fprintf (stderr,
                 "%s: %s: '%s' is invalid (expected an integer from %ld to %ld)\n",
                 prog,
                 opt,
                 s ? s : "",
                 min,
                 max);
        exit (2);
    }
    return v;
}

static void usage (const char *prog)
{
    fprintf (
        stderr,
        "usage: %s [--nx N] [--ny N] [--steps N] [--ballast MIB]\n"
        "          [--persist-period N] [--snapshot-dir DIR] [--sleep MS] [--progress "
        "N]\n"
        "          [--fail "
        "RANK:STEP[:step|snapshot|recovery|protect|persist|finalize|spin]]... "
        "[--fail-rank R --fail-step S]...\n"
        "          [--mpi-error STEP] [--quiet] [--copy-restore] [--no-elastic]\n"
        "          [--report-buffers]\n",
        prog);
}

static int finish (struct app *a, int rc, const char *what, const char *text)
{
    if (rc == ELASTIC_SUSPENDED) {
        if (a->rank == 0)
            printf ("suspended at step %lld\n", (long long)a->step);
    } else if (rc != ELASTIC_OK)
        fprintf (stderr,
                 "heat2d: rank %d: %s: %s (%s)\n",
                 a->world_rank,
                 what,
                 text,
                 elastic_strerror (rc));
    elastic_manager_destroy (a->m);
    free (a->u);
    free (a->v);
    free (a->ballast);
    fflush (stdout);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}

/* This rank's first block of the grid (and of the ballast), initialized.
 * Returns 0, -1 if memory runs out, -2 (with a message) if there are fewer
 * rows than ranks. */
static int setup_block (struct app *a, long ballast_mib)
{
    if (a->ny < a->size) {
        fprintf (stderr,
                 "heat2d: --ny %d is invalid (expected at least one row per rank: >= "
                 "%d)\n",
                 a->ny,
                 a->size);
        return -2;
    }
    a->rows = a->ny / a->size + ((uint64_t)a->rank < (uint64_t)a->ny % a->size ? 1 : 0);
    a->row0 = (uint64_t)a->rank * (a->ny / a->size) +
              ((uint64_t)a->rank < (uint64_t)a->ny % a->size ? (uint64_t)a->rank
                                                             : (uint64_t)a->ny % a->size);
    if (alloc_grid (a, a->rows) < 0)
        return -1;
    for (uint64_t i = 0; i < a->rows; i++)
        for (int j = 0; j < a->nx; j++)
            a->u[(i + 1) * a->nx + j] = initial ((a->row0 + i) * a->nx + j);
    set_edges (a);
    if (ballast_mib > 0) {
        uint64_t global = (uint64_t)ballast_mib * a->size * (1 << 20) / sizeof (uint64_t);
        a->ballast_count =
            global / a->size + ((uint64_t)a->rank < global % a->size ? 1 : 0);
        a->ballast_off =
            (uint64_t)a->rank * (global / a->size) +
            ((uint64_t)a->rank < global % a->size ? (uint64_t)a->rank : global % a->size);
        if (!(a->ballast = malloc (a->ballast_count * sizeof (uint64_t) + 1)))
            return -1;
        for (uint64_t i = 0; i < a->ballast_count; i++)
            a->ballast[i] = splitmix64 (a->ballast_off + i + 12345);
    }
    return 0;
}

/* --no-elastic: the same computation on MPI_COMM_WORLD without any
 * libelastic call (B6's baseline).  Returns the exit code. */
static int run_plain (struct app *a, long ballast_mib, long sleep_ms, long progress)
{
    uint64_t sum = 0;
    int rc;

    a->comm = MPI_COMM_WORLD;
    MPI_Comm_rank (a->comm, &a->rank);
    MPI_Comm_size (a->comm, &a->size);
    if ((rc = setup_block (a, ballast_mib)) != 0) {
        if (rc == -1)
            fprintf (stderr, "heat2d: rank %d: setup: out of memory\n", a->world_rank);
        rc = 2;
        goto out;
    }
    if (a->rank == 0 && !a->quiet)
        printf ("heat2d: %dx%d grid, %lld steps, %d ranks (no libelastic)\n",
                a->nx,
                a->ny,
                (long long)a->steps,
                a->size);
    for (a->step = 0; a->step < a->steps; a->step++) {
        if (progress > 0 && a->step % progress == 0 && a->rank == 0) {
            printf ("step %lld\n", (long long)a->step);
            fflush (stdout);
        }
        if (sleep_ms > 0)
            nanosleep (&(struct timespec){sleep_ms / 1000, sleep_ms % 1000 * 1000000},
                       NULL);
        if (jacobi_step (a) != MPI_SUCCESS) {
            fprintf (stderr, "heat2d: rank %d: an MPI call failed\n", a->world_rank);
            rc = 1;
            goto out;
        }
    }
    if (checksum (a, &sum) != MPI_SUCCESS) {
        rc = 1;
        goto out;
    }
    if (a->ballast) {
        int bad = 0, allbad = 0;
        check_ballast (a);
        bad = a->ballast_bad;
        MPI_Allreduce (&bad, &allbad, 1, MPI_INT, MPI_SUM, a->comm);
        if (a->rank == 0)
            printf ("ballast %s (%d bad elements)\n", allbad ? "BAD" : "ok", allbad);
    }
    if (a->rank == 0) {
        printf ("final world %d, events 0\n", a->size);
        printf ("checksum %016llx\n", (unsigned long long)sum);
    }
    rc = 0;
out:
    free (a->u);
    free (a->v);
    free (a->ballast);
    fflush (stdout);
    MPI_Finalize ();
    return rc;
}

int main (int argc, char **argv)
{
    struct app a = {.nx = 256, .ny = 256, .steps = 100};
    struct inject inj;
    elastic_config_t cfg;
    elastic_error_t err;
    elastic_info_t info;
    long ballast_mib = 0, mpi_error_step = -1, sleep_ms = 0, progress = 0;
    int rc, mrc, active, nranks, no_elastic = 0;
    double t_start;
    uint64_t sum;

    inject_init (&inj);
    elastic_config_init (&cfg); /* options set fields; ELASTIC_* variables override */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp (o, "--nx"))
            a.nx = (int)parse_num (argv[0], o, v, 1, 1 << 20), i++;
        else if (!strcmp (o, "--ny"))
            a.ny = (int)parse_num (argv[0], o, v, 1, 1 << 24), i++;
        else if (!strcmp (o, "--steps"))
            a.steps = parse_num (argv[0], o, v, 0, 1L << 40), i++;
        else if (!strcmp (o, "--ballast"))
            ballast_mib = parse_num (argv[0], o, v, 0, 1 << 20), i++;
        else if (!strcmp (o, "--mpi-error"))
            mpi_error_step = parse_num (argv[0], o, v, 0, 1L << 40), i++;
        else if (!strcmp (o, "--persist-period"))
            cfg.persist_period = (int)parse_num (argv[0], o, v, 0, 1 << 30), i++;
        else if (!strcmp (o, "--snapshot-dir")) {
            if (!v || !*v) {
                fprintf (stderr,
                         "%s: --snapshot-dir: '' is invalid (expected a path)\n",
                         argv[0]);
                return 2;
            }
            cfg.snapshot_dir = v, i++;
        } else if (!strcmp (o, "--sleep"))
            sleep_ms = parse_num (argv[0], o, v, 0, 60000), i++;
        else if (!strcmp (o, "--progress"))
            progress = parse_num (argv[0], o, v, 0, 1L << 40), i++;
        else if (!strcmp (o, "--fail")) {
            if (!v || inject_parse (&inj, argv[0], v) < 0)
                return 2;
            i++;
        } else if (!strcmp (o, "--fail-rank") || !strcmp (o, "--fail-step")) {
            if (inject_parse_half (&inj, argv[0], o[7], v) < 0)
                return 2;
            i++;
        } else if (!strcmp (o, "--quiet"))
            a.quiet = 1;
        else if (!strcmp (o, "--no-elastic"))
            no_elastic = 1;
        else if (!strcmp (o, "--copy-restore"))
            a.copy_restore = 1;
        else if (!strcmp (o, "--report-buffers"))
            a.report_buffers = 1;
        else {
            usage (argv[0]);
            return 2;
        }
    }
    if (inject_check (&inj, argv[0]) < 0)
        return 2;
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);
    MPI_Comm_size (MPI_COMM_WORLD, &nranks);
    t_start = MPI_Wtime ();
    if (no_elastic) {
        if (inj.n > 0 || inj.hook[0] || mpi_error_step >= 0 || cfg.persist_period > 0) {
            if (a.world_rank == 0)
                fprintf (stderr,
                         "%s: --no-elastic is invalid with --fail, --mpi-error or "
                         "--persist-period (expected none of them)\n",
                         argv[0]);
            MPI_Finalize ();
            return 2;
        }
        return run_plain (&a, ballast_mib, sleep_ms, progress);
    }

    /* 1. the manager: defaults and options, overridden by ELASTIC_* variables */
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, &cfg, &a.m, &err)) != ELASTIC_OK) {
        fprintf (stderr, "heat2d: %s\n", err.text);
        MPI_Finalize ();
        return elastic_exit_code (rc);
    }
    /* named by the original rank from here on: a process a growth started
     * (the job's new rank 8, say) is rank 0 of its own MPI_COMM_WORLD */
    elastic_manager_info (a.m, &info);
    a.world_rank = info.original_rank;

    /* 2. this rank's block (none on a spare), and its registration */
    a.comm = elastic_manager_comm (a.m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        if ((rc = setup_block (&a, ballast_mib)) != 0) {
            if (rc == -2) {
                finish (&a, ELASTIC_OK, "", "");
                return 2;
            }
            return finish (&a, ELASTIC_ERR_NOMEM, "setup", "out of memory");
        }
    }
    a.u_seen = a.u;
    a.ballast_seen = a.ballast;
    a.step = 0;
    if ((rc = elastic_register_value (a.m, "step", &a.step, sizeof (a.step), &err)) !=
            ELASTIC_OK ||
        (rc = elastic_register_array (
             a.m, "u", a.u ? a.u + a.nx : NULL, a.nx * sizeof (double), a.rows, &err)) !=
            ELASTIC_OK ||
        (ballast_mib > 0 &&
         (rc = elastic_register_array (
              a.m, "ballast", a.ballast, sizeof (uint64_t), a.ballast_count, &err)) !=
             ELASTIC_OK) ||
        (rc = elastic_set_type (a.m, "step", ELASTIC_TYPE_INT64, &err)) != ELASTIC_OK ||
        (rc = elastic_set_type (a.m, "u", ELASTIC_TYPE_FLOAT64, &err)) != ELASTIC_OK ||
        (ballast_mib > 0 &&
         (rc = elastic_set_type (a.m, "ballast", ELASTIC_TYPE_UINT64, &err)) !=
             ELASTIC_OK))
        return finish (&a, rc, "register", err.text);
    /* recoveries restore the blocks straight into the grid and the ballast
     * (kept where a rank's block is unchanged) */
    if (!a.copy_restore &&
        ((rc = elastic_array_set_realloc (a.m, "u", place_grid, &a, &err)) !=
             ELASTIC_OK ||
         (ballast_mib > 0 &&
          (rc = elastic_array_set_realloc (a.m, "ballast", place_ballast, &a, &err)) !=
              ELASTIC_OK)))
        return finish (&a, rc, "register", err.text);

    /* 3. start: resumes from a snapshot if this is a relaunch (then the step
     * and the grid are restored and rebuild() has run); spares wait in here
     * until they are needed */
    if ((rc = elastic_manager_start (a.m, rebuild, &a, &active, &err)) != ELASTIC_OK)
        return finish (&a, rc, "start", err.text);
    if (!active) {
        /* a spare that was not needed: show that it slept */
        struct rusage ru;
        getrusage (RUSAGE_SELF, &ru);
        printf ("spare rank %d released after %.2f s idle, %.3f s CPU\n",
                a.world_rank,
                MPI_Wtime () - t_start,
                ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
        fflush (stdout);
        return finish (&a, ELASTIC_OK, "", "");
    }
    elastic_manager_info (a.m, &info);
    if (info.resumed_step >= 0 && info.rank == 0)
        printf ("resumed from step %lld (file %s, world %d -> %d)\n",
                (long long)info.resumed_step,
                info.resumed_from,
                info.resumed_size,
                info.size);
    if (a.world_rank == 0 && !a.quiet)
        printf ("heat2d: %dx%d grid, %lld steps, %d ranks (%d working, %d spares)\n",
                a.nx,
                a.ny,
                (long long)a.steps,
                nranks,
                info.size,
                info.idle_spares);

    /* 4. the loop; a.step is restored whenever the world changes */
    for (;;) {
        while (a.step < a.steps) {
            if ((rc = elastic_maybe_snapshot (a.m, a.step, &err)) != ELASTIC_OK)
                return finish (&a, rc, "snapshot", err.text);
            if ((rc = elastic_maybe_reshard_up (a.m, a.step, rebuild, &a, NULL, &err)) !=
                ELASTIC_OK)
                return finish (&a, rc, "reshard up", err.text);
            if ((mrc = inject_step (&inj, a.world_rank, a.step, a.comm)) != MPI_SUCCESS)
                goto failed;
            if (progress > 0 && a.step % progress == 0 && a.rank == 0) {
                printf ("step %lld\n", (long long)a.step);
                fflush (stdout);
            }
            if (sleep_ms > 0) /* stands for more computation */
                nanosleep (&(struct timespec){sleep_ms / 1000, sleep_ms % 1000 * 1000000},
                           NULL);
            if (a.step == mpi_error_step) {
                /* a programming error, not a failure: libelastic hands it back */
                mpi_error_step = -1;
                mrc = MPI_Send (&a.step, 1, MPI_INT64_T, a.size + 7, 0, a.comm);
                rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err);
                if (a.rank == 0)
                    printf ("non-elastic MPI error returned: %s: %s\n",
                            elastic_strerror (rc),
                            err.text);
                if (rc != ELASTIC_ERR_MPI)
                    return finish (&a, rc, "mpi-error", err.text);
            }
            if ((mrc = jacobi_step (&a)) != MPI_SUCCESS) {
            failed:
                if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) !=
                    ELASTIC_OK)
                    return finish (&a, rc, "reshard down", err.text);
                continue; /* rolled back to the snapshot step */
            }
            inject_after_comm (&inj, a.world_rank, a.step);
            a.step++;
        }
        if ((mrc = checksum (&a, &sum)) == MPI_SUCCESS)
            break;
        if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            return finish (&a, rc, "reshard down", err.text);
    }
    elastic_manager_info (a.m, &info);
    if (a.ballast) {
        int bad = a.ballast_bad, allbad = 0;
        check_ballast (&a);
        bad = a.ballast_bad;
        MPI_Allreduce (&bad, &allbad, 1, MPI_INT, MPI_SUM, a.comm);
        if (a.rank == 0)
            printf ("ballast %s (%d bad elements)\n", allbad ? "BAD" : "ok", allbad);
    }
    if (a.rank == 0) {
        printf ("final world %d, events %d\n", info.size, info.events);
        printf ("checksum %016llx\n", (unsigned long long)sum);
    }
    fflush (stdout);
    return finish (&a, ELASTIC_OK, "", "");
}
