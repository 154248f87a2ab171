/* t2009-exec-api.c - the agent's C API (include/elastic/agent.h), linked
 * against the installed library's interface only: a function entrypoint
 * whose returned bytes come back keyed by global rank; the worker group
 * viewed read-only from another thread while it runs; a stop requested
 * from another thread; a custom rendezvous; and a custom backend (real
 * forked processes) that reports exits late and out of order, so the root
 * cause must come from the error files' timestamps.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <elastic/agent.h>

#include "lib/tap.h"

static char tmpdir[] = "/tmp/t2009-XXXXXX";

static void sleep_ms (int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep (&ts, NULL);
}

/* ---- 1. function entrypoint, observed from another thread ---------------- */

static char gate[256];

static int fn_report (void *arg, void **result, size_t *len)
{
    char *buf = malloc (128);
    /* wait until the observer has seen us all running */
    while (access (gate, F_OK) != 0)
        sleep_ms (10);
    *len = (size_t)snprintf (buf,
                             128,
                             "rank=%s world=%s %s",
                             getenv ("RANK"),
                             getenv ("WORLD_SIZE"),
                             (const char *)arg);
    *result = buf;
    return 0;
}

struct observation {
    elastic_agent_t *agent;
    int saw_healthy;
    int pids_alive;
    int ranks_ok;
};

static void *observer (void *arg)
{
    struct observation *o = arg;
    struct elastic_agent_group_info g;
    struct timespec t0, t1;

    clock_gettime (CLOCK_MONOTONIC, &t0);
    do {
        sleep_ms (10);
        clock_gettime (CLOCK_MONOTONIC, &t1);
        if (elastic_agent_group_info (o->agent, &g) != ELASTIC_OK)
            break;
        if (g.state == ELASTIC_AGENT_HEALTHY) {
            int alive = 0, ranks = 0;
            for (int i = 0; i < g.nworkers; i++) {
                struct elastic_agent_worker_info w;
                if (elastic_agent_worker_info (o->agent, i, &w) == ELASTIC_OK &&
                    w.pid > 0 && kill (w.pid, 0) == 0 && w.state == ELASTIC_AGENT_HEALTHY)
                    alive++;
                if (w.rank == i && w.local_rank == i && w.world_size == 3)
                    ranks++;
            }
            if (alive == 3) {
                o->saw_healthy = 1;
                o->pids_alive = alive;
                o->ranks_ok = ranks == 3;
                break;
            }
        }
    } while (t1.tv_sec - t0.tv_sec < 60);
    close (open (gate, O_CREAT | O_WRONLY, 0644));
    return NULL;
}

static void test_function (void)
{
    elastic_agent_spec_t *spec = elastic_agent_spec_create ();
    elastic_agent_result_t *result = NULL;
    elastic_agent_t *agent;
    struct observation o = {0};
    elastic_error_t err;
    pthread_t t;

    snprintf (gate, sizeof (gate), "%s/gate", tmpdir);
    ok (elastic_agent_spec_set (spec, "nproc-per-node", "3", &err) == ELASTIC_OK,
        "spec: 3 workers");
    ok (elastic_agent_spec_set (spec, "max_restarts", "1", &err) == ELASTIC_OK,
        "spec keys accept torchrun's underscore spelling");
    ok (elastic_agent_spec_set (spec, "redirects", "7", &err) == ELASTIC_ERR_INVAL &&
            strstr (err.text, "redirects: '7'"),
        "a bad value is refused with a message: %s",
        err.text);
    ok (elastic_agent_spec_set (spec, "no-such-key", "1", &err) == ELASTIC_ERR_INVAL,
        "an unknown key is refused: %s",
        err.text);
    is_str (elastic_agent_spec_get (spec, "max-restarts"),
            "1",
            "spec_get returns the text set");
    ok (elastic_agent_create (spec, &err) == NULL && strstr (err.text, "no entrypoint"),
        "an agent needs an entrypoint: %s",
        err.text);
    ok (elastic_agent_spec_set_function (spec, fn_report, "hello", &err) == ELASTIC_OK,
        "function entrypoint");
    agent = elastic_agent_create (spec, &err);
    ok (agent != NULL, "agent created");
    o.agent = agent;
    pthread_create (&t, NULL, observer, &o);
    ok (elastic_agent_run (agent, &result, &err) == ELASTIC_OK, "run");
    pthread_join (t, NULL);
    ok (o.saw_healthy && o.pids_alive == 3,
        "another thread saw the group HEALTHY with 3 live pids");
    ok (o.ranks_ok, "and each worker's rank, local rank and world size");
    is_int (elastic_agent_result_state (result),
            ELASTIC_AGENT_SUCCEEDED,
            "result: SUCCEEDED");
    is_int (elastic_agent_result_exit_status (result), 0, "exit status 0");
    is_int (elastic_agent_result_count (result), 3, "3 ranks in the result");
    for (int r = 0; r < 3; r++) {
        const void *buf;
        size_t len;
        char want[64];
        snprintf (want, sizeof (want), "rank=%d world=3 hello", r);
        ok (elastic_agent_result_return_value (result, r, &buf, &len) == ELASTIC_OK &&
                len == strlen (want) && memcmp (buf, want, len) == 0,
            "rank %d returned '%s'",
            r,
            want);
    }
    is_int (elastic_agent_result_failures (result, NULL), 0, "no failures");
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
}

