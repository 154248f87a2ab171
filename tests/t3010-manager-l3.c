/* t3010-manager-l3.c - the manager's L3 level in one process (an MPI
 * singleton): signal handlers (installed, SIG_IGN left alone, restored),
 * a suspend on a real signal with its L3 file, resume of values, arrays and
 * blobs (read from the file), resume errors, the deadline. */
#include "config.h"
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include <elastic.h>
#include "lib/tap.h"

#define N 10

struct state {
    int64_t step;
    double w[3];
    double a[N + 2];
    unsigned char blob[5];
    unsigned char fetched[5];
    size_t fetched_size;
    int handler_calls;
    int fetch_rc;
};

static char dir[PATH_MAX];
static char events[8192];

static void on_event (const char *json, void *arg)
{
    (void)arg;
    if (strlen (events) + strlen (json) + 2 < sizeof (events)) {
        strcat (events, json);
        strcat (events, "\n");
    }
}

static int handler (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct state *s = arg;
    uint64_t off, count;
    int old = 0;
    void *buf = NULL;
    size_t size = 0;
    elastic_error_t err;

    (void)comm;
    s->handler_calls++;
    elastic_array_block (m, "a", &off, &count, NULL);
    if (elastic_array_restore (m, "a", s->a, count, &err) != ELASTIC_OK)
        return -1;
    s->fetch_rc = elastic_blob_fetch (m, "blob", 1, &old, &buf, &size, &err);
    if (s->fetch_rc == ELASTIC_OK && size <= sizeof (s->fetched)) {
        memcpy (s->fetched, buf, size);
        s->fetched_size = size;
    }
    free (buf);
    return 0;
}

static void clear_env (void)
{
    static const char *vars[] = {"ELASTIC_RESUME",
                                 "ELASTIC_RESUME_MODE",
                                 "ELASTIC_RESUME_FRESH_OK",
                                 "ELASTIC_RESUME_FROM",
                                 "ELASTIC_SIGNALS",
                                 "ELASTIC_SIGNAL_CHECK_PERIOD",
                                 "ELASTIC_DEADLINE",
                                 "ELASTIC_DEADLINE_MARGIN",
                                 "ELASTIC_PERSIST_PERIOD",
                                 "ELASTIC_RUN_ID",
                                 "SLURM_JOB_ID",
                                 "SLURM_RESTART_COUNT",
                                 "SLURM_JOB_END_TIME",
                                 NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv (vars[i]);
}

/* Create a manager over MPI_COMM_WORLD with snapshot_dir = dir and register
 * the state (count elements of "a"). */
static int
setup (elastic_manager_t **m, struct state *s, uint64_t count, elastic_error_t *err)
{
    elastic_config_t cfg;
    int rc;

    elastic_config_init (&cfg);
    cfg.snapshot_dir = dir;
    cfg.snapshot_period = 1;
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, &cfg, m, err)) != ELASTIC_OK)
        return rc;
    elastic_manager_set_event_callback (*m, on_event, NULL);
    if ((rc = elastic_register_value (*m, "step", &s->step, sizeof (s->step), err)) ||
        (rc = elastic_register_value (*m, "w", s->w, sizeof (s->w), err)) ||
        (rc = elastic_register_array (*m, "a", s->a, sizeof (double), count, err)) ||
        (rc = elastic_register_blob (*m, "blob", s->blob, sizeof (s->blob), err)) ||
        (rc = elastic_set_type (*m, "step", ELASTIC_TYPE_INT64, err)) ||
        (rc = elastic_set_type (*m, "w", ELASTIC_TYPE_FLOAT64, err)) ||
        (rc = elastic_set_type (*m, "a", ELASTIC_TYPE_FLOAT64, err)))
        return rc;
    return ELASTIC_OK;
}

static void fill (struct state *s, int64_t step)
{
    s->step = step;
    for (int i = 0; i < 3; i++)
        s->w[i] = step * 10.0 + i;
    for (int i = 0; i < N; i++)
        s->a[i] = step * 100.0 + i;
    for (int i = 0; i < 5; i++)
        s->blob[i] = (unsigned char)(step + i);
}

static int file_exists (const char *name)
{
    char path[PATH_MAX + 64];
    struct stat sb;
    snprintf (path, sizeof (path), "%s/%s", dir, name);
    return stat (path, &sb) == 0;
}

/* The state the steps below share, in order: each builds on the files and
 * the environment the earlier ones left. */
