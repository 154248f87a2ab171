/* mesh_scale.c - B11: the mesh protocol alone at scale (doc/benchmarks.md)
 *
 *   bench_mesh_scale --members N [--radix K] [--timeout S] [--fences F]
 *                    [--idle S] [--victim I] [--munge SOCKET]
 *
 * One run of N mesh members on 127.0.0.1, no MPI, no PMIx: N-1 members in
 * this process (one mesh, hence one thread and one epoll loop, each; the
 * API allows any number per process) and the victim member in a forked
 * child, so that a real SIGKILL takes it down.  Every member has its own
 * listening socket (bound here before the fork) and authenticates every
 * connection as in production (a random per-run secret; with --munge, a
 * munge credential per connection through munged's SOCKET instead).
 *
 * Phases, all timed on CLOCK_MONOTONIC (parent and child share it):
 *   join    mesh_start of every member -> the last member's ops.joined
 *   fence   F fences one after the other: the first mesh_fence call -> the
 *           last member's callback (every member checks it got N blobs)
 *   idle    S seconds with nothing to do: heartbeat bytes sent per member
 *           (mesh_get_stats), and this process's CPU time
 *   kill    SIGKILL the victim -> every survivor's first ops.lost naming it
 *           (first and last survivor), then one fence over the survivors
 * Losses seen before the kill are counted (spurious: the machine was too
 * loaded for the node timeout).  Prints one line of key=value pairs:
 *   result n=... radix=... join_ms=... fence_ms=a,b,... hb_Bps_median=...
 * and exits 0, or prints one error line and exits 1 (2 on bad usage).
 * It ends with _exit: the kernel closes every socket at once (a clean
 * mesh_destroy of 1000 members would look like 1000 departures).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/mesh/auth.h"
#include "exec/mesh/mesh.h"

struct member {
    uint32_t id;
    double joined_at; /* 0: not yet */
    double lost_at;   /* first ops.lost naming the victim */
    int spurious;     /* losses before the kill */
    int fenced;
    uint32_t fence_seq_done;
    uint32_t fence_count; /* blobs in the last result */
    int fence_status;
    double fence_at;
};

static struct member *mem;
static volatile int killed; /* the victim was SIGKILLed */
static uint32_t victim;
static double fence_issue_ms, fence_cpu_s, fence_wall_s; /* over the rounds */
static const char *munge_socket;                         /* --munge */