/* ---- 2. stop from another thread ------------------------------------------- */

static int fn_hang (void *arg, void **result, size_t *len)
{
    for (;;)
        pause ();
    return 0;
}

static void *stopper (void *arg)
{
    elastic_agent_t *agent = arg;
    struct elastic_agent_group_info g;

    for (int i = 0; i < 6000; i++) {
        sleep_ms (10);
        if (elastic_agent_group_info (agent, &g) == ELASTIC_OK &&
            g.state == ELASTIC_AGENT_HEALTHY)
            break;
    }
    elastic_agent_request_stop (agent, SIGINT);
    return NULL;
}

static void test_request_stop (void)
{
    elastic_agent_spec_t *spec = elastic_agent_spec_create ();
    elastic_agent_result_t *result = NULL;
    elastic_agent_t *agent;
    elastic_error_t err;
    pthread_t t;

    elastic_agent_spec_set (spec, "nproc-per-node", "2", &err);
    elastic_agent_spec_set_function (spec, fn_hang, NULL, &err);
    agent = elastic_agent_create (spec, &err);
    pthread_create (&t, NULL, stopper, agent);
    ok (elastic_agent_run (agent, &result, &err) == ELASTIC_OK, "run until stopped");
    pthread_join (t, NULL);
    is_int (elastic_agent_result_state (result),
            ELASTIC_AGENT_STOPPED,
            "request_stop(SIGINT): STOPPED");
    is_int (elastic_agent_result_exit_status (result), 128 + SIGINT, "exit status 130");
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
}

/* ---- 3. a custom rendezvous -------------------------------------------------- */

static int rdzv_calls, barrier_calls;

static int my_next (elastic_agent_t *agent,
                    void *ctx,
                    struct elastic_agent_rdzv_info *info,
                    elastic_error_t *err)
{
    rdzv_calls++;
    info->group_rank = 1;
    info->group_world_size = 2;
    info->master_port = -1;
    snprintf (info->run_id, sizeof (info->run_id), "custom-run");
    return ELASTIC_OK;
}

static int my_waiting (elastic_agent_t *agent, void *ctx)
{
    return 0;
}

static int my_barrier (elastic_agent_t *agent, void *ctx, double timeout)
{
    barrier_calls++;
    return ELASTIC_OK;
}

static const struct elastic_agent_rdzv my_rdzv = {
    .name = "test",
    .next_rendezvous = my_next,
    .num_nodes_waiting = my_waiting,
    .exit_barrier = my_barrier,
};

static int fn_env (void *arg, void **result, size_t *len)
{
    char *buf = malloc (256);
    *len = (size_t)snprintf (buf,
                             256,
                             "%s %s %s %s %s %s",
                             getenv ("RANK"),
                             getenv ("WORLD_SIZE"),
                             getenv ("GROUP_RANK"),
                             getenv ("GROUP_WORLD_SIZE"),
                             getenv ("ELASTIC_RUN_ID"),
                             getenv ("MASTER_PORT") ? getenv ("MASTER_PORT") : "unset");
    *result = buf;
    return 0;
}

