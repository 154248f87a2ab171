/* t5000-pmix-host.c - the hosted PMIx server with real PMIx clients
 *
 * The test is both sides: it hosts the server (src/exec/pmix/pmix_host.c) and
 * re-executes itself as PMIx clients ("t5000-pmix-host client MODE"), which
 * connect, run the four fences Open MPI 5's MPI_Init runs, and then finish,
 * die by SIGKILL, exit without finalizing, or call PMIx_Abort.  A waiting
 * client must receive the fault event exactly as ULFM reads it: status,
 * source = the dead rank, an info of type PMIX_PROC naming it.  No MPI.
 *
 * A job of two nodes ("client map"): the namespace is registered with a
 * 2-node job map of which only node 0's ranks are here; a local client
 * reads, with no fence, what Open MPI 5's MPI_Init reads about its peers
 * (its node's PMIX_LOCAL_PEERS and sizes, its local and node rank, the
 * number of nodes) and what a rank on the other node is (PMIX_HOSTNAME,
 * PMIX_NODEID, PMIX_LOCAL_RANK), and the other node's peers.  The fence
 * across nodes is the mesh's and is not run here.
 *
 * A client that is to fail waits, after its fences, for a byte on its "go"
 * pipe (descriptor GO_FD): the server side sends it once it has looked at
 * the job's sockets, so that what it counts never races with the failure.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

#include "exec/jobmap.h"
#include "exec/pmix/pmix_host.h"
#include "exec/pmix/pmix_jobinfo.h"
#include "lib/tap.h"

extern char **environ;

#define GO_FD 3 /* a client's "go" pipe: fail only after a byte arrives */

/* ---- client side -------------------------------------------------------- */

static volatile int got_event;