static elastic_manager_t *m = NULL;
static elastic_error_t err;
static elastic_info_t info;
static struct sigaction sa;
static struct state s;
static int active, rc;

/* 1. handlers: installed for the list, SIG_IGN left alone, restored */
static void check_handlers (void)
{
    signal (SIGUSR2, SIG_IGN);
    setenv ("ELASTIC_SIGNALS", "TERM,USR2", 1);
    memset (&s, 0, sizeof (s));
    is_int (setup (&m, &s, N, &err), ELASTIC_OK, "create with ELASTIC_SIGNALS=TERM,USR2");
    sigaction (SIGTERM, NULL, &sa);
    ok (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN, "SIGTERM is caught");
    sigaction (SIGUSR2, NULL, &sa);
    ok (sa.sa_handler == SIG_IGN, "an ignored SIGUSR2 stays ignored");
    elastic_manager_destroy (m);
    sigaction (SIGTERM, NULL, &sa);
    ok (sa.sa_handler == SIG_DFL, "destroy restores SIGTERM's default");
    signal (SIGUSR2, SIG_DFL);
    setenv ("ELASTIC_SIGNALS", "none", 1);
    is_int (setup (&m, &s, N, &err), ELASTIC_OK, "create with ELASTIC_SIGNALS=none");
    sigaction (SIGTERM, NULL, &sa);
    ok (sa.sa_handler == SIG_DFL, "none: SIGTERM is not caught");
    elastic_manager_destroy (m);
    clear_env ();
}

/* 2. bad launch variables fail the creation */
static void check_bad_variables (void)
{
    setenv ("ELASTIC_RESUME", "yes", 1);
    is_int (setup (&m, &s, N, &err), ELASTIC_ERR_INVAL, "ELASTIC_RESUME=yes is rejected");
    is_str (err.text,
            "ELASTIC_RESUME: 'yes' is invalid (expected 1 to resume from the newest L3 "
            "snapshot, or 0)",
            "the message names the variable and what is accepted");
    elastic_manager_destroy (m);
    m = NULL;
    clear_env ();
}

/* 3. a suspend on a real signal (agreement every step) */
static void check_suspend (void)
{
    setenv ("ELASTIC_SIGNAL_CHECK_PERIOD", "1", 1);
    setenv ("ELASTIC_RUN_ID", "t3010", 1);
    events[0] = '\0';
    fill (&s, 0);
    is_int (setup (&m, &s, N, &err), ELASTIC_OK, "create");
    is_int (elastic_manager_start (m, handler, &s, &active, &err), ELASTIC_OK, "start");
    is_int (s.handler_calls, 0, "a fresh start calls no handler");
    rc = ELASTIC_OK;
    while (s.step < 100) {
        if ((rc = elastic_maybe_snapshot (m, s.step, &err)) != ELASTIC_OK)
            break;
        if (s.step == 5)
            raise (SIGUSR1);
        fill (&s, s.step + 1);
    }
    is_int (rc, ELASTIC_SUSPENDED, "maybe_snapshot answers ELASTIC_SUSPENDED");
    ok (s.step == 6, "at the step after the signal (step %lld)", (long long)s.step);
    ok (strstr (err.text, "suspended at step 6 (SIGUSR1)") != NULL,
        "err says when and why");
    diag ("%s", err.text);
    ok (file_exists ("snap-000000000006.h5"), "the L3 file of step 6 is there");
    elastic_manager_info (m, &info);
    ok (info.persist_step == 6, "info.persist_step is 6");
    ok (strstr (events, "\"event\":\"persist\",\"step\":6") != NULL &&
            strstr (events,
                    "\"event\":\"suspend\",\"step\":6,\"world_size\":1,"
                    "\"reason\":\"SIGUSR1\"") != NULL,
        "persist and suspend events");
    is_int (
        elastic_maybe_snapshot (m, 7, &err), ELASTIC_SUSPENDED, "and it stays suspended");
    is_int (
        elastic_exit_code (ELASTIC_SUSPENDED), ELASTIC_EXIT_SUSPENDED, "exit code 75");
    elastic_manager_destroy (m);
    clear_env ();
}

/* 4. a fresh start with the run's snapshots present: fresh, warned */
static void check_fresh_start (void)
{
    setenv ("ELASTIC_RUN_ID", "t3010", 1);
    memset (&s, 0, sizeof (s));
    setup (&m, &s, N, &err);
    is_int (
        elastic_manager_start (m, handler, &s, &active, &err), ELASTIC_OK, "fresh start");
    ok (s.step == 0 && s.handler_calls == 0,
        "without ELASTIC_RESUME nothing is restored");
    elastic_manager_destroy (m);
}

