/* mesh-pmix-node.c - play one node of a multi-node job on this machine
 *
 *   mesh-pmix-node --nodes N --node K --ranks P --dir DIR [--btl tcp|sm]
 *                  [--event-log FILE] [--node-timeout SEC] [--run-id ID]
 *                  -- PROG [ARGS...]
 *
 * Node K of a job of N nodes with P ranks each (ranks K*P .. K*P+P-1, the
 * map of a torchrun launch; the nodes are named node0 .. node<N-1>): it
 * listens on 127.0.0.1 on a port the kernel picks, writes it to DIR/K.port,
 * waits for every node's port file, then joins the mesh (key from
 * ELASTIC_MESH_SECRET), hosts the PMIx server of its ranks with the mesh
 * transport (src/exec/pmix/pmix_transport_mesh.c), registers the job's
 * whole map, and forks and reaps its P ranks.  Once its ranks are gone it
 * waits in one last mesh fence for the other nodes (so finished ranks are
 * not reported failed by a node leaving early), then exits: 0 when each
 * of its ranks exited 0 or failed after MPI_Init (recoverable), else 1.
 *
 * The event log (CLOCK_REALTIME seconds, so the nodes' logs compare):
 * start, connected, initialized, exit (verdict), lost (member), reported
 * (a rank of another node told to this node's ranks), self_fence, done.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/jobmap.h"
#include "exec/mesh/auth.h"
#include "exec/pmix/pmix_host.h"
#include "exec/pmix/pmix_transport.h"
#include "exec/pmix/pmix_transport_mesh.h"

extern char **environ;

static FILE *evf;
static pthread_mutex_t evlock = PTHREAD_MUTEX_INITIALIZER;
static int wake[2] = {-1, -1};
static atomic_int fenced_self; /* set by the mesh thread */