static void on_fault (size_t id,
                      pmix_status_t status,
                      const pmix_proc_t *source,
                      pmix_info_t info[],
                      size_t ninfo,
                      pmix_info_t *results,
                      size_t nresults,
                      pmix_event_notification_cbfunc_fn_t cbfunc,
                      void *cbdata)
{
    int affected = -1, nproc = 0;

    (void)id;
    (void)results;
    (void)nresults;
    for (size_t i = 0; i < ninfo; i++) {
        if (info[i].value.type == PMIX_PROC &&
            PMIX_CHECK_KEY (&info[i], PMIX_EVENT_AFFECTED_PROC)) {
            affected = (int)info[i].value.data.proc->rank;
            nproc++;
        }
    }
    printf ("event status=%d source=%d affected=%d nproc=%d\n",
            (int)status,
            (int)source->rank,
            affected,
            nproc);
    fflush (stdout);
    got_event = 1;
    if (cbfunc)
        cbfunc (PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* Qualifiers of a PMIx_Get (show) */
enum { Q_NONE, Q_NODEID, Q_HOST, Q_JOB };

/* Print "what=value" for a PMIx_Get of key on proc (rank; -1: wildcard)
 * with qualifiers q (Q_NODEID: node arg; Q_HOST: node "t5000-remote";
 * Q_JOB: the job realm); "what=ERR(status)" if it fails. */
static void show (const char *what, int rank, const char *key, int q, int arg)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    pmix_info_t qi[2];
    uint32_t nid = (uint32_t)arg;
    bool yes = true;
    size_t nq = 0;
    pmix_status_t rc;
    char *nsp = getenv ("PMIX_NAMESPACE");

    PMIX_LOAD_PROCID (&p, nsp, rank < 0 ? PMIX_RANK_WILDCARD : (pmix_rank_t)rank);
    if (q == Q_NODEID || q == Q_HOST) {
        PMIX_INFO_LOAD (&qi[nq], PMIX_NODE_INFO, &yes, PMIX_BOOL);
        nq++;
        if (q == Q_NODEID)
            PMIX_INFO_LOAD (&qi[nq], PMIX_NODEID, &nid, PMIX_UINT32);
        else
            PMIX_INFO_LOAD (&qi[nq], PMIX_HOSTNAME, "t5000-remote", PMIX_STRING);
        nq++;
    } else if (q == Q_JOB) {
        PMIX_INFO_LOAD (&qi[nq], PMIX_JOB_INFO, &yes, PMIX_BOOL);
        nq++;
    }
    rc = PMIx_Get (&p, key, nq ? qi : NULL, nq, &v);
    if (rc != PMIX_SUCCESS || !v)
        printf ("%s=ERR(%s)\n", what, PMIx_Error_string (rc));
    else if (v->type == PMIX_STRING)
        printf ("%s=%s\n", what, v->data.string ? v->data.string : "(null)");
    else if (v->type == PMIX_UINT32)
        printf ("%s=%u\n", what, v->data.uint32);
    else if (v->type == PMIX_UINT16)
        printf ("%s=%u\n", what, (unsigned)v->data.uint16);
    else if (v->type == PMIX_PROC_RANK)
        printf ("%s=%u\n", what, (unsigned)v->data.rank);
    else
        printf ("%s=type%d\n", what, (int)v->type);
    if (v)
        PMIX_VALUE_RELEASE (v);
    for (size_t i = 0; i < nq; i++)
        PMIX_INFO_DESTRUCT (&qi[i]);
}

/* A rank of a 2-node job: what it learns of its node and the other. */
static int client_map (void)
{
    pmix_proc_t me, *peers = NULL;
    size_t npeers = 0;
    char *nodes = NULL;
    pmix_status_t rc;

    if ((rc = PMIx_Init (&me, NULL, 0)) != PMIX_SUCCESS) {
        printf ("client: PMIx_Init: %s\n", PMIx_Error_string (rc));
        return 1;
    }
    show ("job_size", -1, PMIX_JOB_SIZE, Q_NONE, 0);
    show ("num_nodes", -1, PMIX_NUM_NODES, Q_NONE, 0);
    show ("local_peers", -1, PMIX_LOCAL_PEERS, Q_NONE, 0);
    show ("local_size", -1, PMIX_LOCAL_SIZE, Q_NONE, 0);
    show ("my_local_rank", (int)me.rank, PMIX_LOCAL_RANK, Q_NONE, 0);
    show ("my_node_rank", (int)me.rank, PMIX_NODE_RANK, Q_NONE, 0);
    show ("my_nodeid", (int)me.rank, PMIX_NODEID, Q_NONE, 0);
    show ("r2_hostname", 2, PMIX_HOSTNAME, Q_NONE, 0);
    /* PMIx 4.2's client takes PMIX_NODEID for a node-realm key and looks
     * it up among the remote node's values, where the node's id is not a
     * value but its identity (NOT-FOUND); the rank's own copy is read in
     * the job realm */
    show ("r2_nodeid", 2, PMIX_NODEID, Q_JOB, 0);
    show ("r3_local_rank", 3, PMIX_LOCAL_RANK, Q_NONE, 0);
    show ("r3_node_rank", 3, PMIX_NODE_RANK, Q_NONE, 0);
    show ("node1_peers", -1, PMIX_LOCAL_PEERS, Q_NODEID, 1);
    show ("node1_size", -1, PMIX_LOCAL_SIZE, Q_NODEID, 1);
    show ("node1_ldr", -1, PMIX_LOCALLDR, Q_NODEID, 1);
    show ("remote_peers", -1, PMIX_LOCAL_PEERS, Q_HOST, 0);
    if (PMIx_Resolve_peers ("t5000-remote", me.nspace, &peers, &npeers) == PMIX_SUCCESS) {
        printf ("resolve_peers=");
        for (size_t i = 0; i < npeers; i++)
            printf ("%s%u", i ? "," : "", (unsigned)peers[i].rank);
        printf ("\n");
        PMIX_PROC_FREE (peers, npeers);
    } else
        printf ("resolve_peers=ERR\n");
    if (PMIx_Resolve_nodes (me.nspace, &nodes) == PMIX_SUCCESS && nodes) {
        printf ("resolve_nodes=%s\n", nodes);
        free (nodes);
    } else
        printf ("resolve_nodes=ERR\n");
    fflush (stdout);
    PMIx_Finalize (NULL, 0);
    return 0;
}

static int client (const char *mode)
{
    pmix_proc_t me;
    pmix_status_t codes[2] = {PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_PROC_TERM_WO_SYNC};
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    if (!strcmp (mode, "map"))
        return client_map ();
    if ((rc = PMIx_Init (&me, NULL, 0)) != PMIX_SUCCESS) {
        printf ("client: PMIx_Init: %s\n", PMIx_Error_string (rc));
        return 1;
    }
    PMIx_Register_event_handler (codes, 2, NULL, 0, on_fault, NULL, NULL);
    PMIX_INFO_LOAD (&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    for (int i = 0; i < 4; i++) {
        if ((rc = PMIx_Fence (NULL, 0, i % 2 ? NULL : &info, i % 2 ? 0 : 1)) !=
            PMIX_SUCCESS) {
            printf ("client: fence %d: %s\n", i, PMIx_Error_string (rc));
            return 1;
        }
    }
    printf ("client %d initialized\n", (int)me.rank);
    fflush (stdout);
    if (!strcmp (mode, "die") || !strcmp (mode, "exit3") || !strcmp (mode, "abort")) {
        struct pollfd go = {.fd = GO_FD, .events = POLLIN};
        char c;
        if (poll (&go, 1, 30000) != 1 || read (GO_FD, &c, 1) != 1) {
            printf ("client: no go from the server within 30 s\n");
            return 1;
        }
    }
    if (!strcmp (mode, "die"))
        raise (SIGKILL);
    if (!strcmp (mode, "exit3"))
        _exit (3);
    if (!strcmp (mode, "abort")) {
        PMIx_Abort (5, "unit abort", NULL, 0);
        _exit (5);
    }
    if (!strcmp (mode, "wait")) {
        for (int i = 0; i < 3000 && !got_event; i++)
            usleep (10000);
    }
    if (!strcmp (mode, "hang"))
        for (;;)
            pause ();
    PMIx_Finalize (NULL, 0);
    return !strcmp (mode, "wait") && !got_event ? 1 : 0;
}

/* ---- server side -------------------------------------------------------- */

static char tmp[PATH_MAX];

static double now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_has (char *const *env, const char *entry)
{
    for (; env && *env; env++)
        if (!strcmp (*env, entry))
            return 1;
    return 0;
}

static int env_has_prefix (char *const *env, const char *prefix)
{
    for (; env && *env; env++)
        if (!strncmp (*env, prefix, strlen (prefix)))
            return 1;
    return 0;
}

/* Start rank r of job as "client MODE", stdout to tmp/out.<tag>.<r>; *go
 * (if not NULL) gets the write end of its "go" pipe. */
static pid_t
spawn (struct pmixhost_job *job, int r, const char *mode, const char *tag, int *go)
{
    char *const *over = pmixhost_job_env (job, r);
    char out[PATH_MAX + 64], *argv[] = {"/proc/self/exe", "client", (char *)mode, NULL};
    char *prog[] = {(char *)mode, NULL}; /* a program of its own ("/...") */
    size_t n = 0, k = 0;
    char **env;
    pid_t pid;
    int fd, gp[2] = {-1, -1};

    snprintf (out, sizeof (out), "%s/out.%s.%d", tmp, tag, r);
    if ((fd = open (out, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        return -1;
    if (go && pipe2 (gp, O_CLOEXEC) < 0) {
        close (fd);
        return -1;
    }
    for (char **e = environ; *e; e++)
        n++;
    for (char *const *e = over; *e; e++)
        n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return -1;
    for (char **e = environ; *e; e++)
        if (strncmp (*e, "PMIX_", 5) && strncmp (*e, "OMPI_MCA_", 9))
            env[k++] = *e;
    for (char *const *e = over; *e; e++)
        env[k++] = *e;
    if ((pid = fork ()) == 0) {
        dup2 (fd, STDOUT_FILENO);
        if (gp[0] >= 0)
            dup2 (gp[0], GO_FD); /* dup2 clears close-on-exec */
        if (mode[0] == '/')
            execve (prog[0], prog, env);
        else
            execve (argv[0], argv, env);
        _exit (127);
    }
    close (fd);
    free (env);
    if (gp[0] >= 0)
        close (gp[0]);
    if (go)
        *go = gp[1];
    if (pid > 0)
        pmixhost_job_started (job, r, pid);
    return pid;
}

static char *slurp (const char *tag, int r)
{
    static char buf[4096];
    char path[PATH_MAX + 64];
    FILE *f;
    size_t n;

    snprintf (path, sizeof (path), "%s/out.%s.%d", tmp, tag, r);
    buf[0] = '\0';
    if ((f = fopen (path, "r"))) {
        n = fread (buf, 1, sizeof (buf) - 1, f);
        buf[n] = '\0';
        fclose (f);
    }
    return buf;
}

struct run {
    struct pmixhost *h;
    struct pmixhost_job *job;
    int n;
    pid_t pid[4];
    int alive[4];
    int verdict[4];
    int wstatus[4];
    int events[8]; /* count per type */
    int abort_status;
    char abort_msg[256];
    int nodelay_without;
    int nodelay_total;
    int remote_fail_rank; /* > 0: report it failed on "another node" */
    int go[4];            /* write ends of the "go" pipes, -1 if none */
};

/* Let every client that waits for it go on (see GO_FD). */
static void release (struct run *R)
{
    for (int r = 0; r < 4; r++)
        if (R->go[r] >= 0) {
            if (write (R->go[r], "g", 1) != 1)
                diag ("go pipe of rank %d: %s", r, strerror (errno));
            close (R->go[r]);
            R->go[r] = -1;
        }
}

/* Count and act on the server's pending events. */
static void drain (struct run *R)
{
    struct pmixhost_event ev;

    while (pmixhost_next_event (R->h, &ev)) {
        if (ev.type > 0 && ev.type < 8)
            R->events[ev.type]++;
        if (ev.type == PMIXHOST_EV_INITIALIZED) {
            R->nodelay_without = pmixhost_nodelay_check (R->h, &R->nodelay_total);
            if (R->remote_fail_rank > 0)
                pmixhost_job_remote_failure (R->job, R->remote_fail_rank, 1);
            release (R); /* the sockets are counted: the failures may come */
        }
        if (ev.type == PMIXHOST_EV_ABORT) {
            R->abort_status = ev.status;
            snprintf (R->abort_msg, sizeof (R->abort_msg), "%s", ev.message);
            for (int r = 0; r < R->n; r++)
                if (R->alive[r])
                    kill (R->pid[r], SIGKILL);
        }
    }
}

/* Drive a job until every rank exited (30 s at most).  Returns 0 or -1. */
static int drive (struct run *R)
{
    double deadline = now () + 30;
    int left = R->n;

    for (int r = 0; r < R->n; r++)
        R->alive[r] = 1;
    while (left > 0 && now () < deadline) {
        struct pollfd pfd = {.fd = pmixhost_fd (R->h), .events = POLLIN};
        int st;
        pid_t pid;

        poll (&pfd, 1, 20);
        drain (R);
        while ((pid = waitpid (-1, &st, WNOHANG)) > 0) {
            for (int r = 0; r < R->n; r++) {
                if (R->alive[r] && R->pid[r] == pid) {
                    R->alive[r] = 0;
                    R->wstatus[r] = st;
                    R->verdict[r] = pmixhost_job_exited (R->job, r, st);
                    left--;
                }
            }
        }
    }
    release (R); /* close what an early end left open */
    for (int r = 0; r < R->n; r++)
        if (R->alive[r]) {
            kill (R->pid[r], SIGKILL);
            waitpid (R->pid[r], NULL, 0);
        }
    /* a rank's last events (its finalize) may still be queued when its
     * exit is reaped */
    drain (R);
    return left == 0 ? 0 : -1;
}

static struct pmixhost_job *make_job (struct pmixhost *h, int attempt, int n)
{
    struct pmixhost_job_opts o = {
        .run_id = "unit", .attempt = attempt, .nranks = n, .oversubscribed = -1};
    elastic_error_t err = {{0}};
    struct pmixhost_job *job = pmixhost_job_create (h, &o, &err);

    if (!job)
        diag ("pmixhost_job_create: %s", err.text);
    return job;
}

/* Two ranks: rank 1 does `mode`, rank 0 waits for the fault event. */
static void
failure_case (struct pmixhost *h, int attempt, const char *mode, int want_status)
{
    struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
    char want[256];

    if (!(R.job = make_job (h, attempt, 2))) {
        ok (0, "%s: job created", mode);
        return;
    }
    R.pid[0] = spawn (R.job, 0, "wait", mode, NULL);
    R.pid[1] = spawn (R.job, 1, mode, mode, &R.go[1]);
    ok (drive (&R) == 0, "%s: both ranks exited", mode);
    is_int (R.events[PMIXHOST_EV_CONNECTED], 2, "%s: 2 connected events", mode);
    is_int (
        R.events[PMIXHOST_EV_INITIALIZED], 1, "%s: initialized after the 4 fences", mode);
    is_int (R.nodelay_without, 0, "%s: no client socket without TCP_NODELAY", mode);
    is_int (R.nodelay_total, 2, "%s: 2 client sockets seen", mode);
    is_int (R.verdict[1],
            PMIXHOST_EXIT_RECOVERABLE,
            "%s: rank 1's death is recoverable",
            mode);
    is_int (R.verdict[0], PMIXHOST_EXIT_DONE, "%s: rank 0 finished", mode);
    is_int (R.wstatus[0], 0, "%s: rank 0 exited 0 (it got the event)", mode);
    snprintf (
        want, sizeof (want), "event status=%d source=1 affected=1 nproc=1", want_status);
    ok (strstr (slurp (mode, 0), want) != NULL, "%s: rank 0 got '%s'", mode, want);
    if (!strstr (slurp (mode, 0), want))
        diag ("rank 0 printed: %s", slurp (mode, 0));
    is_int (R.events[PMIXHOST_EV_FINALIZED], 1, "%s: rank 0 finalized", mode);
    pmixhost_job_destroy (R.job);
}

/* jobinfo_build with a one-node map gives exactly the array without one. */
static void one_node_map_unchanged (void)
{
    struct jobinfo_params jp = {.nspace = "elastic.cmp.0",
                                .nranks = 3,
                                .hostname = "here",
                                .tmpdir = "/t",
                                .nsdir = "/t/ns",
                                .wdir = "/w"};
    pmix_info_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    elastic_error_t err = {{0}};
    struct jobmap *m = jobmap_single (3, "elsewhere", &err);
    int same = 1;

    if (!m || jobinfo_build (&jp, &a, &na, &err) < 0) {
        ok (0, "one-node job data built (%s)", err.text);
        jobmap_destroy (m);
        return;
    }
    jp.map = m;
    if (jobinfo_build (&jp, &b, &nb, &err) < 0) {
        ok (0, "one-node job data built with a map (%s)", err.text);
        jobinfo_free (a, na);
        jobmap_destroy (m);
        return;
    }
    same = na == nb;
    for (size_t i = 0; same && i < na; i++) {
        same = PMIX_CHECK_KEY (&a[i], b[i].key) && a[i].value.type == b[i].value.type;
        if (same && a[i].value.type != PMIX_DATA_ARRAY)
            same = PMIx_Value_compare (&a[i].value, &b[i].value) == PMIX_EQUAL;
        else if (same)
            same = a[i].value.data.darray->size == b[i].value.data.darray->size;
    }
    ok (same && na > 0, "a one-node map registers exactly today's %zu job data", na);
    jobinfo_free (a, na);
    jobinfo_free (b, nb);
    jobmap_destroy (m);
}

/* The same 2-node job seen through Open MPI's own PMIx client library
 * (pmix/ompi_view, built with MPI): what its MPI_Init takes for the
 * node's peers. */
static void ompi_view_case (struct pmixhost *h, struct pmixhost_job_opts *o)
{
    struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
    elastic_error_t err = {{0}};
    char prog[PATH_MAX], *slash;
    ssize_t len = readlink ("/proc/self/exe", prog, sizeof (prog) - 32);

    if (len <= 0 || !(prog[len] = '\0', slash = strrchr (prog, '/')) ||
        (snprintf (slash, sizeof (prog) - (size_t)(slash - prog), "/pmix/ompi_view"),
         access (prog, X_OK) != 0)) {
        skip (3, "pmix/ompi_view is not built (no MPI)");
        return;
    }
    o->attempt = 21;
    if (!(R.job = pmixhost_job_create (h, o, &err))) {
        ok (0, "Open MPI's view: job created (%s)", err.text);
        return;
    }
    R.pid[0] = spawn (R.job, 0, prog, "ompi", NULL);
    R.pid[1] = spawn (R.job, 1, prog, "ompi", NULL);
    ok (drive (&R) == 0 && R.wstatus[0] == 0 && R.wstatus[1] == 0,
        "Open MPI's view: both ranks ran");
    for (int r = 0; r < 2; r++) {
        const char *out = slurp ("ompi", r);
        int good = strstr (out, "local_peers=0,1\n") &&
                   strstr (out, "num_local_peers=1\n") &&
                   strstr (out, r ? "peer 0: on node" : "peer 1: on node") &&
                   strstr (out, "job_size=4\n") && strstr (out, "num_nodes=2\n") &&
                   strstr (out, "local_size=2\n") &&
                   strstr (out, "rank2_hostname=t5000-remote\n");
        if (r == 0)
            ok (good,
                "Open MPI's view: rank 0's MPI_Init would share memory with rank 1 "
                "only; ranks 2 and 3 are on t5000-remote");
        else
            ok (good, "Open MPI's view: rank 1 likewise");
        if (!good)
            diag ("rank %d printed:\n%s", r, out);
    }
    pmixhost_job_destroy (R.job);
}

/* A 2-node map registered here with node 0's ranks local. */
static void two_node_case (struct pmixhost *h, const char *srvdir)
{
    struct jobmap_torchrun t = {.nnodes = 2,
                                .node_rank = 0,
                                .nproc_per_node = 2,
                                .rdzv_endpoint = "127.0.0.1:29400",
                                .run_id = "t5000"};
    struct pmixhost_job_opts o = {
        .run_id = "unit", .attempt = 20, .map = NULL, .oversubscribed = 0};
    struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
    struct pmixhost_job_info ji;
    elastic_error_t err = {{0}};
    struct jobmap *m = jobmap_from_torchrun (&t, &err);
    char host[256], path[PATH_MAX + 256], want[512];
    struct stat st;

    if (!m)
        bail_out ("jobmap_from_torchrun: %s", err.text);
    if (gethostname (host, sizeof (host)) < 0)
        snprintf (host, sizeof (host), "localhost");
    host[sizeof (host) - 1] = '\0';
    o.map = m;
    ok (!pmixhost_job_create (h, &o, &err) &&
            strstr (err.text, "node 0 has no host name"),
        "2 nodes: a node without a host name is refused (%s)",
        err.text);
    jobmap_set_host (m, 0, host, NULL);
    jobmap_set_host (m, 1, "t5000-remote", NULL);
    o.nranks = 3;
    ok (!pmixhost_job_create (h, &o, &err) &&
            strstr (err.text, "ranks: 3 is not the job map's world size 4"),
        "2 nodes: a rank count other than the map's is refused");
    o.nranks = 0;
    m->leader = 0;
    m->local_id = 1;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "not the node's leader"),
        "2 nodes: a task that does not lead its node hosts no server");
    m->leader = 1;
    m->local_id = 0;
    if (!(R.job = pmixhost_job_create (h, &o, &err))) {
        ok (0, "2 nodes: job created (%s)", err.text);
        jobmap_destroy (m);
        return;
    }
    pmixhost_job_info (R.job, &ji);
    ok (ji.nranks == 4 && ji.nlocal == 2 && ji.nnodes == 2 && ji.node == 0,
        "2 nodes: 4 ranks, 2 of them here, node 0 of 2");
    ok (pmixhost_job_env (R.job, 1) && !pmixhost_job_env (R.job, 2),
        "2 nodes: an environment for rank 1, none for rank 2 (node 1)");
    ok (pmixhost_job_started (R.job, 2, 1) < 0 && pmixhost_job_exited (R.job, 3, 0) < 0,
        "2 nodes: node 1's ranks are not started or reaped here");
    snprintf (path, sizeof (path), "%s/elastic.unit.20/1", srvdir);
    ok (stat (path, &st) == 0, "2 nodes: rank 1's session directory exists");
    snprintf (path, sizeof (path), "%s/elastic.unit.20/2", srvdir);
    ok (stat (path, &st) < 0, "2 nodes: none for rank 2");
    R.pid[0] = spawn (R.job, 0, "map", "map", NULL);
    R.pid[1] = spawn (R.job, 1, "map", "map", NULL);
    ok (drive (&R) == 0 && R.wstatus[0] == 0 && R.wstatus[1] == 0,
        "2 nodes: both local ranks ran and exited 0");
    is_int (R.events[PMIXHOST_EV_CONNECTED], 2, "2 nodes: 2 connected events");
    for (int r = 0; r < 2; r++) {
        const char *out = slurp ("map", r);
        const char *lines[] = {"job_size=4",
                               "num_nodes=2",
                               "local_peers=0,1",
                               "local_size=2",
                               "r2_hostname=t5000-remote",
                               "r2_nodeid=1",
                               "r3_local_rank=1",
                               "r3_node_rank=1",
                               "node1_peers=2,3",
                               "node1_size=2",
                               "node1_ldr=2",
                               "remote_peers=2,3",
                               "resolve_peers=2,3",
                               NULL};
        int all = 1;
        for (int k = 0; lines[k]; k++)
            if (!strstr (out, lines[k])) {
                diag ("rank %d lacks '%s'", r, lines[k]);
                all = 0;
            }
        ok (all, "2 nodes: rank %d sees its node's peers and the remote ranks", r);
        snprintf (want,
                  sizeof (want),
                  "my_local_rank=%d\nmy_node_rank=%d\nmy_nodeid=0\n",
                  r,
                  r);
        ok (strstr (out, want) != NULL,
            "2 nodes: rank %d is local rank %d of node 0",
            r,
            r);
        snprintf (want, sizeof (want), "resolve_nodes=%s,t5000-remote", host);
        ok (strstr (out, want) != NULL, "2 nodes: rank %d resolves both nodes", r);
        if (!all || !strstr (out, want))
            diag ("rank %d printed:\n%s", r, out);
    }
    pmixhost_job_destroy (R.job);
    ompi_view_case (h, &o);
    jobmap_destroy (m);
}

int main (int argc, char **argv)
{
    struct pmixhost_opts hopts = {0};
    struct pmixhost *h, *h2;
    struct pmixhost_job *job, *job2;
    struct pmixhost_job_opts o = {0};
    struct pmixhost_job_info ji;
    elastic_error_t err = {{0}};
    char path[PATH_MAX + 256], jobdir[PATH_MAX + 128], srvdir[PATH_MAX];
    char *const *env;
    struct stat st;

    if (argc == 3 && !strcmp (argv[1], "client"))
        return client (argv[2]);
    signal (SIGPIPE, SIG_IGN);
    snprintf (tmp,
              sizeof (tmp),
              "%s/t5000.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (tmp))
        bail_out ("mkdtemp: %s", strerror (errno));

    /* errors */
    hopts.tmpdir = "/nonexistent/dir";
    h = pmixhost_create (&hopts, &err);
    ok (h == NULL && strstr (err.text, "/nonexistent/dir"),
        "a bad tmpdir is refused, naming it");
    diag ("%s", err.text);
    hopts.tmpdir = tmp;
    h = pmixhost_create (&hopts, &err);
    ok (h != NULL, "server started");
    if (!h)
        bail_out ("pmixhost_create: %s", err.text);
    snprintf (srvdir, sizeof (srvdir), "%s", pmixhost_dir (h));
    ok (stat (srvdir, &st) == 0 && S_ISDIR (st.st_mode),
        "server directory %s exists",
        srvdir);
    ok (pmixhost_fd (h) >= 0, "event fd is valid");
    h2 = pmixhost_create (&hopts, &err);
    ok (h2 == NULL && errno == EBUSY && strstr (err.text, "already"),
        "a second server is refused");
    diag ("%s", err.text);

    o.run_id = "bad id";
    o.nranks = 2;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "'bad id'"),
        "a bad run id is refused, naming it");
    diag ("%s", err.text);
    o.run_id = "unit";
    o.nranks = 0;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "ranks: 0"),
        "0 ranks are refused");
    diag ("%s", err.text);
    o.nranks = 2;
    o.btl = "ib";
    ok (!pmixhost_job_create (h, &o, &err) &&
            strstr (err.text, "btl: 'ib' is not accepted (sm, tcp, sm,tcp)"),
        "an unknown btl is refused with the accepted values");
    diag ("%s", err.text);
    o.btl = NULL;
    o.attempt = -1;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "attempt: -1"),
        "a negative attempt is refused");

    /* a job's environment and directories */
    o.attempt = 9;
    o.nranks = 3;
    o.btl = "tcp";
    o.oversubscribed = 0;
    if (!(job = pmixhost_job_create (h, &o, &err)))
        bail_out ("pmixhost_job_create: %s", err.text);
    is_str (pmixhost_job_nspace (job),
            "elastic.unit.9",
            "namespace is elastic.<run id>.<attempt>");
    env = pmixhost_job_env (job, 1);
    ok (env_has (env, "PMIX_NAMESPACE=elastic.unit.9") && env_has (env, "PMIX_RANK=1"),
        "rank 1's environment names its namespace and rank");
    ok (env_has_prefix (env, "PMIX_SERVER_URI"),
        "rank 1's environment has the server's URI");
    ok (env_has (env, "OMPI_MCA_mpi_ft_enable=1") && env_has (env, "OMPI_MCA_pml=ob1") &&
            env_has (env, "OMPI_MCA_btl=self,tcp") && env_has (env, "OMPI_MCA_coll=^han"),
        "rank 1's environment sets ULFM's Open MPI parameters (tcp)");
    ok (pmixhost_job_env (job, 3) == NULL && pmixhost_job_env (job, -1) == NULL,
        "no environment for ranks out of range");
    snprintf (jobdir, sizeof (jobdir), "%s/elastic.unit.9", srvdir);
    snprintf (path, sizeof (path), "%s/2", jobdir);
    ok (stat (path, &st) == 0 && S_ISDIR (st.st_mode),
        "rank session directory %s exists",
        path);
    job2 = pmixhost_job_create (h, &o, &err);
    ok (!job2 && errno == EEXIST && strstr (err.text, "elastic.unit.9"),
        "the same namespace twice is refused");
    diag ("%s", err.text);

    /* verdicts of ranks that never connected */
    is_int (
        pmixhost_job_exited (job, 0, 0), PMIXHOST_EXIT_DONE, "exit 0 without PMIx: done");
    is_int (pmixhost_job_exited (job, 1, SIGKILL),
            PMIXHOST_EXIT_RESTART,
            "killed before MPI_Init finished: restart");
    is_int (
        pmixhost_job_exited (job, 1, SIGKILL), -1, "a rank reported twice is refused");
    pmixhost_job_info (job, &ji);
    ok (ji.restart_needed && ji.restart_rank == 1 && !ji.initialized &&
            !ji.oversubscribed,
        "job info: restart needed for rank 1, not initialized, not oversubscribed");
    pmixhost_job_stop (job);
    is_int (pmixhost_job_exited (job, 2, SIGKILL),
            PMIXHOST_EXIT_STOPPED,
            "after stop: stopped");
    pmixhost_job_destroy (job);
    ok (stat (jobdir, &st) < 0 && errno == ENOENT, "job directory removed with the job");

    /* oversubscription is automatic */
    o.attempt = 10;
    o.nranks = 4096;
    o.oversubscribed = -1;
    if ((job = pmixhost_job_create (h, &o, &err))) {
        pmixhost_job_info (job, &ji);
        ok (ji.oversubscribed == 1, "4096 ranks on this node are oversubscribed");
        pmixhost_job_stop (job);
        pmixhost_job_destroy (job);
    } else
        ok (0, "4096-rank job created (%s)", err.text);

    /* real clients */
    failure_case (h, 0, "die", PMIX_ERR_PROC_ABORTED_BY_SIG);
    failure_case (h, 1, "exit3", PMIX_ERR_PROC_TERM_WO_SYNC);
    {
        /* a failure reported by another node's server (the transport's
         * path): rank 2 "is elsewhere"; the local ranks get the event */
        struct run R = {.h = h, .n = 3, .remote_fail_rank = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 4, 3))) {
            R.pid[0] = spawn (R.job, 0, "wait", "remote", NULL);
            R.pid[1] = spawn (R.job, 1, "wait", "remote", NULL);
            R.pid[2] = spawn (R.job, 2, "hang", "remote", NULL);
            R.n = 2; /* drive ranks 0 and 1; rank 2 is killed below */
            ok (drive (&R) == 0, "remote: the local ranks finished");
            ok (strstr (slurp ("remote", 0),
                        "event status=-402 source=2 affected=2 nproc=1") &&
                    strstr (slurp ("remote", 1),
                            "event status=-402 source=2 affected=2 nproc=1"),
                "remote: both local ranks got the fault event for rank 2");
            pmixhost_job_info (R.job, &ji);
            is_int (ji.failed, 1, "remote: counted as a failure");
            kill (R.pid[2], SIGKILL);
            waitpid (R.pid[2], NULL, 0);
            pmixhost_job_stop (R.job);
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "remote job created");
    }
    {
        struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 2, 2))) {
            R.pid[0] = spawn (R.job, 0, "hang", "abort", NULL);
            R.pid[1] = spawn (R.job, 1, "abort", "abort", &R.go[1]);
            ok (drive (&R) == 0, "abort: both ranks exited");
            is_int (R.events[PMIXHOST_EV_ABORT], 1, "abort: one abort event");
            is_int (R.abort_status, 5, "abort: the code is reported");
            is_str (R.abort_msg, "unit abort", "abort: the message is reported");
            ok (R.verdict[0] == PMIXHOST_EXIT_ABORTED &&
                    R.verdict[1] == PMIXHOST_EXIT_ABORTED,
                "abort: both exits are part of the abort (no fault event)");
            ok (!strstr (slurp ("abort", 0), "event"),
                "abort: the other rank got no fault event");
            pmixhost_job_info (R.job, &ji);
            ok (ji.aborted && ji.abort_rank == 1 && ji.failed == 0, "abort: job info");
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "abort job created");
    }
    {
        /* a rank killed between fences: restart, and the other is stopped */
        struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 3, 2))) {
            R.pid[0] = spawn (R.job, 0, "ok", "early", NULL);
            R.pid[1] = -1;
            /* rank 1 never starts: rank 0 waits in the first fence */
            R.alive[1] = 0;
            {
                double deadline = now () + 30;
                struct pmixhost_event ev;
                int connected = 0;
                while (!connected && now () < deadline) {
                    struct pollfd pfd = {.fd = pmixhost_fd (h), .events = POLLIN};
                    poll (&pfd, 1, 20);
                    while (pmixhost_next_event (h, &ev))
                        connected |= ev.type == PMIXHOST_EV_CONNECTED;
                }
                ok (connected, "early: rank 0 connected");
            }
            is_int (pmixhost_job_exited (R.job, 1, 9),
                    PMIXHOST_EXIT_RESTART,
                    "early: a rank lost before the fences end needs a restart");
            pmixhost_job_stop (R.job);
            kill (R.pid[0], SIGKILL);
            {
                int st2;
                waitpid (R.pid[0], &st2, 0);
                is_int (pmixhost_job_exited (R.job, 0, st2),
                        PMIXHOST_EXIT_STOPPED,
                        "early: the rank stopped on purpose is 'stopped'");
            }
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "early job created");
    }

    one_node_map_unchanged ();
    two_node_case (h, srvdir);

    pmixhost_destroy (h);
    ok (stat (srvdir, &st) < 0 && errno == ENOENT, "server directory removed");
    {
        const char *tags[] = {"die", "exit3", "abort", "early", "remote", "map", "ompi"};
        for (int t = 0; t < 7; t++)
            for (int r = 0; r < 3; r++) {
                snprintf (path, sizeof (path), "%s/out.%s.%d", tmp, tags[t], r);
                unlink (path);
            }
    }
    ok (rmdir (tmp) == 0, "nothing else left in the test's directory");
    return done_testing ();
}