/* 5. resume: values, the array, the blob (from the file), the info */
static void check_resume (void)
{
    setenv ("ELASTIC_RESUME", "1", 1);
    memset (&s, 0, sizeof (s));
    events[0] = '\0';
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err), ELASTIC_OK, "resume");
    ok (s.step == 6, "the step is restored");
    ok (s.w[0] == 60 && s.w[2] == 62, "the value w is restored");
    ok (s.a[0] == 600 && s.a[N - 1] == 600 + N - 1,
        "the array is restored by the handler");
    is_int (s.fetch_rc, ELASTIC_OK, "elastic_blob_fetch reads the blob from the file");
    ok (s.fetched_size == 5 && s.fetched[0] == 6 && s.fetched[4] == 10,
        "... old rank 0's blob of step 6");
    elastic_manager_info (m, &info);
    ok (info.resumed_step == 6 && info.resumed_size == 1 && info.resumed_from &&
            strstr (info.resumed_from, "snap-000000000006.h5"),
        "info: resumed from step 6 of a 1-rank world, file %s",
        info.resumed_from ? info.resumed_from : "(null)");
    ok (info.snapshot_step == 6, "the restored state is protected in L1");
    ok (strstr (events,
                "\"event\":\"resume\",\"step\":6,\"old_size\":1,\"new_size\":1") != NULL,
        "a resume event");
    elastic_manager_destroy (m);
}

/* 6. a snapshot that does not fit */
static void check_no_fit (void)
{
    memset (&s, 0, sizeof (s));
    setup (&m, &s, N + 2, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_ERR_INVAL,
            "a different array size is refused");
    ok (strstr (err.text, "array 'a': ") &&
            strstr (err.text,
                    "holds 10 elements, this run registered 12 (a different "
                    "problem size?)"),
        "the message says what differs");
    diag ("%s", err.text);
    elastic_manager_destroy (m);
}

/* 7. no snapshot: an error, or a fresh start if allowed */
static void check_no_snapshot (void)
{
    setenv ("ELASTIC_RUN_ID", "another-run", 1);
    memset (&s, 0, sizeof (s));
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_ERR_NO_SNAPSHOT,
            "ELASTIC_RESUME=1 and no snapshot of the run: ELASTIC_ERR_NO_SNAPSHOT");
    ok (strstr (err.text,
                "resume (ELASTIC_RESUME=1): no L3 snapshot of run 'another-run'") &&
            strstr (err.text, "(ELASTIC_RESUME_FRESH_OK=1 starts fresh instead)"),
        "the message says why and what to do");
    diag ("%s", err.text);
    elastic_manager_destroy (m);
    setenv ("ELASTIC_RESUME_FRESH_OK", "1", 1);
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_OK,
            "... with ELASTIC_RESUME_FRESH_OK=1 it starts fresh");
    elastic_manager_info (m, &info);
    ok (info.resumed_step == -1 && info.resumed_from == NULL, "info: not resumed");
    elastic_manager_destroy (m);
    /* 2 (what the launchers give a restart): the run saved nothing (the
     * directory holds other runs' files only), so it starts fresh */
    setenv ("ELASTIC_RESUME_FRESH_OK", "2", 1);
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_OK,
            "ELASTIC_RESUME_FRESH_OK=2 and no snapshot of the run: it starts fresh");
    elastic_manager_destroy (m);
    unsetenv ("ELASTIC_RESUME_FRESH_OK");
}

/* 7b. the only snapshot damaged: ELASTIC_RESUME_FRESH_OK=2 does not start
 * fresh (that would silently discard the run's work), 1 does */
