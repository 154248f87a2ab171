/* sgd.c - elastic data-parallel linear regression (libelastic example)
 *
 * The data set (samples of d features and a target) is distributed in
 * blocks of samples; the weights are replicated.  Each step every rank sums
 * the gradient over its samples and MPI_Allreduce combines the sums.  The
 * per-sample terms are rounded to 32.32 fixed point and summed as integers,
 * so the sum, and the final weights, are the same for any decomposition and
 * any failures on the way: a bit-identical result to compare.
 *
 * Elastic parts: the registration (step, weights, data set), the calls at
 * the top of each step, maybe_reshard_down on an MPI error, and rebuild().
 * With --persist-period N the state goes to an HDF5 file every N steps
 * (/arrays/data float64 [samples][features+1], /values/w float64
 * [features]); SIGTERM or SIGUSR1 suspends (exit 75) and ELASTIC_RESUME=1
 * resumes, on any number of ranks.
 *
 * usage: sgd [--samples N] [--features D] [--steps N] [--lr X]
 *            [--persist-period N] [--snapshot-dir DIR] [--sleep MS] [--progress N]
 *            [--fail RANK:STEP[:WHERE]]... [--fail-rank R --fail-step S]... [--quiet]
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <elastic.h>

#include "inject.h"

#define FIXED_ONE    4294967296.0 /* 2^32 */
#define MAX_FEATURES 256

struct app {
    elastic_manager_t *m;
    MPI_Comm comm; /* owned by libelastic */
    int rank, size, world_rank;
    int d;      /* features */
    uint64_t n; /* samples, global */
    int64_t steps;
    double lr;
    int64_t step;           /* registered value */
    double w[MAX_FEATURES]; /* registered value: the model */
    double *data;           /* my samples: d features then the target */
    uint64_t first, count;  /* my block of samples */
    int quiet;
};

static uint64_t splitmix64 (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* uniform in [-1, 1) */
static double uniform (uint64_t key)
{
    return 2.0 * ((double)(splitmix64 (key) >> 11) / 9007199254740992.0) - 1.0;
}

static void make_sample (int d, uint64_t i, double *s)
{
    double y = 0.0;
    for (int k = 0; k < d; k++) {
        double wk = (double)(k + 1) / d * (k % 2 ? -1.0 : 1.0);
        s[k] = uniform (i * (d + 1) + k);
        y += wk * s[k];
    }
    s[d] = y + 0.01 * uniform (i * (d + 1) + d);
}

/* The handler: new communicator, new block of samples.  The weights and
 * the step are registered values, already restored. */
static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_error_t err;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_array_block (m, "data", &a->first, &a->count, NULL);
    free (a->data);
    if (!(a->data = malloc ((a->count * (a->d + 1) + 1) * sizeof (double))))
        return -1;
    if (elastic_array_restore (m, "data", a->data, a->count, &err) != ELASTIC_OK) {
        fprintf (stderr, "sgd: %s\n", err.text);
        return -1;
    }
    if (a->rank == 0 && !a->quiet)
        printf ("resharded at step %lld: %d ranks, %llu samples on rank 0\n",
                (long long)a->step,
                a->size,
                (unsigned long long)a->count);
    fflush (stdout);
    return 0;
}

/* One gradient step; returns an MPI error code.  loss gets the mean squared
 * error before the step. */
static int sgd_step (struct app *a, double *loss)
{
    int64_t local[MAX_FEATURES + 1] = {0}, total[MAX_FEATURES + 1];
    int d = a->d, rc;

    for (uint64_t i = 0; i < a->count; i++) {
        const double *s = &a->data[i * (d + 1)];
        double r = -s[d];
        for (int k = 0; k < d; k++)
            r += a->w[k] * s[k];
        for (int k = 0; k < d; k++)
            local[k] += (int64_t)llround (r * s[k] * FIXED_ONE);
        local[d] += (int64_t)llround (r * r * FIXED_ONE);
    }
    if ((rc = MPI_Allreduce (local, total, d + 1, MPI_INT64_T, MPI_SUM, a->comm)) !=
        MPI_SUCCESS)
        return rc;
    for (int k = 0; k < d; k++)
        a->w[k] -= a->lr * ((double)total[k] / FIXED_ONE) / (double)a->n;
    *loss = ((double)total[d] / FIXED_ONE) / (double)a->n;
    return MPI_SUCCESS;
}

static double
parse_real (const char *prog, const char *opt, const char *s, double min, double max)
{
    char *end;
    double v;

    errno = 0;
    v = strtod (s ? s : "", &end);
    if (!s || *s == '\0' || *end != '\0' || errno != 0 || !(v >= min && v <= max)) {
        fprintf (stderr,
                 "%s: %s: '%s' is invalid (expected a number from %g to %g)\n",
                 prog,
                 opt,
                 s ? s : "",
                 min,
                 max);
        exit (2);
    }
    return v;
}

static int finish (struct app *a, int rc, const char *what, const char *text)
{
    if (rc == ELASTIC_SUSPENDED) {
        if (a->rank == 0)
            printf ("suspended at step %lld\n", (long long)a->step);
    } else if (rc != ELASTIC_OK)
        fprintf (stderr,
                 "sgd: rank %d: %s: %s (%s)\n",
                 a->world_rank,
                 what,
                 text,
                 elastic_strerror (rc));
    elastic_manager_destroy (a->m);
    free (a->data);
    fflush (stdout);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}

