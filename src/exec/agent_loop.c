/* agent_loop.c - the agent core's events: signals, the loop, watches
 *
 * One loop (loop.c) carries everything: the signalfd, the backend's
 * descriptors (pidfds, output pipes), the file-timer FIFO and a wake-up
 * eventfd.  Callbacks record facts (a worker exited, a signal arrived); the
 * state machine (machine.c) acts on them, so a crash is acted on as soon
 * as it is seen, and --monitor-interval only bounds how often the
 * watchdogs run.  Each turn of the loop is a tick that the health server
 * (health.c) reads to tell whether the agent is making progress.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
#include "util.h"

/* A backend's watcher, called through the loop. */
struct watch {
    elastic_agent_t *agent;
    elastic_agent_watch_fn cb;
    void *arg;
    int fd;
    struct watch *next;
};

/* ---- signals --------------------------------------------------------------- */

static void on_signal (struct loop *loop, int fd, int revents, void *arg);
static void on_wake (struct loop *loop, int fd, int revents, void *arg);

int agent_signals_setup (elastic_agent_t *agent, elastic_error_t *err)
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
    return errprintf (err, "signal setup: %s", strerror (errno));
}

void agent_signals_restore (elastic_agent_t *agent)
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

int agent_loop_once (elastic_agent_t *agent, double timeout)
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
        if (agent_loop_once (agent, t) < 0) {
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

void agent_watches_free (elastic_agent_t *agent)
{
    while (agent->watches) {
        struct watch *next = agent->watches->next;
        free (agent->watches);
        agent->watches = next;
    }
}