static void check_damaged_only (void)
{
    char saved[PATH_MAX], path[PATH_MAX + 32];
    FILE *fp;

    snprintf (saved, sizeof (saved), "%s", dir);
    snprintf (path, sizeof (path), "%s/damaged", saved);
    if (mkdir (path, 0700) != 0)
        bail_out ("mkdir %s", path);
    snprintf (dir, sizeof (dir), "%s", path);
    snprintf (path, sizeof (path), "%s/snap-000000000005.h5", dir);
    if (!(fp = fopen (path, "w")))
        bail_out ("fopen %s", path);
    for (int i = 0; i < 4096; i++)
        fputc ((i * 7919) & 0xff, fp);
    fclose (fp);
    unsetenv ("ELASTIC_RUN_ID");
    setenv ("ELASTIC_RESUME_FRESH_OK", "2", 1);
    memset (&s, 0, sizeof (s));
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_ERR_NO_SNAPSHOT,
            "ELASTIC_RESUME_FRESH_OK=2, the only snapshot damaged: "
            "ELASTIC_ERR_NO_SNAPSHOT, not a fresh start");
    ok (strstr (err.text, "1 rejected, the newest snap-000000000005.h5") != NULL,
        "the message names the damaged file");
    diag ("%s", err.text);
    elastic_manager_destroy (m);
    setenv ("ELASTIC_RESUME_FRESH_OK", "1", 1);
    setup (&m, &s, N, &err);
    is_int (elastic_manager_start (m, handler, &s, &active, &err),
            ELASTIC_OK,
            "... with ELASTIC_RESUME_FRESH_OK=1 it starts fresh anyway");
    elastic_manager_destroy (m);
    unsetenv ("ELASTIC_RESUME_FRESH_OK");
    unlink (path);
    rmdir (dir);
    snprintf (dir, sizeof (dir), "%s", saved);
}

/* 8. resume_from a file, whatever its run */
static void check_resume_from (void)
{
    {
        char path[PATH_MAX + 32];
        snprintf (path, sizeof (path), "%s/snap-000000000006.h5", dir);
        unsetenv ("ELASTIC_RESUME");
        setenv ("ELASTIC_RESUME_FROM", path, 1);
        memset (&s, 0, sizeof (s));
        setup (&m, &s, N, &err);
        is_int (elastic_manager_start (m, handler, &s, &active, &err),
                ELASTIC_OK,
                "ELASTIC_RESUME_FROM=FILE resumes by itself");
        ok (s.step == 6 && s.a[3] == 603, "from that file");
        elastic_manager_destroy (m);
        unsetenv ("ELASTIC_RESUME_FROM");
    }
    clear_env ();
}

/* 9. the deadline: suspend before it, having measured a step */
static void check_deadline (void)
{
    {
        time_t deadline = time (NULL) + 4;
        char d[32];
        struct timespec nap = {0, 50000000};
        snprintf (d, sizeof (d), "%lld", (long long)deadline);
        setenv ("ELASTIC_DEADLINE", d, 1);
        setenv ("ELASTIC_DEADLINE_MARGIN", "2", 1);
        setenv ("ELASTIC_RUN_ID", "t3010-deadline", 1);
        fill (&s, 0);
        setup (&m, &s, N, &err);
        elastic_manager_start (m, handler, &s, &active, &err);
        while ((rc = elastic_maybe_snapshot (m, s.step, &err)) == ELASTIC_OK &&
               s.step < 1000) {
            nanosleep (&nap, NULL);
            fill (&s, s.step + 1);
        }
        is_int (rc, ELASTIC_SUSPENDED, "suspended before the deadline");
        ok (strstr (err.text, "(deadline)") != NULL, "the reason is the deadline");
        ok (time (NULL) < deadline,
            "with time to spare (%lld s)",
            (long long)(deadline - time (NULL)));
        diag ("%s", err.text);
        elastic_manager_destroy (m);
        /* a deadline in the past is ignored (warned) */
        snprintf (d, sizeof (d), "%lld", (long long)time (NULL) - 10);
        setenv ("ELASTIC_DEADLINE", d, 1);
        fill (&s, 0);
        setup (&m, &s, N, &err);
        elastic_manager_start (m, handler, &s, &active, &err);
        while ((rc = elastic_maybe_snapshot (m, s.step, &err)) == ELASTIC_OK &&
               s.step < 20)
            fill (&s, s.step + 1);
        is_int (rc, ELASTIC_OK, "a deadline already past does not suspend");
        elastic_manager_destroy (m);
        clear_env ();
    }
}

int main (int argc, char **argv)
{
    MPI_Init (&argc, &argv);
    snprintf (dir,
              sizeof (dir),
              "%s/t3010.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (dir))
        bail_out ("mkdtemp");
    clear_env ();

    check_handlers ();
    check_bad_variables ();
    check_suspend ();
    check_fresh_start ();
    check_resume ();
    check_no_fit ();
    check_no_snapshot ();
    check_damaged_only ();
    check_resume_from ();
    check_deadline ();

    {
        char cmd[PATH_MAX + 16];
        snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
        if (system (cmd) != 0)
            diag ("cannot remove %s", dir);
    }
    MPI_Finalize ();
    return done_testing ();
}