static double now_real (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void evlog (const char *event, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static void evlog (const char *event, const char *fmt, ...)
{
    va_list ap;

    if (!evf)
        return;
    pthread_mutex_lock (&evlock);
    fprintf (evf, "%.6f %s ", now_real (), event);
    va_start (ap, fmt);
    vfprintf (evf, fmt, ap);
    va_end (ap);
    fputc ('\n', evf);
    fflush (evf);
    pthread_mutex_unlock (&evlock);
}

static void poke (void)
{
    if (write (wake[1], "x", 1) < 0) {
    }
}

/* mesh thread */
static void on_lost (void *arg, const uint32_t *members, size_t count, uint32_t nlive)
{
    for (size_t i = 0; i < count; i++)
        evlog ("lost", "member=%u nlive=%u", members[i], nlive);
}

static void on_reported (void *arg, const char *nspace, int rank, int signaled)
{
    evlog ("reported", "rank=%d signaled=%d", rank, signaled);
}

static void on_self_fence (void *arg, const char *reason)
{
    evlog ("self_fence", "reason=\"%s\"", reason);
    fenced_self = 1;
    poke ();
}

static void on_joined (void *arg)
{
    evlog ("joined", "all=1");
}

static void on_bye_fence (void *arg, int status, const struct mesh_fence_result *res)
{
    evlog ("bye_fence", "status=%d count=%u", status, res ? res->count : 0);
    atomic_store ((atomic_int *)arg, 1);
    poke ();
}

static int read_port (const char *dir, int k)
{
    char path[4096];
    FILE *f;
    int port = -1;

    snprintf (path, sizeof (path), "%s/%d.port", dir, k);
    if (!(f = fopen (path, "r")))
        return -1;
    if (fscanf (f, "%d", &port) != 1)
        port = -1;
    fclose (f);
    return port;
}

/* Listen on a port the kernel picks; publish it; read every node's. */
static int exchange_ports (const char *dir, int nodes, int self, char **addrs)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof (sa);
    char path[4096], tmp[4096];
    int lfd, have;
    FILE *f;

    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    lfd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind (lfd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (lfd, 128) < 0 || getsockname (lfd, (struct sockaddr *)&sa, &sl) < 0) {
        perror ("mesh-pmix-node: listen");
        return -1;
    }
    snprintf (path, sizeof (path), "%s/%d.port", dir, self);
    snprintf (tmp, sizeof (tmp), "%s/.%d.port.tmp", dir, self);
    if (!(f = fopen (tmp, "w")) || fprintf (f, "%d\n", ntohs (sa.sin_port)) < 0 ||
        fclose (f) != 0 || rename (tmp, path) < 0) {
        perror ("mesh-pmix-node: port file");
        return -1;
    }
    for (int tries = 0; tries < 6000; tries++) { /* 120 s */
        have = 0;
        for (int i = 0; i < nodes; i++) {
            int p;
            if (!addrs[i] && (p = read_port (dir, i)) > 0 &&
                asprintf (&addrs[i], "127.0.0.1:%d", p) < 0)
                return -1;
            have += addrs[i] != NULL;
        }
        if (have == nodes)
            return lfd;
        usleep (20000);
    }
    fprintf (stderr, "mesh-pmix-node: not every node's port file after 120 s\n");
    return -1;
}

static char **merge_env (char *const *over)
{
    size_t n = 0, k = 0;
    char **env;

    for (char **e = environ; *e; e++)
        n++;
    for (char *const *e = over; e && *e; e++)
        n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return NULL;
    for (char **e = environ; *e; e++) {
        size_t len = strcspn (*e, "=");
        int replaced = !strncmp (*e, "PMIX_", 5) && strncmp (*e, "PMIX_MCA_", 9);
        for (char *const *o = over; o && *o && !replaced; o++)
            replaced = !strncmp (*o, *e, len) && (*o)[len] == '=';
        if (!replaced)
            env[k++] = *e;
    }
    for (char *const *e = over; e && *e; e++)
        env[k++] = *e;
    return env;
}

static void child_exec (char **argv, char **env)
{
    sigset_t none;

    prctl (PR_SET_PDEATHSIG, SIGKILL);
    /* ignored, as Python does: Open MPI's btl tcp writes without
     * MSG_NOSIGNAL, and a survivor writing to a rank that just died was
     * killed by SIGPIPE (then the survivors writing to it) before ULFM
     * saw an error (doc/mesh.md) */
    signal (SIGPIPE, SIG_IGN);
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    if (syscall (SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) < 0)
        for (int fd = 3; fd < 4096; fd++)
            fcntl (fd, F_SETFD, FD_CLOEXEC);
    execvpe (argv[0], argv, env);
    _exit (127);
}

struct node {
    struct jobmap *map;
    struct pmixhost *h;
    struct pmixhost_job *job;
    struct pmixhost_mesh *t;
    int nlocal, nalive, bad;
    int *rank;
    pid_t *pid;
    int sigfd;
};

static void reap (struct node *N)
{
    int ws;
    pid_t pid;

    while ((pid = waitpid (-1, &ws, WNOHANG)) > 0) {
        for (int i = 0; i < N->nlocal; i++) {
            if (N->pid[i] != pid)
                continue;
            int v = pmixhost_job_exited (N->job, N->rank[i], ws);
            evlog ("exit",
                   "rank=%d status=%d verdict=%s",
                   N->rank[i],
                   ws,
                   pmixhost_exit_name (v));
            if (!(v == PMIXHOST_EXIT_DONE && ws == 0) && v != PMIXHOST_EXIT_RECOVERABLE)
                N->bad = 1;
            N->pid[i] = 0;
            N->nalive--;
        }
    }
}

static void kill_ranks (struct node *N)
{
    pmixhost_job_stop (N->job);
    for (int i = 0; i < N->nlocal; i++)
        if (N->pid[i] > 0)
            kill (N->pid[i], SIGKILL);
}

static void run (struct node *N)
{
    struct pollfd pfd[3] = {
        {N->sigfd, POLLIN, 0}, {pmixhost_fd (N->h), POLLIN, 0}, {wake[0], POLLIN, 0}};
    struct pmixhost_event ev;
    struct signalfd_siginfo si;
    char buf[64];

    while (N->nalive > 0) {
        if (poll (pfd, 3, -1) < 0 && errno != EINTR)
            break;
        while (pmixhost_next_event (N->h, &ev)) {
            if (ev.type == PMIXHOST_EV_CONNECTED)
                evlog ("connected", "rank=%d", ev.rank);
            else if (ev.type == PMIXHOST_EV_INITIALIZED)
                evlog ("initialized", "node=%d", N->map->node_id);
            else if (ev.type == PMIXHOST_EV_ABORT) {
                evlog ("abort", "rank=%d code=%d", ev.rank, ev.status);
                kill_ranks (N);
            }
        }
        if (read (wake[0], buf, sizeof (buf)) > 0 && fenced_self)
            kill_ranks (N);
        while (read (N->sigfd, &si, sizeof (si)) == (ssize_t)sizeof (si)) {
            if (si.ssi_signo != SIGCHLD) {
                evlog ("signal", "signal=%u", si.ssi_signo);
                kill_ranks (N);
            }
        }
        reap (N);
    }
}

/* One last fence among the live nodes, so none leaves while others run. */
static void bye (struct node *N)
{
    atomic_int done = 0;
    struct mesh *m = pmixhost_mesh_get (N->t);
    char buf[64];

    if (fenced_self || !m || mesh_fence (m, "", 0, on_bye_fence, (void *)&done) < 0)
        return;
    for (int i = 0; i < 1200 && !atomic_load (&done); i++) { /* 120 s */
        struct pollfd p = {wake[0], POLLIN, 0};
        if (poll (&p, 1, 100) > 0 && read (wake[0], buf, sizeof (buf)) < 0) {
        }
    }
}

static int start_ranks (struct node *N, char **argv)
{
    const struct jobmap_node *me = &N->map->node[N->map->node_id];

    N->nlocal = me->nranks;
    N->rank = me->ranks;
    if (!(N->pid = calloc ((size_t)N->nlocal, sizeof (pid_t))))
        return -1;
    for (int i = 0; i < N->nlocal; i++) {
        char **env = merge_env (pmixhost_job_env (N->job, N->rank[i]));
        pid_t pid;

        if (!env || (pid = fork ()) < 0)
            return -1;
        if (pid == 0)
            child_exec (argv, env);
        free (env);
        N->pid[i] = pid;
        N->nalive++;
        pmixhost_job_started (N->job, N->rank[i], pid);
        evlog ("start", "rank=%d pid=%d", N->rank[i], (int)pid);
    }
    return 0;
}

static int setup (struct node *N,
                  int nodes,
                  int self,
                  int ppn,
                  const char *dir,
                  const char *btl,
                  const char *run_id,
                  double node_timeout)
{
    uint8_t key[MESH_KEY_SIZE];
    struct jobmap_torchrun tr = {.nnodes = nodes,
                                 .node_rank = self,
                                 .nproc_per_node = ppn,
                                 .rdzv_endpoint = "127.0.0.1:29400",
                                 .run_id = run_id};
    struct pmixhost_mesh_opts mo = {0};
    struct pmixhost_opts ho = {0};
    struct pmixhost_job_opts jo = {0};
    elastic_error_t err = {{0}};
    char **addrs = calloc ((size_t)nodes, sizeof (*addrs));
    char name[64];
    int lfd;

    if (!addrs || mesh_auth_key_from_env (run_id, key, &err) < 0 ||
        !(N->map = jobmap_from_torchrun (&tr, &err)))
        goto fail;
    for (int i = 0; i < nodes; i++) {
        snprintf (name, sizeof (name), "node%d", i);
        if (jobmap_set_host (N->map, i, name, &err) < 0)
            goto fail;
    }
    if ((lfd = exchange_ports (dir, nodes, self, addrs)) < 0)
        return -1;
    mo.map = N->map;
    mo.addrs = (const char *const *)addrs;
    mo.listen_fd = lfd;
    mo.node_timeout = node_timeout;
    mo.key = key;
    mo.self_fence = on_self_fence;
    mo.joined = on_joined;
    mo.lost = on_lost;
    mo.reported = on_reported;
    if (!(N->t = pmixhost_mesh_create (&mo, &err)))
        goto fail;
    ho.transport = &pmixhost_transport_mesh;
    ho.transport_ctx = N->t;
    if (!(N->h = pmixhost_create (&ho, &err))) {
        pmixhost_mesh_destroy (N->t);
        goto fail;
    }
    if (pmixhost_mesh_start (N->t, &err) < 0)
        goto fail;
    jo.run_id = run_id;
    jo.map = N->map;
    jo.btl = btl;
    if (!(N->job = pmixhost_job_create (N->h, &jo, &err)))
        goto fail;
    pmixhost_mesh_set_job (N->t, N->job);
    return 0;
fail:
    fprintf (stderr, "mesh-pmix-node: %s\n", err.text);
    return -1;
}

int main (int argc, char **argv)
{
    struct node N = {0};
    int nodes = 0, self = -1, ppn = 0, i;
    const char *dir = NULL, *btl = "tcp", *log = NULL, *run_id = "meshpmix";
    double node_timeout = 0;
    sigset_t set;

    for (i = 1; i < argc && strcmp (argv[i], "--"); i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp (a, "--nodes"))
            nodes = atoi (v);
        else if (!strcmp (a, "--node"))
            self = atoi (v);
        else if (!strcmp (a, "--ranks"))
            ppn = atoi (v);
        else if (!strcmp (a, "--dir"))
            dir = v;
        else if (!strcmp (a, "--btl"))
            btl = v;
        else if (!strcmp (a, "--event-log"))
            log = v;
        else if (!strcmp (a, "--run-id"))
            run_id = v;
        else if (!strcmp (a, "--node-timeout"))
            node_timeout = atof (v);
        else {
            fprintf (stderr, "mesh-pmix-node: unknown argument %s\n", a);
            return 2;
        }
        i++;
    }
    if (i >= argc - 1 || !dir || nodes < 1 || self < 0 || self >= nodes || ppn < 1) {
        fprintf (stderr,
                 "usage: mesh-pmix-node --nodes N --node K --ranks P --dir DIR -- "
                 "PROG...\n");
        return 2;
    }
    if (log && !(evf = fopen (log, "a"))) {
        perror (log);
        return 2;
    }
    signal (SIGPIPE, SIG_IGN);
    sigemptyset (&set);
    sigaddset (&set, SIGCHLD);
    sigaddset (&set, SIGINT);
    sigaddset (&set, SIGTERM);
    if (pipe2 (wake, O_NONBLOCK | O_CLOEXEC) < 0 ||
        sigprocmask (SIG_BLOCK, &set, NULL) < 0 ||
        (N.sigfd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
        return 2;
    if (setup (&N, nodes, self, ppn, dir, btl, run_id, node_timeout) < 0)
        return 2;
    if (start_ranks (&N, argv + i + 1) < 0) {
        fprintf (stderr, "mesh-pmix-node: cannot start the ranks\n");
        kill_ranks (&N);
    }
    run (&N);
    /* every rank here is gone: nothing more to tell them (a node leaving
     * after the last fence is lost to the others, harmlessly now) */
    pmixhost_mesh_set_job (N.t, NULL);
    bye (&N);
    {
        struct pmixhost_mesh_counts c;
        pmixhost_mesh_counts (N.t, &c);
        evlog ("counts",
               "fences_local=%u fences_mesh=%u dmodex_asked=%u dmodex_served=%u "
               "failures_sent=%u reported=%u",
               c.fences_local,
               c.fences_mesh,
               c.dmodex_asked,
               c.dmodex_served,
               c.failures_sent,
               c.reported);
    }
    evlog ("done", "bad=%d fenced=%d", N.bad, fenced_self);
    pmixhost_job_destroy (N.job);
    pmixhost_mesh_stop (N.t);
    pmixhost_destroy (N.h);
    jobmap_destroy (N.map);
    free (N.pid);
    return N.bad || fenced_self ? 1 : 0;
}