static double mono (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s (void)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void store_d (double *p, double v)
{
    __atomic_store (p, &v, __ATOMIC_RELEASE);
}

static double load_d (double *p)
{
    double v;
    __atomic_load (p, &v, __ATOMIC_ACQUIRE);
    return v;
}

static void on_joined (void *arg)
{
    struct member *me = arg;
    store_d (&me->joined_at, mono ());
}

static void
on_lost (void *arg, const uint32_t *m, size_t n, uint32_t epoch, uint32_t nlive)
{
    struct member *me = arg;
    double now = mono ();

    for (size_t i = 0; i < n; i++) {
        if (m[i] == victim && __atomic_load_n (&killed, __ATOMIC_ACQUIRE)) {
            if (me->lost_at == 0)
                store_d (&me->lost_at, now);
        } else {
            __atomic_add_fetch (&me->spurious, 1, __ATOMIC_RELAXED);
        }
    }
}

static void on_self_fence (void *arg, const char *reason)
{
    struct member *me = arg;
    __atomic_store_n (&me->fenced, 1, __ATOMIC_RELEASE);
}

static void on_fence (void *arg, int status, const struct mesh_fence_result *res)
{
    struct member *me = arg;

    me->fence_status = status;
    me->fence_count = status == 0 ? res->count : 0;
    store_d (&me->fence_at, mono ());
    __atomic_store_n (&me->fence_seq_done,
                      status == 0 ? res->seq : me->fence_seq_done + 1,
                      __ATOMIC_RELEASE);
}

static void on_dmodex_request (
    void *arg, struct mesh_request *req, uint32_t origin, const void *data, size_t len)
{
    mesh_dmodex_respond (req, 0, "", 0);
}

static int count_fds (void)
{
    DIR *d = opendir ("/proc/self/fd");
    int n = 0;

    if (!d)
        return -1;
    while (readdir (d))
        n++;
    closedir (d);
    return n - 3; /* ., .., the DIR's own */
}

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct mesh *make_mesh (uint32_t n,
                               uint32_t self,
                               char **addrs,
                               int lfd,
                               const uint8_t *key,
                               uint32_t radix,
                               double timeout,
                               struct member *me)
{
    struct mesh_config cfg = {0};
    elastic_error_t err = {{0}};
    struct mesh *m;

    cfg.nmembers = n;
    cfg.self = self;
    cfg.addrs = (const char *const *)addrs;
    cfg.listen_fd = lfd;
    cfg.radix = radix;
    cfg.node_timeout = timeout;
    cfg.join_timeout = 300;
    cfg.key = key;
    if (munge_socket) {
        cfg.auth = MESH_AUTH_MUNGE;
        cfg.job = "mesh-bench";
        cfg.munge_socket = munge_socket;
    }
    cfg.ops.lost = on_lost;
    cfg.ops.self_fence = on_self_fence;
    cfg.ops.joined = on_joined;
    cfg.ops.dmodex_request = on_dmodex_request;
    cfg.arg = me;
    if (!(m = mesh_create (&cfg, &err)) || mesh_start (m, &err) < 0) {
        fprintf (stderr, "bench_mesh_scale: member %u: %s\n", self, err.text);
        return NULL;
    }
    return m;
}

/* the victim's process: a fence per 'f' read from cmd, 'F' written back */
static void victim_main (struct mesh *m, int cmd, int rep, struct member *me)
{
    char c;
    uint32_t seq = 0;

    while (read (cmd, &c, 1) == 1) {
        if (c != 'f')
            continue;
        seq++;
        if (mesh_fence (m, "v", 1, on_fence, me) < 0)
            _exit (1);
        while (__atomic_load_n (&me->fence_seq_done, __ATOMIC_ACQUIRE) < seq)
            usleep (1000);
        c = me->fence_status == 0 ? 'F' : 'E';
        if (write (rep, &c, 1) != 1)
            _exit (1);
    }
    _exit (0);
}

static int usage (const char *what)
{
    fprintf (stderr,
             "bench_mesh_scale: %s (usage: --members N [--radix K] [--timeout S] "
             "[--fences F] [--idle S] [--victim I] [--munge SOCKET])\n",
             what);
    return 2;
}

/* wait until done(i) holds for every member but the skipped one, or
 * timeout seconds; returns how many hold */
static uint32_t wait_all (uint32_t n,
                          uint32_t skip,
                          double timeout,
                          int (*done) (uint32_t i, void *ctx),
                          void *ctx)
{
    double t0 = mono ();
    uint32_t have;

    for (;;) {
        have = 0;
        for (uint32_t i = 0; i < n; i++)
            have += i != skip && done (i, ctx);
        if (have == n - 1 || mono () - t0 > timeout)
            return have;
        usleep (1000);
    }
}

static int is_joined (uint32_t i, void *ctx)
{
    return load_d (&mem[i].joined_at) != 0;
}
static int fence_done (uint32_t i, void *ctx)
{
    return __atomic_load_n (&mem[i].fence_seq_done, __ATOMIC_ACQUIRE) >= *(uint32_t *)ctx;
}
static int knows_lost (uint32_t i, void *ctx)
{
    return load_d (&mem[i].lost_at) != 0;
}

static double last_of (uint32_t n, uint32_t skip, size_t off)
{
    double t = 0;
    for (uint32_t i = 0; i < n; i++) {
        double v = *(double *)((char *)&mem[i] + off);
        if (i != skip && v > t)
            t = v;
    }
    return t;
}

/* one fence on every member (the victim's through its pipe when alive) */
static int fence_round (struct mesh **ms,
                        uint32_t n,
                        uint32_t seq,
                        int vcmd,
                        int vrep,
                        uint32_t want,
                        double *ms_out)
{
    double t0 = mono (), c0 = cpu_s ();
    char c = 'f';
    uint32_t got;

    if (vcmd >= 0 && write (vcmd, &c, 1) != 1)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (i != victim && mesh_fence (ms[i], "blob", 4, on_fence, &mem[i]) < 0) {
            fprintf (stderr,
                     "bench_mesh_scale: fence %u member %u: %s\n",
                     seq,
                     i,
                     strerror (errno));
            return -1;
        }
    }
    fence_issue_ms += (mono () - t0) * 1e3;
    got = wait_all (n, victim, 120, fence_done, &seq);
    if (vcmd >= 0 && (read (vrep, &c, 1) != 1 || c != 'F')) {
        fprintf (stderr, "bench_mesh_scale: fence %u: the victim failed\n", seq);
        return -1;
    }
    if (got != n - 1) {
        fprintf (stderr,
                 "bench_mesh_scale: fence %u: %u of %u members done after 120 s\n",
                 seq,
                 got,
                 n - 1);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (i != victim && (mem[i].fence_status != 0 || mem[i].fence_count != want)) {
            fprintf (stderr,
                     "bench_mesh_scale: fence %u member %u: status %d, %u blobs "
                     "(expected %u)\n",
                     seq,
                     i,
                     mem[i].fence_status,
                     mem[i].fence_count,
                     want);
            return -1;
        }
    }
    *ms_out = (last_of (n, victim, offsetof (struct member, fence_at)) - t0) * 1e3;
    fence_cpu_s += cpu_s () - c0;
    fence_wall_s += mono () - t0;
    return 0;
}