static void test_rendezvous (void)
{
    elastic_agent_spec_t *spec = elastic_agent_spec_create ();
    elastic_agent_result_t *result = NULL;
    elastic_agent_t *agent;
    elastic_error_t err;
    const void *buf;
    size_t len;

    elastic_agent_spec_set (spec, "nproc-per-node", "2", &err);
    elastic_agent_spec_set_function (spec, fn_env, NULL, &err);
    agent = elastic_agent_create (spec, &err);
    ok (elastic_agent_set_rendezvous (agent, &my_rdzv, NULL) == ELASTIC_OK,
        "custom rendezvous set");
    ok (elastic_agent_run (agent, &result, &err) == ELASTIC_OK, "run");
    is_int (rdzv_calls, 1, "next_rendezvous called once");
    is_int (barrier_calls, 1, "exit_barrier called once");
    is_int (elastic_agent_result_rank (result, 0),
            2,
            "group rank 1 of 2 with 2 workers: first rank is 2");
    ok (elastic_agent_result_return_value (result, 3, &buf, &len) == ELASTIC_OK &&
            len == strlen ("3 4 1 2 custom-run unset") &&
            memcmp (buf, "3 4 1 2 custom-run unset", len) == 0,
        "rank 3 saw RANK=3 WORLD_SIZE=4 GROUP_RANK=1 GROUP_WORLD_SIZE=2, the run id, no "
        "MASTER_PORT");
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
}

/* ---- 4. a custom backend ------------------------------------------------------ */

struct mine {
    pid_t pid[3];
    int status[3];
    int reaped;
    int starts, monitors, stops, shutdowns;
};

/* worker i: write an error file with timestamp ts[i] (0: none), then die */
static const long long ts[3] = {1700000100, 1700000000, 0};

static void child_main (elastic_agent_t *agent, int i)
{
    char *const *env = elastic_agent_worker_env (agent, i);
    char path[4096] = "";

    elastic_agent_child_reset (agent);
    for (int k = 0; env[k]; k++)
        if (strncmp (env[k], "ELASTIC_ERROR_FILE=", 19) == 0)
            snprintf (path, sizeof (path), "%s", env[k] + 19);
    /* die in rank order: 0 first, then 1, then 2 */
    sleep_ms (50 * (i + 1));
    if (ts[i]) {
        FILE *f = fopen (path, "w");
        fprintf (f,
                 "{\"message\": {\"message\": \"worker %d broke\", \"extraInfo\": "
                 "{\"py_callstack\": \"\", \"timestamp\": \"%lld\"}}}\n",
                 i,
                 ts[i]);
        fclose (f);
        _exit (10 + i);
    }
    raise (SIGKILL);
    _exit (99);
}

static int my_start (elastic_agent_t *agent, void *ctx, elastic_error_t *err)
{
    struct mine *m = ctx;

    m->starts++;
    m->reaped = 0;
    for (int i = 0; i < elastic_agent_worker_count (agent); i++) {
        pid_t pid = fork ();
        if (pid == 0)
            child_main (agent, i);
        m->pid[i] = pid;
        elastic_agent_worker_started (agent, i, pid);
    }
    return ELASTIC_OK;
}

/* Report nothing until every worker is gone, then all at once, last first. */
static int my_monitor (elastic_agent_t *agent, void *ctx)
{
    struct mine *m = ctx;

    m->monitors++;
    for (int i = 0; i < 3; i++) {
        if (m->pid[i] > 0 && !(m->reaped & (1 << i)) &&
            waitpid (m->pid[i], &m->status[i], WNOHANG) == m->pid[i])
            m->reaped |= 1 << i;
    }
    if (m->reaped != 7)
        return ELASTIC_OK;
    for (int i = 2; i >= 0; i--) {
        int st = m->status[i];
        elastic_agent_worker_exited (agent,
                                     i,
                                     WIFEXITED (st) ? WEXITSTATUS (st) : 0,
                                     WIFSIGNALED (st) ? WTERMSIG (st) : 0);
        m->pid[i] = 0;
    }
    m->reaped = 0;
    return ELASTIC_OK;
}

static int my_stop (elastic_agent_t *agent, void *ctx, struct elastic_agent_stop *req)
{
    struct mine *m = ctx;

    m->stops++;
    for (int i = 0; i < 3; i++) {
        if (m->pid[i] > 0) {
            kill (m->pid[i], SIGKILL);
            waitpid (m->pid[i], NULL, 0);
            elastic_agent_worker_exited (agent, i, 0, SIGKILL);
            m->pid[i] = 0;
        }
    }
    return ELASTIC_OK;
}

