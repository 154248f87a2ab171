/* agent.c - the agent core: torchelastic's SimpleElasticAgent state machine
 *
 *   rendezvous -> assign ranks -> start -> monitor -> restart or stop
 *              -> exit barrier -> shutdown
 *
 * One loop (loop.c) carries everything: the signalfd, the backend's
 * descriptors (pidfds, output pipes), the file-timer FIFO and a wake-up
 * eventfd.  Callbacks record facts (a worker exited, a signal arrived); the
 * state machine below acts on them, so a crash is acted on as soon as it is
 * seen, and --monitor-interval only bounds how often the watchdogs run.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
#include "errorfile.h"
#include "filetimer.h"
#include "health.h"
#include "util.h"

static void errset (elastic_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static void errset (elastic_error_t *err, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return;
    va_start (ap, fmt);
    vsnprintf (err->text, sizeof (err->text), fmt, ap);
    va_end (ap);
}

const char *elastic_agent_state_name (int state)
{
    static const char *names[] = {
        "UNKNOWN", "INIT", "HEALTHY", "UNHEALTHY", "STOPPED", "SUCCEEDED", "FAILED"};

    if (state < 0 || state > ELASTIC_AGENT_FAILED)
        return "UNKNOWN";
    return names[state];
}

/* A backend's watcher, called through the loop. */
struct watch {
    elastic_agent_t *agent;
    elastic_agent_watch_fn cb;
    void *arg;
    int fd;
    struct watch *next;
};

/* ---- the static rendezvous ------------------------------------------------ */

static int static_next (elastic_agent_t *agent,
                        void *ctx,
                        struct elastic_agent_rdzv_info *info,
                        elastic_error_t *err)
{
    *info = agent->static_info;
    return ELASTIC_OK;
}

static const struct elastic_agent_rdzv static_rdzv = {
    .name = "static",
    .next_rendezvous = static_next,
};

static int check_rdzv_info (const struct elastic_agent_rdzv_info *info,
                            int nproc,
                            elastic_error_t *err)
{
    if (info->group_world_size < 1 || info->group_rank < 0 ||
        info->group_rank >= info->group_world_size) {
        errset (err,
                "rendezvous: group rank %d is not in 0..%d",
                info->group_rank,
                info->group_world_size - 1);
        return ELASTIC_ERR_INVAL;
    }
    if (info->world_size < 0 || info->local_rank_base < 0 || info->node_local_size < 0) {
        errset (err, "rendezvous: negative world size or local rank");
        return ELASTIC_ERR_INVAL;
    }
    if (info->rank_base >= 0 && info->world_size > 0 &&
        info->rank_base + nproc > info->world_size) {
        errset (err,
                "rendezvous: ranks %d..%d do not fit in world size %d",
                info->rank_base,
                info->rank_base + nproc - 1,
                info->world_size);
        return ELASTIC_ERR_INVAL;
    }
    if (info->master_port < -1 || info->master_port > 65535) {
        errset (err, "rendezvous: master port %d is not in -1..65535", info->master_port);
        return ELASTIC_ERR_INVAL;
    }
    return ELASTIC_OK;
}

/* ---- create / destroy ------------------------------------------------------ */

elastic_agent_t *elastic_agent_create (const elastic_agent_spec_t *spec,
                                       elastic_error_t *err)
{
    struct elastic_agent *agent;

    if (!spec) {
        errset (err, "elastic_agent_create: NULL spec");
        return NULL;
    }
    if (!spec->argv && !spec->fn) {
        errset (err, "no entrypoint: give the program to run and its arguments");
        return NULL;
    }
    if (spec_check (spec, err) < 0)
        return NULL;
    log_init_from_env ("elastic-agent", "ELASTIC_LOG");
    if (!(agent = calloc (1, sizeof (*agent))))
        goto nomem;
    agent->spec = spec;
    agent->sigfd = agent->wakefd = -1;
    agent->master_port = -1;
    agent->health_port = -1;
    agent->last_fail_rank = -1;
    pthread_mutex_init (&agent->lock, NULL);
    agent->rdzv = &static_rdzv;
    agent->static_info.group_rank = 0;
    agent->static_info.group_world_size = 1;
    agent->static_info.rank_base = -1;
    agent->nworkers = spec->nproc;
    if (!(agent->w = calloc ((size_t)spec->nproc, sizeof (*agent->w))))
        goto nomem;
    if (!(agent->loop = loop_create ()))
        goto nomem;
#if HAVE_PMIX
    if (spec_wireup (spec) == WIREUP_PMIX) {
        char msg[sizeof (err->text)];
        agent->backend = &pmix_backend;
        if (!(agent->backend_ctx = pmix_backend_create (agent, msg, sizeof (msg)))) {
            errset (err, "%s", msg);
            elastic_agent_destroy (agent);
            return NULL;
        }
        return agent;
    }
#endif
    agent->backend = &local_backend;
    if (!(agent->backend_ctx = local_backend_create (agent)))
        goto nomem;
    return agent;
nomem:
    errset (err, "out of memory");
    elastic_agent_destroy (agent);
    return NULL;
}

void elastic_agent_destroy (elastic_agent_t *agent)
{
    int saved = errno;

    if (agent) {
        group_release (agent);
        if (agent->backend && agent->backend->destroy)
            agent->backend->destroy (agent->backend_ctx);
        if (agent->rdzv && agent->rdzv->destroy)
            agent->rdzv->destroy (agent->rdzv_ctx);
        while (agent->watches) {
            struct watch *next = agent->watches->next;
            free (agent->watches);
            agent->watches = next;
        }
        loop_destroy (agent->loop);
        free (agent->w);
        pthread_mutex_destroy (&agent->lock);
        free (agent);
    }
    errno = saved;
}

int elastic_agent_set_backend (elastic_agent_t *agent,
                               const struct elastic_agent_backend *ops,
                               void *ctx)
{
    if (!agent || !ops || !ops->start_workers || !ops->monitor_workers ||
        !ops->stop_workers)
        return ELASTIC_ERR_INVAL;
    if (agent->running)
        return ELASTIC_ERR_STATE;
    if (agent->backend && agent->backend->destroy)
        agent->backend->destroy (agent->backend_ctx);
    agent->backend = ops;
    agent->backend_ctx = ctx;
    return ELASTIC_OK;
}

int elastic_agent_set_rendezvous (elastic_agent_t *agent,
                                  const struct elastic_agent_rdzv *ops,
                                  void *ctx)
{
    if (!agent || !ops || !ops->next_rendezvous)
        return ELASTIC_ERR_INVAL;
    if (agent->running)
        return ELASTIC_ERR_STATE;
    if (agent->rdzv && agent->rdzv->destroy)
        agent->rdzv->destroy (agent->rdzv_ctx);
    agent->rdzv = ops;
    agent->rdzv_ctx = ctx;
    return ELASTIC_OK;
}

int elastic_agent_set_static_rendezvous (elastic_agent_t *agent,
                                         const struct elastic_agent_rdzv_info *info,
                                         elastic_error_t *err)
{
    int rc;

    if (!agent || !info) {
        errset (err, "elastic_agent_set_static_rendezvous: NULL argument");
        return ELASTIC_ERR_INVAL;
    }
    if ((rc = check_rdzv_info (info, agent->spec->nproc, err)) != ELASTIC_OK)
        return rc;
    if ((rc = elastic_agent_set_rendezvous (agent, &static_rdzv, NULL)) != ELASTIC_OK)
        return rc;
    agent->static_info = *info;
    return ELASTIC_OK;
}

/* ---- signals --------------------------------------------------------------- */