int main (int argc, char **argv)
{
    uint32_t n = 0, radix = 8, fences = 5;
    double timeout = 2.0, idle = 4.0;
    long vic = -1;
    uint8_t key[MESH_KEY_SIZE], secret[32];
    elastic_error_t err = {{0}};
    char **addrs;
    int *lfd, vcmd[2], vrep[2];
    struct mesh **ms;
    pid_t child;
    double t0, c0, join_ms, *fence_ms, *hb, idle_wall, idle_cpu, join_cpu;
    struct mesh_stats st;
    uint64_t *sent0;
    char buf[4096];
    size_t off = 0;
    double ncpu;
    char load1[16];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        double d;
        if (!v)
            return usage ("an option without its value");
        if (!strcmp (a, "--munge")) {
            munge_socket = v;
            i++;
            continue;
        }
        d = strtod (v, &end);
        if (!end || *end || d < 0) {
            snprintf (buf, sizeof (buf), "%s: '%s' is not a number >= 0", a, v);
            return usage (buf);
        }
        if (!strcmp (a, "--members"))
            n = (uint32_t)d;
        else if (!strcmp (a, "--radix"))
            radix = (uint32_t)d;
        else if (!strcmp (a, "--timeout"))
            timeout = d;
        else if (!strcmp (a, "--fences"))
            fences = (uint32_t)d;
        else if (!strcmp (a, "--idle"))
            idle = d;
        else if (!strcmp (a, "--victim"))
            vic = (long)d;
        else {
            snprintf (buf, sizeof (buf), "'%s' is not an option", a);
            return usage (buf);
        }
        i++;
    }
    if (n < 3 || n > 100000) {
        snprintf (buf, sizeof (buf), "--members %u (expected 3 .. 100000)", n);
        return usage (buf);
    }
    if (radix < 2) {
        snprintf (buf, sizeof (buf), "--radix %u (expected >= 2)", radix);
        return usage (buf);
    }
    victim = vic < 0 ? 1 : (uint32_t)vic;
    if (victim == 0 || victim >= n) {
        snprintf (buf, sizeof (buf), "--victim %ld (expected 1 .. members-1)", vic);
        return usage (buf);
    }
    signal (SIGPIPE, SIG_IGN);
    ncpu = (double)sysconf (_SC_NPROCESSORS_ONLN);
    {
        FILE *f = fopen ("/proc/loadavg", "r");
        if (!f || fscanf (f, "%15s", load1) != 1)
            strcpy (load1, "?");
        if (f)
            fclose (f);
    }
    if (mesh_auth_init (&err) < 0) {
        fprintf (stderr, "bench_mesh_scale: %s\n", err.text);
        return 1;
    }
    mesh_auth_nonce (secret, sizeof (secret));
    if (mesh_auth_key_derive ("mesh-bench", secret, sizeof (secret), key, &err) < 0) {
        fprintf (stderr, "bench_mesh_scale: %s\n", err.text);
        return 1;
    }
    mem = calloc (n, sizeof (*mem));
    addrs = calloc (n, sizeof (*addrs));
    lfd = calloc (n, sizeof (*lfd));
    ms = calloc (n, sizeof (*ms));
    fence_ms = calloc (fences + 1, sizeof (*fence_ms));
    hb = calloc (n, sizeof (*hb));
    sent0 = calloc (n, sizeof (*sent0));
    if (!mem || !addrs || !lfd || !ms || !fence_ms || !hb || !sent0)
        return 1;
    for (uint32_t i = 0; i < n; i++) {
        struct sockaddr_in sa = {0};
        socklen_t sl = sizeof (sa);
        mem[i].id = i;
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
        lfd[i] = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd[i] < 0 || bind (lfd[i], (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
            listen (lfd[i], 1024) < 0 ||
            getsockname (lfd[i], (struct sockaddr *)&sa, &sl) < 0 ||
            asprintf (&addrs[i], "127.0.0.1:%d", ntohs (sa.sin_port)) < 0) {
            fprintf (stderr,
                     "bench_mesh_scale: listening socket %u: %s (fd limit %s)\n",
                     i,
                     strerror (errno),
                     "see ulimit -n");
            return 1;
        }
    }
    if (pipe (vcmd) < 0 || pipe (vrep) < 0)
        return 1;
    if ((child = fork ()) < 0) {
        perror ("bench_mesh_scale: fork");
        return 1;
    }
    if (child == 0) {
        struct mesh *m;
        for (uint32_t i = 0; i < n; i++)
            if (i != victim)
                close (lfd[i]);
        close (vcmd[1]);
        close (vrep[0]);
        if (!(m = make_mesh (
                  n, victim, addrs, lfd[victim], key, radix, timeout, &mem[victim])))
            _exit (1);
        victim_main (m, vcmd[0], vrep[1], &mem[victim]);
    }
    close (lfd[victim]);
    close (vcmd[0]);
    close (vrep[1]);

    /* join */
    t0 = mono ();
    c0 = cpu_s ();
    for (uint32_t i = 0; i < n; i++) {
        if (i != victim &&
            !(ms[i] = make_mesh (n, i, addrs, lfd[i], key, radix, timeout, &mem[i])))
            goto fail;
    }
    if (wait_all (n, victim, 300, is_joined, NULL) != n - 1) {
        fprintf (stderr, "bench_mesh_scale: not every member joined in 300 s\n");
        goto fail;
    }
    join_ms = (last_of (n, victim, offsetof (struct member, joined_at)) - t0) * 1e3;
    join_cpu = cpu_s () - c0;

    /* fences */
    for (uint32_t f = 1; f <= fences; f++)
        if (fence_round (ms, n, f, vcmd[1], vrep[0], n, &fence_ms[f - 1]) < 0)
            goto fail;

    /* idle: heartbeats only */
    for (uint32_t i = 0; i < n; i++) {
        if (i != victim) {
            mesh_get_stats (ms[i], &st);
            sent0[i] = st.sent_bytes;
        }
    }
    t0 = mono ();
    c0 = cpu_s ();
    usleep ((useconds_t)(idle * 1e6));
    idle_wall = mono () - t0;
    idle_cpu = cpu_s () - c0;
    {
        uint32_t k = 0;
        double sum = 0, max = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (i == victim)
                continue;
            mesh_get_stats (ms[i], &st);
            hb[k] = (double)(st.sent_bytes - sent0[i]) / idle_wall;
            sum += hb[k];
            if (hb[k] > max)
                max = hb[k];
            k++;
        }
        qsort (hb, k, sizeof (*hb), cmp_double);
        off += (size_t)snprintf (buf + off,
                                 sizeof (buf) - off,
                                 " hb_Bps_median=%.1f hb_Bps_mean=%.1f hb_Bps_max=%.1f",
                                 hb[k / 2],
                                 sum / k,
                                 max);
    }
    off += (size_t)snprintf (buf + off,
                             sizeof (buf) - off,
                             " idle_cpu_pct=%.1f fds=%d",
                             100 * idle_cpu / idle_wall,
                             count_fds ());
    for (uint32_t i = 0; i < n; i++) {
        if (mem[i].spurious || mem[i].fenced) {
            fprintf (stderr,
                     "bench_mesh_scale: member %u saw a loss (or fenced itself) before "
                     "the kill: the machine is too loaded for a %.1f s node timeout\n",
                     i,
                     timeout);
            goto fail;
        }
    }

    /* kill the victim: every survivor must learn it */
    {
        uint32_t got;
        double first = 0, last;
        __atomic_store_n (&killed, 1, __ATOMIC_RELEASE);
        c0 = cpu_s ();
        t0 = mono ();
        kill (child, SIGKILL);
        got = wait_all (n, victim, 60, knows_lost, NULL);
        if (got != n - 1) {
            fprintf (stderr,
                     "bench_mesh_scale: %u of %u survivors knew of the loss after "
                     "60 s\n",
                     got,
                     n - 1);
            goto fail;
        }
        last = last_of (n, victim, offsetof (struct member, lost_at));
        for (uint32_t i = 0; i < n; i++)
            if (i != victim && (first == 0 || mem[i].lost_at < first))
                first = mem[i].lost_at;
        off += (size_t)snprintf (buf + off,
                                 sizeof (buf) - off,
                                 " lost_first_ms=%.2f lost_last_ms=%.2f",
                                 (first - t0) * 1e3,
                                 (last - t0) * 1e3);
        waitpid (child, NULL, 0);
        child = -1;
    }
    if (fence_round (ms, n, fences + 1, -1, -1, n - 1, &fence_ms[fences]) < 0)
        goto fail;
    printf ("result auth=%s n=%u radix=%u timeout=%.2f join_ms=%.1f join_cpu_s=%.2f "
            "fence_ms=",
            munge_socket ? "munge" : "secret",
            n,
            radix,
            timeout,
            join_ms,
            join_cpu);
    for (uint32_t f = 0; f < fences; f++)
        printf ("%s%.2f", f ? "," : "", fence_ms[f]);
    printf ("%s fence_after_loss_ms=%.2f fence_issue_ms=%.2f fence_cpu_util=%.2f "
            "cores=%ld load1=%s spurious=0\n",
            buf,
            fence_ms[fences],
            fence_issue_ms / (fences + 1),
            fence_cpu_s / (ncpu * fence_wall_s),
            (long)ncpu,
            load1);
    fflush (stdout);
    _exit (0);
fail:
    if (child > 0)
        kill (child, SIGKILL);
    fflush (stderr);
    _exit (1);
}