static void my_shutdown (elastic_agent_t *agent, void *ctx, int signum, double timeout)
{
    struct mine *m = ctx;
    struct elastic_agent_stop req = {.signum = signum, .timeout = timeout};

    m->shutdowns++;
    my_stop (agent, ctx, &req);
}

static const struct elastic_agent_backend my_backend = {
    .abi = ELASTIC_AGENT_BACKEND_ABI,
    .name = "test",
    .start_workers = my_start,
    .monitor_workers = my_monitor,
    .stop_workers = my_stop,
    .shutdown = my_shutdown,
    .destroy = free, /* the agent owns the context */
};

static void test_backend (void)
{
    elastic_agent_spec_t *spec = elastic_agent_spec_create ();
    elastic_agent_result_t *result = NULL;
    elastic_agent_t *agent;
    struct elastic_agent_failure f;
    struct mine *m = calloc (1, sizeof (*m));
    elastic_error_t err;
    char path[4200], report[8192] = "";
    int root = -2, fd;
    ssize_t n;
    char *p0, *p1;

    elastic_agent_spec_set (spec, "nproc-per-node", "3", &err);
    elastic_agent_spec_set (spec, "max-restarts", "1", &err);
    elastic_agent_spec_set (spec, "monitor-interval", "20ms", &err);
    elastic_agent_spec_set (spec, "log-dir", tmpdir, &err);
    elastic_agent_spec_set (spec, "run-id", "backend", &err);
    elastic_agent_spec_set_function (
        spec, fn_hang, NULL, &err); /* unused by this backend */
    agent = elastic_agent_create (spec, &err);
    ok (elastic_agent_set_backend (agent, &my_backend, m) == ELASTIC_OK,
        "custom backend set");
    ok (elastic_agent_run (agent, &result, &err) == ELASTIC_OK, "run");
    is_int (m->starts, 2, "start_workers: the first attempt and one restart");
    ok (m->monitors >= 2 && m->shutdowns == 1,
        "monitor_workers polled (%d), shutdown once",
        m->monitors);
    is_int (elastic_agent_result_state (result),
            ELASTIC_AGENT_FAILED,
            "restarts exhausted: FAILED");
    is_int (elastic_agent_result_failures (result, &root), 3, "three failed ranks");
    is_int (root,
            1,
            "the root cause is rank 1: the earliest error-file timestamp, though "
            "reported second");
    is_int (
        elastic_agent_result_exit_status (result), 11, "exit status: rank 1's code 11");
    ok (elastic_agent_result_failure (result, 1, &f) == ELASTIC_OK &&
            strcmp (f.message, "worker 1 broke") == 0 && f.timestamp == 1700000000 &&
            f.exitcode == 11,
        "rank 1's failure: message, timestamp and exit code from its error file");
    ok (elastic_agent_result_failure (result, 2, &f) == ELASTIC_OK &&
            f.signal == SIGKILL && f.exitcode == -SIGKILL &&
            strstr (f.message, "Signal 9 (SIGKILL)"),
        "rank 2's failure: killed by SIGKILL (%s)",
        f.message);
    snprintf (path, sizeof (path), "%s/report", tmpdir);
    fd = open (path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ok (elastic_agent_result_report (result, fd) == ELASTIC_OK, "report written");
    lseek (fd, 0, SEEK_SET);
    n = read (fd, report, sizeof (report) - 1);
    report[n > 0 ? n : 0] = '\0';
    close (fd);
    p0 = strstr (report, "rank      : 1 (local_rank: 1)");
    p1 = strstr (report, "rank      : 0 (local_rank: 0)");
    ok (strstr (report, "Root Cause") && p0 && p1 && p0 < p1,
        "the report lists rank 1 first, as the root cause");
    ok (strstr (report, "time      : 2023-11-14T22:13:20") != NULL,
        "with the error file's time");
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
}

int main (void)
{
    if (!mkdtemp (tmpdir)) {
        printf ("Bail out! mkdtemp: %s\n", strerror (errno));
        return 1;
    }
    test_function ();
    test_request_stop ();
    test_rendezvous ();
    test_backend ();
    char cmd[128];
    snprintf (cmd, sizeof (cmd), "rm -rf %s", tmpdir);
    if (system (cmd) != 0)
        diag ("could not remove %s", tmpdir);
    return done_testing ();
}