static void on_signal (struct loop *loop, int fd, int revents, void *arg);
static void on_wake (struct loop *loop, int fd, int revents, void *arg);

static int signals_setup (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    struct sigaction ign = {.sa_handler = SIG_IGN};

    sigemptyset (&agent->blocked);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sigismember (&spec->handled, sig) != 1 &&
            sigismember (&spec->preempt, sig) != 1)
            continue;
        /* what our parent told us to ignore (nohup, a shell's background
         * job) stays ignored, by us and by the workers */
        if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
            log_info ("%s is ignored (inherited): not handled", signal_name (sig));
            continue;
        }
        sigaddset (&agent->blocked, sig);
    }
    if (spec->subreaper)
        sigaddset (&agent->blocked, SIGCHLD);
    if (pthread_sigmask (SIG_BLOCK, &agent->blocked, &agent->oldmask) != 0)
        goto error;
    sigaction (SIGPIPE, &ign, &agent->old_sigpipe);
    agent->signals_set = 1;
    if ((agent->sigfd = signalfd (-1, &agent->blocked, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
        goto error;
    if (loop_add (agent->loop, agent->sigfd, on_signal, agent) < 0)
        goto error;
    if ((agent->wakefd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        goto error;
    if (loop_add (agent->loop, agent->wakefd, on_wake, agent) < 0)
        goto error;
    if (spec->subreaper && prctl (PR_SET_CHILD_SUBREAPER, 1) < 0)
        log_warn ("cannot become a child subreaper: %s", strerror (errno));
    return 0;
error:
    errset (err, "signal setup: %s", strerror (errno));
    return -1;
}

static void signals_restore (elastic_agent_t *agent)
{
    if (agent->sigfd >= 0) {
        struct signalfd_siginfo si;
        /* Signals that arrived while the agent ran are the agent's: a
         * preemption notice sent twice (Slurm signals every process of a
         * step, and the agent relays it too) must not kill the caller when
         * its mask is restored below. */
        while (read (agent->sigfd, &si, sizeof (si)) == sizeof (si))
            if ((int)si.ssi_signo != SIGCHLD)
                log_debug ("%s arrived after the workers stopped: consumed",
                           signal_name ((int)si.ssi_signo));
        loop_remove (agent->loop, agent->sigfd);
        close (agent->sigfd);
        agent->sigfd = -1;
    }
    if (agent->wakefd >= 0) {
        loop_remove (agent->loop, agent->wakefd);
        close (agent->wakefd);
        agent->wakefd = -1;
    }
    if (agent->signals_set) {
        sigaction (SIGPIPE, &agent->old_sigpipe, NULL);
        pthread_sigmask (SIG_SETMASK, &agent->oldmask, NULL);
        agent->signals_set = 0;
    }
}

void elastic_agent_child_reset (elastic_agent_t *agent)
{
    if (agent && agent->signals_set) {
        struct sigaction dfl, cur;
        /* A handler the caller installed for a handled signal (elastic-exec
         * catches late ones) would swallow a stop signal that arrives
         * between the unblocking below and exec, which resets caught
         * signals only then: reset them first. */
        memset (&dfl, 0, sizeof (dfl));
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            if (sigismember (&agent->blocked, sig) == 1 && sig != SIGCHLD &&
                sigaction (sig, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN &&
                cur.sa_handler != SIG_DFL)
                sigaction (sig, &dfl, NULL);
        sigaction (SIGPIPE, &agent->old_sigpipe, NULL);
        sigprocmask (SIG_SETMASK, &agent->oldmask, NULL);
    }
}

static void signal_received (elastic_agent_t *agent, int sig)
{
    if (agent->stopping && agent->pending_signal) {
        /* The same signal again within a second is the same notice: Slurm
         * signals a step's processes both by process group and by process
         * tree, a scheduler may repeat a preemption notice.  Killing the
         * workers then would cost them the snapshot they are writing. */
        if (sig == agent->pending_signal && mono_now () - agent->pending_since < 1.0) {
            log_debug ("%s received again within a second: the same notice",
                       signal_name (sig));
            return;
        }
        /* a second signal while stopping: do not wait any longer */
        if (!agent->escalate)
            log_warn ("%s received again: killing the workers now", signal_name (sig));
        agent->escalate = 1;
        return;
    }
    if (!agent->pending_signal) {
        agent->pending_signal = sig;
        agent->pending_since = mono_now ();
    }
}

static void on_signal (struct loop *loop, int fd, int revents, void *arg)
{
    elastic_agent_t *agent = arg;
    struct signalfd_siginfo si;
    int child = 0;

    while (read (fd, &si, sizeof (si)) == sizeof (si)) {
        if ((int)si.ssi_signo == SIGCHLD)
            child = 1;
        else
            signal_received (agent, (int)si.ssi_signo);
    }
    if (child && agent->backend->child_event)
        agent->backend->child_event (agent, agent->backend_ctx);
}

static void on_wake (struct loop *loop, int fd, int revents, void *arg)
{
    elastic_agent_t *agent = arg;
    uint64_t v;
    int sig;

    while (read (fd, &v, sizeof (v)) == sizeof (v))
        ;
    if ((sig = agent->requested_signal) > 0) {
        agent->requested_signal = 0;
        signal_received (agent, sig);
    }
}

int elastic_agent_request_stop (elastic_agent_t *agent, int signum)
{
    uint64_t one = 1;

    if (!agent || signum <= 0 || signum >= NSIG)
        return ELASTIC_ERR_INVAL;
    agent->requested_signal = signum;
    if (agent->wakefd >= 0 && write (agent->wakefd, &one, sizeof (one)) < 0) {
        /* the counter is saturated: a wake-up is pending anyway */
    }
    return ELASTIC_OK;
}

/* ---- the loop ------------------------------------------------------------ */

static void tick (elastic_agent_t *agent)
{
    uint64_t now = mono_ns ();
    uint64_t last = __atomic_exchange_n (&agent->tick_ns, now, __ATOMIC_ACQ_REL);
    double gap = (double)(now - last) * 1e-9;

    /* the loop itself noticed that it stalled (nobody asked /healthz) */
    if (gap > agent->spec->health_timeout && agent->health)
        agent_health_observe (agent, 0, gap);
    if (__atomic_load_n (&agent->health_reported, __ATOMIC_ACQUIRE) == 0)
        agent_health_observe (agent, 1, 0);
}

int agent_loop_healthy (elastic_agent_t *agent, double *age)
{
    uint64_t t = __atomic_load_n (&agent->tick_ns, __ATOMIC_ACQUIRE);
    double a = (double)(mono_ns () - t) * 1e-9;

    if (age)
        *age = a;
    return a <= agent->spec->health_timeout;
}

void agent_health_observe (elastic_agent_t *agent, int healthy, double age)
{
    int old = __atomic_exchange_n (&agent->health_reported, healthy, __ATOMIC_ACQ_REL);

    if (old == healthy)
        return;
    eventlog_emit (agent->ev,
                   "health",
                   json_pack ("{s:s s:s s:f s:f}",
                              "from",
                              old ? "healthy" : "unhealthy",
                              "to",
                              healthy ? "healthy" : "unhealthy",
                              "loop_age_s",
                              age,
                              "timeout_s",
                              agent->spec->health_timeout));
    if (healthy)
        log_info ("health: the agent's loop is making progress again");
    else
        log_warn ("health: the agent's loop made no progress for %.1f s", age);
}

static int run_loop_once (elastic_agent_t *agent, double timeout)
{
    int rc = loop_run_once (agent->loop, timeout), sig;

    tick (agent);
    /* a stop requested before the loop could hear it */
    if ((sig = agent->requested_signal) > 0) {
        agent->requested_signal = 0;
        signal_received (agent, sig);
    }
    return rc;
}

int elastic_agent_wait (elastic_agent_t *agent,
                        double timeout,
                        int (*done) (elastic_agent_t *agent, void *arg),
                        void *arg)
{
    double deadline = mono_now () + timeout;

    if (!agent || !done)
        return ELASTIC_ERR_INVAL;
    while (!done (agent, arg)) {
        double now = mono_now (), t;
        if (agent->escalate || now >= deadline)
            return ELASTIC_ERR_STATE;
        t = deadline - now;
        if (t > agent->spec->monitor_interval)
            t = agent->spec->monitor_interval;
        if (agent->health && t > agent->spec->health_timeout / 2)
            t = agent->spec->health_timeout / 2;
        if (run_loop_once (agent, t) < 0) {
            log_err ("event loop: %s", strerror (errno));
            return ELASTIC_ERR_STATE;
        }
    }
    return ELASTIC_OK;
}

static void on_watch (struct loop *loop, int fd, int revents, void *arg)
{
    struct watch *wt = arg;
    wt->cb (wt->agent, fd, revents, wt->arg);
}

int elastic_agent_watch (elastic_agent_t *agent,
                         int fd,
                         elastic_agent_watch_fn cb,
                         void *arg)
{
    struct watch *wt;

    if (!agent || fd < 0 || !cb)
        return ELASTIC_ERR_INVAL;
    if (!(wt = calloc (1, sizeof (*wt))))
        return ELASTIC_ERR_NOMEM;
    wt->agent = agent;
    wt->cb = cb;
    wt->arg = arg;
    wt->fd = fd;
    if (loop_add (agent->loop, fd, on_watch, wt) < 0) {
        int rc = errno == ENOMEM ? ELASTIC_ERR_NOMEM : ELASTIC_ERR_INVAL;
        free (wt);
        return rc;
    }
    wt->next = agent->watches;
    agent->watches = wt;
    return ELASTIC_OK;
}

int elastic_agent_unwatch (elastic_agent_t *agent, int fd)
{
    struct watch **pp;

    if (!agent)
        return ELASTIC_ERR_INVAL;
    for (pp = &agent->watches; *pp; pp = &(*pp)->next) {
        struct watch *wt = *pp;
        if (wt->fd != fd)
            continue;
        /* the loop frees its watcher record only after dispatch; ours may
         * go now because the loop never touches it again */
        loop_remove (agent->loop, fd);
        *pp = wt->next;
        free (wt);
        return ELASTIC_OK;
    }
    return ELASTIC_ERR_NOT_FOUND;
}

/* ---- ports and directories ----------------------------------------------- */

/* Bind port on all interfaces (0: any free port).  Returns the port bound
 * and closes the socket, or -1 with errno. */
static int probe_port (int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof (sa);
    int fd, one = 1, saved;

    if ((fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    sa.sin_addr.s_addr = htonl (INADDR_ANY);
    sa.sin_port = htons ((uint16_t)port);
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        getsockname (fd, (struct sockaddr *)&sa, &len) < 0) {
        saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    close (fd);
    return ntohs (sa.sin_port);
}

static void make_run_id (char *buf, size_t size)
{
    unsigned char r[8] = {0};
    int fd;

    if ((fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
        if (read (fd, r, sizeof (r)) != (ssize_t)sizeof (r))
            memset (r, 0, sizeof (r));
        close (fd);
    }
    if (r[0] == 0 && r[1] == 0) {
        uint64_t x = mono_ns () ^ ((uint64_t)getpid () << 32);
        memcpy (r, &x, sizeof (r));
    }
    snprintf (buf,
              size,
              "%02x%02x%02x%02x-%02x%02x-%02x%02x",
              r[0],
              r[1],
              r[2],
              r[3],
              r[4],
              r[5],
              r[6],
              r[7]);
}

/* Where a temporary run directory that holds only small files goes. */
#define SMALL_RUN_DIR "/dev/shm"

/* 1 if a run directory would hold only the workers' heartbeats (mapped
 * shared memory anyway) and error files: no output logs, no filtered
 * copies, no function results.  On a disk file system its directories
 * cost a journal update and, with online discard, a synchronous discard
 * each; on tmpfs they cost neither. */
static int run_dir_is_small (const struct elastic_agent_spec *spec)
{
    return !spec->redirects.is_map && spec->redirects.value == 0 && !spec->tee.is_map &&
           spec->tee.value == 0 && spec->ndup_out == 0 && spec->ndup_err == 0 &&
           !spec->fn;
}

/* Decide the base directory once the first rendezvous told us our group:
 * --log-dir, else a temporary directory in TMPDIR when it is set, else in
 * /dev/shm when it holds only small files (run_dir_is_small), else in
 * /tmp. */
static int setup_base_dir (elastic_agent_t *agent, char *err, size_t errsz)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int n;

    if (agent->base_dir[0])
        return 0;
    if (spec->log_dir) {
        if (agent->rinfo.group_world_size > 1)
            n = snprintf (agent->base_dir,
                          sizeof (agent->base_dir),
                          "%s/%s/group_%d",
                          spec->log_dir,
                          agent->run_id,
                          agent->rinfo.group_rank);
        else
            n = snprintf (agent->base_dir,
                          sizeof (agent->base_dir),
                          "%s/%s",
                          spec->log_dir,
                          agent->run_id);
        if (n >= (int)sizeof (agent->base_dir) - 64) {
            snprintf (err, errsz, "log-dir: '%s' is too long", spec->log_dir);
            agent->base_dir[0] = '\0';
            return -1;
        }
        if (mkdir_p (agent->base_dir) < 0) {
            errfmt (err,
                    errsz,
                    "log-dir: cannot create %s: %s",
                    agent->base_dir,
                    strerror (errno));
            agent->base_dir[0] = '\0';
            return -1;
        }
        return 0;
    }
    const char *tmp = getenv ("TMPDIR");
    if ((!tmp || *tmp == '\0') && run_dir_is_small (spec)) {
        /* heartbeats and error files only: shared memory, no disk */
        snprintf (agent->base_dir,
                  sizeof (agent->base_dir),
                  "%s/elastic-%.64s-XXXXXX",
                  SMALL_RUN_DIR,
                  agent->run_id);
        if (mkdtemp (agent->base_dir)) {
            agent->base_is_tmp = 1;
            return 0;
        }
    }
    if (!tmp || *tmp == '\0' || strlen (tmp) > 512)
        tmp = "/tmp";
    snprintf (agent->base_dir,
              sizeof (agent->base_dir),
              "%s/elastic-%.64s-XXXXXX",
              tmp,
              agent->run_id);
    if (!mkdtemp (agent->base_dir)) {
        snprintf (
            err, errsz, "cannot create a directory in %s: %s", tmp, strerror (errno));
        agent->base_dir[0] = '\0';
        return -1;
    }
    agent->base_is_tmp = 1;
    return 0;
}

/* ---- the state machine ---------------------------------------------------- */

static json_t *worker_brief (const struct worker *w)
{
    return json_pack ("{s:i s:i s:i}",
                      "rank",
                      w->rank,
                      "local_rank",
                      w->local_rank,
                      "pid",
                      (int)w->pid);
}

/* Rendezvous, assign ranks, start.  Returns ELASTIC_OK or an error with err. */
static int initialize_workers (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    struct elastic_agent_rdzv_info info;
    char msg[256];
    double t0 = mono_now (), t1;
    int rc;

    group_set_state (agent, ELASTIC_AGENT_INIT);
    memset (&info, 0, sizeof (info));
    info.rank_base = -1;
    if ((rc = agent->rdzv->next_rendezvous (agent, agent->rdzv_ctx, &info, err)) !=
        ELASTIC_OK)
        return rc;
    if ((rc = check_rdzv_info (&info, spec->nproc, err)) != ELASTIC_OK)
        return rc;
    agent->rinfo = info;
    if (info.run_id[0] && strcmp (info.run_id, agent->run_id) != 0) {
        snprintf (agent->run_id, sizeof (agent->run_id), "%s", info.run_id);
        eventlog_set_run_id (agent->ev, agent->run_id);
    }
    /* MASTER_ADDR / MASTER_PORT for this attempt */
    if (info.master_port < 0) {
        agent->master_port = -1;
        agent->master_addr[0] = '\0';
        agent->port_fresh = 1;
    } else {
        const char *addr = info.master_addr[0] ? info.master_addr
                           : spec->master_addr ? spec->master_addr
                           : spec->local_addr  ? spec->local_addr
                                               : "127.0.0.1";
        int port = info.master_port > 0 ? info.master_port : spec->master_port;
        snprintf (agent->master_addr, sizeof (agent->master_addr), "%s", addr);
        agent->port_fresh = port == 0;
        if (port == 0) {
            if ((port = probe_port (0)) < 0) {
                errset (
                    err, "cannot find a free port for MASTER_PORT: %s", strerror (errno));
                return ELASTIC_ERR_IO;
            }
        } else if (!agent->started && info.group_rank == 0 && probe_port (port) < 0) {
            errset (
                err,
                "master-port: port %d cannot be used (%s); pick another or leave it out",
                port,
                strerror (errno));
            return ELASTIC_ERR_INVAL;
        }
        agent->master_port = port;
    }
    t1 = mono_now ();
    eventlog_emit (agent->ev,
                   "rendezvous",
                   json_pack ("{s:s s:i s:i s:i s:i s:s s:i s:f}",
                              "backend",
                              agent->rdzv->name ? agent->rdzv->name : "custom",
                              "attempt",
                              agent->restart_count,
                              "group_rank",
                              info.group_rank,
                              "group_world_size",
                              info.group_world_size,
                              "nproc",
                              spec->nproc,
                              "master_addr",
                              agent->master_addr,
                              "master_port",
                              agent->master_port,
                              "duration_ms",
                              (t1 - t0) * 1e3));
    if (setup_base_dir (agent, msg, sizeof (msg)) < 0) {
        errset (err, "%s", msg);
        return ELASTIC_ERR_IO;
    }
    if (!agent->ft && spec->file_timer && watchdog_setup (agent, msg, sizeof (msg)) < 0) {
        errset (err, "%s", msg);
        return ELASTIC_ERR_IO;
    }
    if (group_prepare (agent, msg, sizeof (msg)) < 0) {
        errset (err, "%s", msg);
        return ELASTIC_ERR_IO;
    }
    agent->stopping = 0;
    if ((rc = agent->backend->start_workers (agent, agent->backend_ctx, err)) !=
        ELASTIC_OK)
        return rc;
    agent->started = 1;
    group_set_state (agent, ELASTIC_AGENT_HEALTHY);
    eventlog_emit (agent->ev,
                   "workers_started",
                   json_pack ("{s:i s:i s:f}",
                              "attempt",
                              agent->restart_count,
                              "nproc",
                              spec->nproc,
                              "duration_ms",
                              (mono_now () - t0) * 1e3));
    return ELASTIC_OK;
}

/* Stop every worker on purpose: signum, then SIGKILL after timeout. */
static void stop_workers (elastic_agent_t *agent, int signum, double timeout)
{
    double t0 = mono_now ();
    int alive = group_alive (agent);

    agent->stopping = 1;
    if (agent->backend->stop_workers (agent, agent->backend_ctx, signum, timeout) !=
        ELASTIC_OK)
        log_warn ("stopping the workers: the backend reported an error");
    eventlog_emit (agent->ev,
                   "workers_stopped",
                   json_pack ("{s:i s:s s:i s:f s:i}",
                              "attempt",
                              agent->restart_count,
                              "signal",
                              signum > 0 ? signal_name (signum) : "none",
                              "alive_before",
                              alive,
                              "duration_ms",
                              (mono_now () - t0) * 1e3,
                              "in_background",
                              agent->stop_detached));
    if (agent->ft)
        filetimer_clear (agent->ft);
}

/* The earliest failure of this attempt that failed the group (NULL if
 * none): workers lost in place only when every failure was one (their
 * peers went on; what came after decided). */
static struct worker *root_cause (elastic_agent_t *agent)
{
    struct worker *best = NULL;

    for (int pass = 0; pass < 2 && !best; pass++) {
        for (int i = 0; i < agent->nworkers; i++) {
            struct worker *w = &agent->w[i];
            if (!w->failed || (pass == 0 && w->lost))
                continue;
            if (!best || (long long)w->fail_time < (long long)best->fail_time ||
                ((long long)w->fail_time == (long long)best->fail_time &&
                 w->fail_seq < best->fail_seq))
                best = w;
        }
    }
    return best;
}

static double first_failure_mono (elastic_agent_t *agent)
{
    double t = 0;

    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (w->failed && w->exit_mono > 0 && (t == 0 || w->exit_mono < t))
            t = w->exit_mono;
    }
    return t ? t : mono_now ();
}

static json_t *failures_json (elastic_agent_t *agent)
{
    json_t *a = json_array ();

    for (int i = 0; a && i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (!w->failed)
            continue;
        json_array_append_new (a,
                               json_pack ("{s:i s:i s:i s:i s:s? s:s?}",
                                          "rank",
                                          w->rank,
                                          "local_rank",
                                          w->local_rank,
                                          "pid",
                                          (int)w->pid,
                                          "exitcode",
                                          w->exited ? w->exitcode : 0,
                                          "signal",
                                          w->signum ? signal_name (w->signum) : NULL,
                                          "message",
                                          w->message));
    }
    return a;
}

static int restart_workers (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    struct worker *root = root_cause (agent);
    double detected = first_failure_mono (agent), t_stop, t_start;
    int rc, detached;

    log_warn ("worker group failed (rank %d: %s); restarting (%d of %d)",
              root ? root->rank : -1,
              root && root->message ? root->message : "unknown",
              agent->restart_count + 1,
              spec->max_restarts);
    eventlog_emit (agent->ev,
                   "restart",
                   json_pack ("{s:i s:i s:i s:o}",
                              "attempt",
                              agent->restart_count + 1,
                              "max_restarts",
                              spec->max_restarts,
                              "root_cause_rank",
                              root ? root->rank : -1,
                              "failures",
                              failures_json (agent)));
    /* the next attempt need not wait for the old workers' exits when it
     * cannot collide with them: its own process groups and directories
     * always, its own MASTER_PORT when the port is picked per attempt
     * (the backend decides the rest: see local.c) */
    agent->stop_after_failure = 1;
    agent->stop_detach = agent->port_fresh;
    stop_workers (agent, spec->stop_signal, spec->shutdown_timeout);
    agent->stop_detach = 0;
    agent->stop_after_failure = 0;
    detached = agent->stop_detached;
    agent->stop_detached = 0;
    group_set_state (agent, ELASTIC_AGENT_STOPPED);
    t_stop = mono_now ();
    if (agent->pending_signal) {
        /* told to stop while we were stopping: do not start again */
        log_warn ("%s received during the restart: not restarting",
                  signal_name (agent->pending_signal));
        return ELASTIC_OK;
    }
    pthread_mutex_lock (&agent->lock);
    agent->restart_count++;
    agent->remaining_restarts--;
    pthread_mutex_unlock (&agent->lock);
    rc = initialize_workers (agent, err);
    t_start = mono_now ();
    eventlog_emit (agent->ev,
                   "restarted",
                   json_pack ("{s:i s:b s:f s:f s:i}",
                              "attempt",
                              agent->restart_count,
                              "ok",
                              rc == ELASTIC_OK,
                              "stop_ms",
                              (t_stop - detected) * 1e3,
                              "failure_to_start_ms",
                              (t_start - detected) * 1e3,
                              "stopping_in_background",
                              detached));
    return rc;
}

/* Workers started exiting with ELASTIC_EXIT_SUSPENDED: let the rest follow. */
static int suspend_workers (elastic_agent_t *agent, int signum)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int suspended = 0, total = agent->nworkers;

    log_warn ("%s: relaying the preemption notice to the workers; waiting up to %.1f s "
              "for them "
              "to suspend (exit %d)",
              signum > 0 ? signal_name (signum) : "a worker suspended",
              spec->shutdown_timeout,
              ELASTIC_EXIT_SUSPENDED);
    eventlog_emit (agent->ev,
                   "preempt",
                   json_pack ("{s:s s:f}",
                              "signal",
                              signum > 0 ? signal_name (signum) : "none",
                              "timeout_s",
                              spec->shutdown_timeout));
    stop_workers (agent, signum, spec->shutdown_timeout);
    for (int i = 0; i < total; i++)
        if (agent->w[i].suspended)
            suspended++;
    eventlog_emit (agent->ev,
                   "suspended",
                   json_pack ("{s:i s:i}", "suspended", suspended, "workers", total));
    if (suspended == total)
        log_info ("all %d workers suspended", total);
    else
        log_warn ("%d of %d workers suspended (exit %d); the others were stopped",
                  suspended,
                  total,
                  ELASTIC_EXIT_SUSPENDED);
    group_set_state (agent, ELASTIC_AGENT_STOPPED);
    return ELASTIC_EXIT_SUSPENDED;
}

static int any_suspended (elastic_agent_t *agent)
{
    for (int i = 0; i < agent->nworkers; i++)
        if (agent->w[i].suspended)
            return 1;
    return 0;
}

static int first_preempt_signal (const struct elastic_agent_spec *spec)
{
    if (sigismember (&spec->preempt, SIGTERM) == 1)
        return SIGTERM;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember (&spec->preempt, sig) == 1)
            return sig;
    return 0;
}

/* The exit status a failed run reports: the root cause's. */
static int failure_status (elastic_agent_t *agent)
{
    struct worker *root = root_cause (agent);

    if (!root)
        return 1;
    if (root->signum > 0)
        return 128 + root->signum;
    if (root->exited && root->exitcode > 0)
        return root->exitcode & 0xff ? root->exitcode & 0xff : 1;
    return 1;
}

/* A worker ended the job (elastic_agent_abort): kill the rest, no restart. */
static void end_aborted (elastic_agent_t *agent, int *statusp, int *final_state)
{
    stop_workers (agent, SIGKILL, 0);
    group_set_state (agent, ELASTIC_AGENT_FAILED);
    *statusp = agent->abort_status;
    *final_state = ELASTIC_AGENT_FAILED;
}

static int
run_machine (elastic_agent_t *agent, int *statusp, int *final_state, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int rc;

    if ((rc = initialize_workers (agent, err)) != ELASTIC_OK)
        return rc;
    for (;;) {
        double cap = spec->monitor_interval;
        double timeout;
        int state;

        if (agent->health && cap > spec->health_timeout / 2)
            cap = spec->health_timeout / 2;
        timeout = watchdog_next (agent, cap);

        if (run_loop_once (agent, timeout) < 0) {
            errset (err, "event loop: %s", strerror (errno));
            stop_workers (agent, SIGKILL, 0);
            *final_state = ELASTIC_AGENT_UNKNOWN;
            *statusp = 1;
            return ELASTIC_OK;
        }
        if (agent->abort_requested) {
            end_aborted (agent, statusp, final_state);
            return ELASTIC_OK;
        }
        if (agent->pending_signal) {
            int sig = agent->pending_signal;
            eventlog_emit (
                agent->ev, "signal", json_pack ("{s:s}", "signal", signal_name (sig)));
            if (sigismember (&spec->preempt, sig) == 1) {
                *statusp = suspend_workers (agent, sig);
            } else {
                log_warn ("%s received: stopping the workers", signal_name (sig));
                stop_workers (agent, sig, spec->shutdown_timeout);
                group_set_state (agent, ELASTIC_AGENT_STOPPED);
                *statusp = 128 + sig;
            }
            *final_state = ELASTIC_AGENT_STOPPED;
            return ELASTIC_OK;
        }
        watchdog_check (agent);
        if (agent->backend->monitor_workers (agent, agent->backend_ctx) != ELASTIC_OK) {
            log_err ("the backend lost track of the workers; stopping them");
            group_set_state (agent, ELASTIC_AGENT_UNKNOWN);
            stop_workers (agent, SIGKILL, 0);
            *final_state = ELASTIC_AGENT_UNKNOWN;
            *statusp = 1;
            return ELASTIC_OK;
        }
        if (any_suspended (agent)) {
            *statusp = suspend_workers (agent, first_preempt_signal (spec));
            *final_state = ELASTIC_AGENT_STOPPED;
            return ELASTIC_OK;
        }
        if (agent->abort_requested) {
            end_aborted (agent, statusp, final_state);
            return ELASTIC_OK;
        }
        state = group_derive_state (agent);
        switch (state) {
            case ELASTIC_AGENT_SUCCEEDED: {
                double t0 = mono_now ();
                group_set_state (agent, ELASTIC_AGENT_SUCCEEDED);
                group_summary (agent);
                if (agent->rdzv->exit_barrier &&
                    agent->rdzv->exit_barrier (
                        agent, agent->rdzv_ctx, spec->exit_barrier_timeout) != ELASTIC_OK)
                    log_warn (
                        "exit barrier: the other agents did not finish within %.0f s",
                        spec->exit_barrier_timeout);
                eventlog_emit (
                    agent->ev,
                    "exit_barrier",
                    json_pack ("{s:f}", "duration_ms", (mono_now () - t0) * 1e3));
                *statusp = 0;
                *final_state = ELASTIC_AGENT_SUCCEEDED;
                return ELASTIC_OK;
            }
            case ELASTIC_AGENT_FAILED:
            case ELASTIC_AGENT_UNHEALTHY:
                group_set_state (agent, state);
                if (agent->remaining_restarts > 0) {
                    if ((rc = restart_workers (agent, err)) != ELASTIC_OK) {
                        log_err ("restart failed: %s", err ? err->text : "");
                        stop_workers (agent, SIGKILL, 0);
                        group_set_state (agent, ELASTIC_AGENT_FAILED);
                        *statusp = 1;
                        *final_state = ELASTIC_AGENT_FAILED;
                        return ELASTIC_OK;
                    }
                    continue;
                }
                if (group_alive (agent) > 0) {
                    agent->stop_after_failure = 1;
                    stop_workers (agent, spec->stop_signal, spec->shutdown_timeout);
                    agent->stop_after_failure = 0;
                }
                *statusp = failure_status (agent);
                group_set_state (agent, ELASTIC_AGENT_FAILED);
                *final_state = ELASTIC_AGENT_FAILED;
                return ELASTIC_OK;
            default:
                if (agent->rdzv->num_nodes_waiting &&
                    agent->rdzv->num_nodes_waiting (agent, agent->rdzv_ctx) > 0) {
                    /* membership change: restart without spending a restart */
                    log_info ("new agents are waiting: restarting the worker group");
                    stop_workers (agent, spec->stop_signal, spec->shutdown_timeout);
                    group_set_state (agent, ELASTIC_AGENT_STOPPED);
                    if ((rc = initialize_workers (agent, err)) != ELASTIC_OK)
                        return rc;
                }
                break;
        }
    }
}

int elastic_agent_run (elastic_agent_t *agent,
                       elastic_agent_result_t **result,
                       elastic_error_t *err)
{
    const struct elastic_agent_spec *spec;
    int rc, status = 1, final_state = ELASTIC_AGENT_UNKNOWN;
    char msg[256];

    if (result)
        *result = NULL;
    if (!agent) {
        errset (err, "elastic_agent_run: NULL agent");
        return ELASTIC_ERR_INVAL;
    }
    if (agent->running || agent->ran) {
        errset (err, "elastic_agent_run: an agent runs once (create another)");
        return ELASTIC_ERR_STATE;
    }
    spec = agent->spec;
    agent->running = 1;
    agent->ran = 1;
    agent->start_wall = wall_now ();
    agent->start_mono = mono_now ();
    agent->remaining_restarts = spec->max_restarts;
    agent->health_reported = 1;
    __atomic_store_n (&agent->tick_ns, mono_ns (), __ATOMIC_RELEASE);
    if (spec->run_id)
        snprintf (agent->run_id, sizeof (agent->run_id), "%s", spec->run_id);
    else
        make_run_id (agent->run_id, sizeof (agent->run_id));

    if (spec->event_log &&
        !(agent->ev = eventlog_open (spec->event_log, agent->run_id, spec->role))) {
        errset (err, "event-log: cannot open %s: %s", spec->event_log, strerror (errno));
        rc = ELASTIC_ERR_INVAL;
        goto out;
    }
    if (signals_setup (agent, err) < 0) {
        rc = ELASTIC_ERR_IO;
        goto out;
    }
    if (spec->health_port >= 0) {
        if (!(agent->health = health_start (
                  agent, spec->health_addr, spec->health_port, msg, sizeof (msg)))) {
            errset (err, "%s", msg);
            rc = ELASTIC_ERR_INVAL;
            goto out;
        }
        agent->health_port = health_port (agent->health);
    }
    {
        char handled[256], preempt[256];
        json_t *argv = json_array ();
        signal_list_format (&spec->handled, handled, sizeof (handled));
        signal_list_format (&spec->preempt, preempt, sizeof (preempt));
        for (int i = 0; argv && spec->argv && i < spec->argc; i++)
            json_array_append_new (argv, json_string (spec->argv[i]));
        eventlog_emit (
            agent->ev,
            "agent_start",
            json_pack ("{s:o s:i s:i s:f s:f s:s s:s s:i s:s s:b s:f s:s s:s s:s}",
                       "entrypoint",
                       argv ? argv : json_null (),
                       "nproc",
                       spec->nproc,
                       "max_restarts",
                       spec->max_restarts,
                       "monitor_interval_s",
                       spec->monitor_interval,
                       "shutdown_timeout_s",
                       spec->shutdown_timeout,
                       "signals_to_handle",
                       handled,
                       "preempt_signals",
                       preempt,
                       "health_port",
                       agent->health_port,
                       "rendezvous",
                       agent->rdzv->name ? agent->rdzv->name : "custom",
                       "file_timer",
                       spec->file_timer,
                       "hang_timeout_s",
                       spec->hang_timeout,
                       "backend",
                       agent->backend->name ? agent->backend->name : "custom",
                       "wireup",
                       spec_wireup_name (spec_wireup (spec)),
                       "restart_policy",
                       spec_restart_policy_name (spec_restart_policy (spec))));
    }
    if (agent->health_port >= 0)
        log_info ("health server on %s:%d", spec->health_addr, agent->health_port);

    rc = run_machine (agent, &status, &final_state, err);
    if (rc != ELASTIC_OK && agent->started) {
        /* the workers ran: the failure belongs in the result */
        log_err ("%s", err ? err->text : "agent error");
        if (group_alive (agent) > 0)
            stop_workers (agent, SIGKILL, 0);
        final_state = ELASTIC_AGENT_FAILED;
        status = failure_status (agent);
        rc = ELASTIC_OK;
    }
    if (agent->started && result)
        *result = result_build (agent, final_state, status);
out:
    if (agent->backend->shutdown)
        agent->backend->shutdown (agent, agent->backend_ctx, SIGKILL, 0);
    eventlog_emit (agent->ev,
                   "shutdown",
                   json_pack ("{s:s s:i s:i s:f}",
                              "state",
                              elastic_agent_state_name (final_state),
                              "exit_status",
                              rc == ELASTIC_OK ? status : -1,
                              "restarts",
                              agent->restart_count,
                              "duration_s",
                              mono_now () - agent->start_mono));
    health_stop (agent->health);
    agent->health = NULL;
    watchdog_teardown (agent);
    signals_restore (agent);
    if (agent->base_is_tmp && agent->base_dir[0]) {
        pthread_mutex_lock (&agent->lock);
        group_release (agent);
        pthread_mutex_unlock (&agent->lock);
        remove_tree (agent->base_dir);
        agent->base_dir[0] = '\0';
        agent->base_is_tmp = 0;
    }
    eventlog_close (agent->ev);
    agent->ev = NULL;
    agent->running = 0;
    return rc;
}

/* ---- views ----------------------------------------------------------------- */

int elastic_agent_group_info (elastic_agent_t *agent,
                              struct elastic_agent_group_info *info)
{
    if (!agent || !info)
        return ELASTIC_ERR_INVAL;
    pthread_mutex_lock (&agent->lock);
    info->state = agent->state;
    info->group_rank = agent->rinfo.group_rank;
    info->group_world_size =
        agent->rinfo.group_world_size ? agent->rinfo.group_world_size : 1;
    info->nworkers = agent->nworkers;
    info->world_size = agent->nworkers > 0 ? agent->w[0].world_size : 0;
    info->restart_count = agent->restart_count;
    info->max_restarts = agent->spec->max_restarts;
    info->master_port = agent->master_port;
    info->start_time = agent->start_wall;
    pthread_mutex_unlock (&agent->lock);
    return ELASTIC_OK;
}

int elastic_agent_worker_info (elastic_agent_t *agent,
                               int index,
                               struct elastic_agent_worker_info *info)
{
    struct worker *w;

    if (!agent || !info)
        return ELASTIC_ERR_INVAL;
    if (index < 0 || index >= agent->nworkers)
        return ELASTIC_ERR_NOT_FOUND;
    pthread_mutex_lock (&agent->lock);
    w = &agent->w[index];
    info->index = index;
    info->local_rank = w->local_rank;
    info->rank = w->rank;
    info->role_rank = w->role_rank;
    info->world_size = w->world_size;
    info->role_world_size = w->role_world_size;
    info->pid = w->pid;
    info->state = w->state;
    info->exitcode = w->exited ? w->exitcode : 0;
    info->step = -1;
    info->snapshot_step = -1;
    info->progress_age = -1;
    if (w->hb &&
        __atomic_load_n (&w->hb->magic, __ATOMIC_ACQUIRE) == ELASTIC_HEARTBEAT_MAGIC) {
        uint64_t upd = __atomic_load_n (&w->hb->updated_ns, __ATOMIC_ACQUIRE);
        if (__atomic_load_n (&w->hb->count, __ATOMIC_RELAXED) > 0)
            info->step = __atomic_load_n (&w->hb->step, __ATOMIC_RELAXED);
        info->snapshot_step =
            __atomic_load_n (&w->hb->last_snapshot_step, __ATOMIC_RELAXED);
        if (upd)
            info->progress_age = (double)(mono_ns () - upd) * 1e-9;
    }
    pthread_mutex_unlock (&agent->lock);
    return ELASTIC_OK;
}

/* ---- for backends ----------------------------------------------------------- */

int elastic_agent_worker_count (elastic_agent_t *agent)
{
    return agent ? agent->nworkers : 0;
}

char *const *elastic_agent_worker_argv (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].argv;
}

char *const *elastic_agent_worker_env (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].env;
}

const char *elastic_agent_worker_dir (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].dir;
}

int elastic_agent_worker_started (elastic_agent_t *agent, int index, pid_t pid)
{
    struct worker *w;

    if (!agent || index < 0 || index >= agent->nworkers)
        return ELASTIC_ERR_NOT_FOUND;
    w = &agent->w[index];
    pthread_mutex_lock (&agent->lock);
    w->pid = pid;
    w->state = ELASTIC_AGENT_HEALTHY;
    w->start_wall = wall_now ();
    w->start_mono = mono_now ();
    w->hang_grace_ns = 0;
    w->fire_mono = 0;
    pthread_mutex_unlock (&agent->lock);
    json_t *o = worker_brief (w);
    json_object_set_new (o, "attempt", json_integer (agent->restart_count));
    eventlog_emit (agent->ev, "worker_start", o);
    return ELASTIC_OK;
}

/* Describe an exit the way torchelastic does. */
static char *describe_exit (const struct worker *w)
{
    char *s = NULL;

    if (w->signum > 0) {
        if (asprintf (&s,
                      "Signal %d (%s) received by PID %d",
                      w->signum,
                      signal_name (w->signum),
                      (int)w->pid) < 0)
            s = NULL;
    } else if (asprintf (&s, "exited with code %d (no error file)", w->exitcode) < 0)
        s = NULL;
    return s;
}

/* How a backend counts an exit (elastic_agent_worker_exited/_failed/_lost). */
enum { END_EXIT = 0, END_FAILED, END_LOST };

/* "message; note", or message alone (malloc'ed; NULL on out of memory). */
static char *with_note (char *message, const char *note)
{
    char *m = NULL;

    if (!note || !*note)
        return message;
    if (asprintf (&m, "%s; %s", message ? message : "", note) < 0)
        return message;
    free (message);
    return m;
}

static int worker_end (elastic_agent_t *agent,
                       int index,
                       int exitcode,
                       int signum,
                       int how,
                       const char *note)
{
    struct worker *w;
    struct error_record rec;
    int failed, ended, survivors = 0;

    if (!agent || index < 0 || index >= agent->nworkers)
        return ELASTIC_ERR_NOT_FOUND;
    w = &agent->w[index];
    if (w->exited)
        return ELASTIC_OK;
    memset (&rec, 0, sizeof (rec));
    /* after the application's word that its work is done, a signal (in
     * MPI_Finalize, say) or an exit without MPI_Finalize ends a finished
     * rank; an exit code of its own still counts */
    ended = !w->aborted && worker_reported_end (w) && (signum > 0 || exitcode == 0);
    failed = !ended && (how != END_EXIT || ((signum > 0 || exitcode != 0) &&
                                            exitcode != ELASTIC_EXIT_SUSPENDED));
    /* read the worker's error file outside the lock */
    if (failed && errorfile_read (w->error_file, &rec) < 0) {
        if (errno != ENOENT)
            log_warn ("rank %d: %s: %s",
                      w->rank,
                      w->error_file,
                      rec.message ? rec.message : strerror (errno));
        errorfile_clear (&rec);
    }

    pthread_mutex_lock (&agent->lock);
    w->exited = 1;
    w->signum = signum;
    w->exitcode = signum > 0 ? -signum : exitcode;
    w->exit_mono = mono_now ();
    if (w->aborted) {
        /* the agent killed it after its MPI_Abort: the abort is the story */
        w->signum = signum = 0;
        w->exitcode = w->abort_code;
        w->state = ELASTIC_AGENT_FAILED;
    } else if (how == END_EXIT && signum == 0 &&
               (exitcode == ELASTIC_EXIT_SUSPENDED ||
                (exitcode == 0 && !agent->spec->wrapper &&
                 worker_reported (w, ELASTIC_HEARTBEAT_SUSPENDED)))) {
        /* libelastic gives the job's 75 to working rank 0 alone (a
         * launcher must see one code); the others' suspension is in their
         * heartbeats, which this agent of all the job's ranks reads (a
         * wrapper keeps its rank's own exit code) */
        w->suspended = 1;
        w->state = ELASTIC_AGENT_STOPPED;
    } else if (ended) {
        w->state = ELASTIC_AGENT_SUCCEEDED;
        w->after_end = signum > 0 || how != END_EXIT;
        if (w->failed) {
            /* a watchdog killed it after its end (a hang in MPI_Finalize):
             * not a failure of the work */
            w->failed = 0;
            agent->failures_total--;
        }
    } else if (!failed)
        w->state = ELASTIC_AGENT_SUCCEEDED;
    else if (w->failed) {
        /* killed by a watchdog, or it aborted the job: keep its reason, add
         * how it ended */
        char *exitdesc = describe_exit (w), *m = NULL;
        if (asprintf (&m,
                      "%s; %s",
                      w->reason ? w->reason : "watchdog",
                      exitdesc ? exitdesc : "") >= 0) {
            free (w->message);
            w->message = m;
        }
        free (exitdesc);
        if (rec.message) {
            free (w->traceback);
            w->traceback = rec.traceback ? rec.traceback : rec.message;
            if (rec.traceback)
                free (rec.message);
            rec.message = rec.traceback = NULL;
        }
        w->state = ELASTIC_AGENT_FAILED;
        /* the survivors recover without it (a hung rank, in place) */
        if (how == END_LOST) {
            w->lost = 1;
            agent->lost_total++;
        }
    } else if (agent->stopping) {
        w->state = ELASTIC_AGENT_STOPPED;
    } else {
        w->failed = 1;
        w->lost = how == END_LOST;
        w->fail_seq = ++agent->fail_seq;
        w->state = ELASTIC_AGENT_FAILED;
        if (rec.message) {
            w->message = rec.message;
            w->traceback = rec.traceback;
            rec.message = rec.traceback = NULL;
            w->fail_time = rec.timestamp > 0 ? rec.timestamp : wall_now ();
        } else {
            w->message = describe_exit (w);
            w->fail_time = wall_now ();
        }
        w->message = with_note (w->message, note);
        agent->failures_total++;
        if (w->lost)
            agent->lost_total++;
        agent->last_fail_rank = w->rank;
        agent->last_fail_local_rank = w->local_rank;
        agent->last_fail_exitcode = w->exitcode;
        agent->last_fail_signal = signum;
        agent->last_fail_time = w->fail_time;
        snprintf (agent->last_fail_message,
                  sizeof (agent->last_fail_message),
                  "%s",
                  w->message ? w->message : "");
    }
    pthread_mutex_unlock (&agent->lock);
    errorfile_clear (&rec);
    if (agent->ft)
        filetimer_clear_pid (agent->ft, w->pid);

    json_t *o = worker_brief (w);
    json_object_set_new (o, "attempt", json_integer (agent->restart_count));
    json_object_set_new (o, "exitcode", json_integer (w->exitcode));
    if (signum > 0)
        json_object_set_new (o, "signal", json_string (signal_name (signum)));
    json_object_set_new (o, "state", json_string (elastic_agent_state_name (w->state)));
    json_object_set_new (o, "lifetime_s", json_real (w->exit_mono - w->start_mono));
    if (w->failed && w->message)
        json_object_set_new (o, "message", json_string (w->message));
    if (w->lost)
        json_object_set_new (o, "in_place", json_true ());
    if (w->after_end)
        json_object_set_new (o, "after_end", json_true ());
    eventlog_emit (agent->ev, "worker_exit", o);
    if (w->lost) {
        survivors = group_alive (agent);
        o = worker_brief (w);
        json_object_set_new (o, "attempt", json_integer (agent->restart_count));
        json_object_set_new (o, "exitcode", json_integer (w->exitcode));
        if (signum > 0)
            json_object_set_new (o, "signal", json_string (signal_name (signum)));
        json_object_set_new (o, "survivors", json_integer (survivors));
        json_object_set_new (o, "lost_total", json_integer (agent->lost_total));
        if (w->message)
            json_object_set_new (o, "message", json_string (w->message));
        eventlog_emit (agent->ev, "rank_lost", o);
        log_warn ("rank %d (local rank %d, pid %d) lost: %s; %d worker%s left",
                  w->rank,
                  w->local_rank,
                  (int)w->pid,
                  w->message ? w->message : "",
                  survivors,
                  survivors == 1 ? "" : "s");
    } else if (w->after_end)
        log_warn ("rank %d (local rank %d, pid %d) ended by %s after it had finished "
                  "its work (elastic_progress_end): counted as finished",
                  w->rank,
                  w->local_rank,
                  (int)w->pid,
                  signum > 0 ? signal_name (signum) : "an exit without MPI_Finalize");
    else if (w->failed)
        log_warn ("rank %d (local rank %d, pid %d) failed: %s",
                  w->rank,
                  w->local_rank,
                  (int)w->pid,
                  w->message ? w->message : "");
    else
        log_debug ("rank %d (pid %d) exited with %d", w->rank, (int)w->pid, w->exitcode);
    return ELASTIC_OK;
}

int elastic_agent_worker_exited (elastic_agent_t *agent,
                                 int index,
                                 int exitcode,
                                 int signum)
{
    return worker_end (agent, index, exitcode, signum, END_EXIT, NULL);
}

int elastic_agent_worker_lost (
    elastic_agent_t *agent, int index, int exitcode, int signum, const char *note)
{
    return worker_end (agent, index, exitcode, signum, END_LOST, note);
}

int elastic_agent_worker_failed (
    elastic_agent_t *agent, int index, int exitcode, int signum, const char *note)
{
    return worker_end (agent, index, exitcode, signum, END_FAILED, note);
}

int elastic_agent_abort (elastic_agent_t *agent, int index, int code, const char *message)
{
    struct worker *w;
    char reason[512];
    json_t *o;

    if (!agent || index < 0 || index >= agent->nworkers)
        return ELASTIC_ERR_NOT_FOUND;
    /* the first counts; the group may also be stopping already (a restart) */
    if (agent->abort_requested || agent->stopping)
        return ELASTIC_OK;
    w = &agent->w[index];
    if (message && *message)
        snprintf (reason, sizeof (reason), "MPI_Abort with code %d: %s", code, message);
    else
        snprintf (reason, sizeof (reason), "MPI_Abort with code %d (no message)", code);
    pthread_mutex_lock (&agent->lock);
    agent->abort_requested = 1;
    agent->abort_status = code & 0xff ? code & 0xff : 1;
    /* the other workers are killed on purpose from now on */
    agent->stopping = 1;
    if (!w->failed && !w->exited) {
        w->failed = 1;
        w->aborted = 1;
        w->abort_code = code;
        w->fail_seq = ++agent->fail_seq;
        w->fail_time = wall_now ();
        free (w->reason);
        w->reason = strdup (reason);
        free (w->message);
        w->message = strdup (reason);
        agent->failures_total++;
        agent->last_fail_rank = w->rank;
        agent->last_fail_local_rank = w->local_rank;
        agent->last_fail_exitcode = code;
        agent->last_fail_signal = 0;
        agent->last_fail_time = w->fail_time;
        errfmt (
            agent->last_fail_message, sizeof (agent->last_fail_message), "%s", reason);
    }
    pthread_mutex_unlock (&agent->lock);
    o = worker_brief (w);
    json_object_set_new (o, "attempt", json_integer (agent->restart_count));
    json_object_set_new (o, "code", json_integer (code));
    json_object_set_new (o, "message", json_string (message ? message : ""));
    eventlog_emit (agent->ev, "job_abort", o);
    log_err ("rank %d (pid %d) called %s: stopping every worker",
             w->rank,
             (int)w->pid,
             reason);
    return ELASTIC_OK;
}

int elastic_agent_worker_set_return (elastic_agent_t *agent,
                                     int index,
                                     const void *buf,
                                     size_t len)
{
    struct worker *w;
    void *copy;

    if (!agent || index < 0 || index >= agent->nworkers)
        return ELASTIC_ERR_NOT_FOUND;
    w = &agent->w[index];
    if (!(copy = malloc (len ? len : 1)))
        return ELASTIC_ERR_NOMEM;
    if (len)
        memcpy (copy, buf, len);
    free (w->ret);
    w->ret = copy;
    w->retlen = len;
    w->has_ret = 1;
    return ELASTIC_OK;
}

struct worker *agent_worker_by_pid (elastic_agent_t *agent, pid_t pid)
{
    pid_t pgid;

    for (int i = 0; i < agent->nworkers; i++)
        if (agent->w[i].pid == pid && !agent->w[i].exited)
            return &agent->w[i];
    if ((pgid = getpgid (pid)) < 0)
        return NULL;
    for (int i = 0; i < agent->nworkers; i++)
        if (agent->w[i].pid == pgid && !agent->w[i].exited)
            return &agent->w[i];
    return NULL;
}

void agent_watchdog_fire (elastic_agent_t *agent,
                          struct worker *w,
                          pid_t target,
                          int signum,
                          const char *kind,
                          const char *reason,
                          json_t *fields)
{
    json_t *o = worker_brief (w);

    if (kill (target, signum) < 0 && errno != ESRCH)
        log_warn ("watchdog: kill %d %s: %s",
                  (int)target,
                  signal_name (signum),
                  strerror (errno));
    pthread_mutex_lock (&agent->lock);
    if (!w->failed) {
        w->failed = 1;
        w->fire_mono = mono_now ();
        w->fail_seq = ++agent->fail_seq;
        w->fail_time = wall_now ();
        free (w->reason);
        w->reason = strdup (reason);
        free (w->message);
        w->message = strdup (reason);
        agent->failures_total++;
        agent->last_fail_rank = w->rank;
        agent->last_fail_local_rank = w->local_rank;
        agent->last_fail_exitcode = -signum;
        agent->last_fail_signal = signum;
        agent->last_fail_time = w->fail_time;
        snprintf (
            agent->last_fail_message, sizeof (agent->last_fail_message), "%s", reason);
    }
    w->state = ELASTIC_AGENT_UNHEALTHY;
    agent->watchdog_fires++;
    pthread_mutex_unlock (&agent->lock);
    json_object_set_new (o, "kind", json_string (kind));
    json_object_set_new (o, "target_pid", json_integer (target));
    json_object_set_new (o, "signal", json_string (signal_name (signum)));
    json_object_set_new (o, "reason", json_string (reason));
    json_object_set_new (o, "attempt", json_integer (agent->restart_count));
    if (fields) {
        json_object_update (o, fields);
        json_decref (fields);
    }
    eventlog_emit (agent->ev, "watchdog_fire", o);
    log_warn ("rank %d: %s", w->rank, reason);
}