int main (int argc, char **argv)
{
    struct app a = {.d = 16, .n = 4096, .steps = 200, .lr = 0.5};
    struct inject inj;
    elastic_config_t cfg;
    elastic_error_t err;
    elastic_info_t info;
    double loss = 0.0;
    uint64_t h = 0xcbf29ce484222325ull;
    int rc, mrc, active;
    long sleep_ms = 0, progress = 0;

    inject_init (&inj);
    elastic_config_init (&cfg); /* options set fields; ELASTIC_* variables override */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp (o, "--samples"))
            a.n = (uint64_t)parse_real (argv[0], o, v, 1, 1e12), i++;
        else if (!strcmp (o, "--features"))
            a.d = (int)parse_real (argv[0], o, v, 1, MAX_FEATURES), i++;
        else if (!strcmp (o, "--steps"))
            a.steps = (int64_t)parse_real (argv[0], o, v, 0, 1e12), i++;
        else if (!strcmp (o, "--lr"))
            a.lr = parse_real (argv[0], o, v, 1e-9, 100), i++;
        else if (!strcmp (o, "--persist-period"))
            cfg.persist_period = (int)parse_real (argv[0], o, v, 0, 1 << 30), i++;
        else if (!strcmp (o, "--snapshot-dir") && v && *v)
            cfg.snapshot_dir = v, i++;
        else if (!strcmp (o, "--sleep"))
            sleep_ms = (long)parse_real (argv[0], o, v, 0, 60000), i++;
        else if (!strcmp (o, "--progress"))
            progress = (long)parse_real (argv[0], o, v, 0, 1e12), i++;
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
        else {
            fprintf (
                stderr,
                "usage: %s [--samples N] [--features D] [--steps N] [--lr X]\n"
                "          [--persist-period N] [--snapshot-dir DIR] [--sleep MS] "
                "[--progress N]\n"
                "          [--fail RANK:STEP[:step|snapshot|recovery|protect|persist]]"
                "... [--fail-rank R --fail-step S]...\n"
                "          [--quiet]\n",
                argv[0]);
            return 2;
        }
    }
    if (inject_check (&inj, argv[0]) < 0)
        return 2;
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);

    if ((rc = elastic_manager_create (MPI_COMM_WORLD, &cfg, &a.m, &err)) != ELASTIC_OK) {
        fprintf (stderr, "sgd: %s\n", err.text);
        MPI_Finalize ();
        return elastic_exit_code (rc);
    }
    {
        /* named by the original rank: a process a growth started is rank 0
         * of its own MPI_COMM_WORLD */
        elastic_info_t info;
        elastic_manager_info (a.m, &info);
        a.world_rank = info.original_rank;
    }
    /* my block of the data set (nothing on a spare) */
    a.comm = elastic_manager_comm (a.m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        a.count = a.n / a.size + ((uint64_t)a.rank < a.n % a.size ? 1 : 0);
        a.first = (uint64_t)a.rank * (a.n / a.size) +
                  ((uint64_t)a.rank < a.n % a.size ? (uint64_t)a.rank : a.n % a.size);
        if (!(a.data = malloc ((a.count * (a.d + 1) + 1) * sizeof (double))))
            return finish (&a, ELASTIC_ERR_NOMEM, "setup", "out of memory");
        for (uint64_t i = 0; i < a.count; i++)
            make_sample (a.d, a.first + i, &a.data[i * (a.d + 1)]);
    }
    if ((rc = elastic_register_value (a.m, "step", &a.step, sizeof (a.step), &err)) !=
            ELASTIC_OK ||
        (rc = elastic_register_value (a.m, "w", a.w, a.d * sizeof (double), &err)) !=
            ELASTIC_OK ||
        (rc = elastic_register_array (
             a.m, "data", a.data, (a.d + 1) * sizeof (double), a.count, &err)) !=
            ELASTIC_OK ||
        (rc = elastic_set_type (a.m, "step", ELASTIC_TYPE_INT64, &err)) != ELASTIC_OK ||
        (rc = elastic_set_type (a.m, "w", ELASTIC_TYPE_FLOAT64, &err)) != ELASTIC_OK ||
        (rc = elastic_set_type (a.m, "data", ELASTIC_TYPE_FLOAT64, &err)) != ELASTIC_OK)
        return finish (&a, rc, "register", err.text);
    /* a relaunch resumes in here: step, w and the data set are restored */
    if ((rc = elastic_manager_start (a.m, rebuild, &a, &active, &err)) != ELASTIC_OK)
        return finish (&a, rc, "start", err.text);
    if (!active)
        return finish (&a, ELASTIC_OK, "", "");
    elastic_manager_info (a.m, &info);
    if (info.resumed_step >= 0 && info.rank == 0)
        printf ("resumed from step %lld (file %s, world %d -> %d)\n",
                (long long)info.resumed_step,
                info.resumed_from,
                info.resumed_size,
                info.size);

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
        if ((mrc = sgd_step (&a, &loss)) != MPI_SUCCESS) {
        failed:
            if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) !=
                ELASTIC_OK)
                return finish (&a, rc, "reshard down", err.text);
            continue; /* rolled back: step and w restored */
        }
        a.step++;
    }
    /* the weights are replicated: every rank can print them */
    for (int k = 0; k < a.d; k++) {
        const unsigned char *p = (const unsigned char *)&a.w[k];
        for (size_t b = 0; b < sizeof (double); b++) {
            h ^= p[b];
            h *= 0x100000001b3ull;
        }
    }
    elastic_manager_info (a.m, &info);
    if (a.rank == 0) {
        printf ("loss %.6e, w[0] %.6f\n", loss, a.w[0]);
        printf ("final world %d, events %d\n", info.size, info.events);
        printf ("checksum %016llx\n", (unsigned long long)h);
    }
    fflush (stdout);
    return finish (&a, ELASTIC_OK, "", "");
}
