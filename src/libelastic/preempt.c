/* preempt.c - preemption notices and the deadline, agreed in maybe_snapshot */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>

#include "common/error.h"
#include "config_int.h"
#include "log.h"
#include "preempt.h"

#define MAX_SIGNALS 16

/* The last signal caught (0: none).  Written only by the handler and by
 * preempt_clear. */
static volatile sig_atomic_t caught;

static void on_signal (int sig)
{
    caught = sig;
}

/* Auto period: the agreement may cost this fraction of the step time... */
#define AUTO_BUDGET 0.01
/* ... and a notice waits at most about this long (seconds) for it. */
#define AUTO_LATENCY 0.5

struct preempt {
    int nsig;
    int sig[MAX_SIGNALS];
    int installed[MAX_SIGNALS];
    struct sigaction old[MAX_SIGNALS];
    int period;       /* fixed period, 0: auto */
    int64_t next;     /* auto: the next step that agrees (-1: the next call) */
    int64_t k;        /* auto: the current period */
    int64_t deadline; /* epoch seconds, 0: none */
    double margin;
    double l3_max;    /* longest L3 write, s */
    double step_max;  /* longest step, s */
    double step_mean; /* the slowest rank's mean step at the last agreement, s */
    double snap_time; /* this rank's last committed snapshot, s (0: none) */
    double snap_cost; /* the most any rank's took, at the last agreement, s */
    /* step timing since the last agreement (this rank) */
    double t_enter; /* entry of the last maybe_snapshot (0: none) */
    uint64_t gen_enter;
    double steps_time;
    int64_t steps;
    double t_agree; /* duration of the last agreement (this rank) */
    int offer;      /* a launcher may report room to grow: agree even
                       without handlers or a deadline */
    char why[32];
};

static double now_mono (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_epoch (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The deadline: the configured one, else Slurm's job end time. */
static int64_t resolve_deadline (const elastic_config_t *cfg)
{
    const char *s = getenv ("SLURM_JOB_END_TIME");
    int64_t d = cfg->deadline;
    const char *from = "deadline (ELASTIC_DEADLINE)";
    char *end;

    if (d == 0 && s && *s) {
        long long v;
        errno = 0;
        v = strtoll (s, &end, 10);
        if (*end != '\0' || errno != 0 || v <= 0) {
            el_log (EL_WARN,
                    "SLURM_JOB_END_TIME: '%s' is not a time in seconds since the epoch; "
                    "no deadline",
                    s);
            return 0;
        }
        d = v;
        from = "SLURM_JOB_END_TIME";
    }
    if (d > 0 && (double)d <= now_epoch ()) {
        el_log (EL_WARN,
                "%s %lld has passed already (%.0f s ago); no deadline",
                from,
                (long long)d,
                now_epoch () - (double)d);
        return 0;
    }
    if (d > 0)
        el_log (EL_DEBUG, "deadline from %s: in %.0f s", from, (double)d - now_epoch ());
    return d;
}

int preempt_create (const elastic_config_t *cfg,
                    struct preempt **out,
                    elastic_error_t *err)
{
    struct preempt *p;

    *out = NULL;
    if (!(p = calloc (1, sizeof (*p)))) {
        return errcodef (err, ELASTIC_ERR_NOMEM, "preemption: out of memory");
    }
    if (config_signals_parse (
            "signals", cfg->signals, p->sig, MAX_SIGNALS, &p->nsig, err) != ELASTIC_OK) {
        free (p);
        return ELASTIC_ERR_INVAL;
    }
    p->period = cfg->signal_check_period;
    p->next = -1;
    p->margin = cfg->deadline_margin;
    p->deadline = resolve_deadline (cfg);
    caught = 0; /* a notice from before this manager is not for it */
    for (int i = 0; i < p->nsig; i++) {
        struct sigaction sa, cur;
        if (sigaction (p->sig[i], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN &&
            !(cur.sa_flags & SA_SIGINFO)) {
            el_log (EL_DEBUG,
                    "SIG%s is ignored in this process: left ignored",
                    config_signal_name (p->sig[i]));
            continue;
        }
        memset (&sa, 0, sizeof (sa));
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset (&sa.sa_mask);
        if (sigaction (p->sig[i], &sa, &p->old[i]) == 0)
            p->installed[i] = 1;
    }
    *out = p;
    return ELASTIC_OK;
}

void preempt_destroy (struct preempt *p)
{
    int saved = errno;

    if (p) {
        for (int i = 0; i < p->nsig; i++)
            if (p->installed[i])
                sigaction (p->sig[i], &p->old[i], NULL);
        free (p);
    }
    errno = saved;
}

void preempt_enter (struct preempt *p, uint64_t generation)
{
    double now = now_mono ();

    if (!p)
        return;
    if (p->t_enter > 0 && generation == p->gen_enter) {
        double dt = now - p->t_enter;
        p->steps_time += dt;
        p->steps++;
        if (dt > p->step_max)
            p->step_max = dt;
    }
    p->t_enter = now;
    p->gen_enter = generation;
}

void preempt_skip_step (struct preempt *p)
{
    if (p)
        p->t_enter = 0; /* an L3 write or a world change is not a step */
}

void preempt_world_changed (struct preempt *p)
{
    if (p) {
        p->next = -1;
        p->t_enter = 0;
    }
}

void preempt_l3_time (struct preempt *p, double seconds)
{
    if (p && seconds > p->l3_max)
        p->l3_max = seconds;
}

void preempt_snapshot_time (struct preempt *p, double seconds)
{
    if (p)
        p->snap_time = seconds;
}

double preempt_step_mean (const struct preempt *p)
{
    return p ? p->step_mean : 0;
}

double preempt_snapshot_cost (const struct preempt *p)
{
    return p ? p->snap_cost : 0;
}

int preempt_due (const struct preempt *p, int64_t step)
{
    int any = 0;

    if (!p)
        return 0;
    for (int i = 0; i < p->nsig; i++)
        any |= p->installed[i];
    if (!any && p->deadline == 0 && !p->offer)
        return 0;
    if (p->period > 0)
        return step % p->period == 0;
    return p->next < 0 || step >= p->next;
}

void preempt_offer (struct preempt *p, int on)
{
    if (p)
        p->offer = on;
}

int preempt_offered (const struct preempt *p)
{
    return p ? p->offer : 0;
}

int preempt_agree (
    struct preempt *p, MPI_Comm comm, int64_t step, int *capacity, const char **why)
{
    /* the room is the least any rank saw: MAX of its negation */
    double mine[6] = {caught,
                      0,
                      p->t_agree,
                      p->steps > 0 ? p->steps_time / p->steps : 0,
                      -(double)*capacity,
                      p->snap_time};
    double all[6], t0 = now_mono (), k;
    int rc;

    *why = NULL;
    if (p->deadline > 0) {
        /* the time to the next agreement (a period of mean steps, one of
         * them as slow as the slowest seen), the L3 write, the margin */
        double per = p->period > 0 ? p->period : (double)(p->k > 0 ? p->k : 1);
        double need = p->margin + 1.5 * p->l3_max + per * p->step_mean + p->step_max;
        if (now_epoch () + need >= (double)p->deadline)
            mine[1] = 1;
    }
    if ((rc = MPI_Allreduce (mine, all, 6, MPI_DOUBLE, MPI_MAX, comm)) != MPI_SUCCESS)
        return rc;
    *capacity = all[4] < 0 ? (int)-all[4] : 0;
    p->snap_cost = all[5];
    p->t_agree = now_mono () - t0;
    p->steps_time = 0;
    p->steps = 0;
    /* the next agreement, from values every rank has: the slowest rank's
     * last agreement and mean step */
    k = 1;
    if (all[3] > 0) {
        k = all[2] / (AUTO_BUDGET * all[3]);
        if (k > AUTO_LATENCY / all[3])
            k = AUTO_LATENCY / all[3];
        if (k < 1)
            k = 1;
    }
    p->k = (int64_t)k;
    p->step_mean = all[3];
    p->next = step + p->k;
    if ((int)all[0] > 0)
        snprintf (p->why, sizeof (p->why), "SIG%s", config_signal_name ((int)all[0]));
    else if (all[1] > 0)
        snprintf (p->why, sizeof (p->why), "deadline");
    else
        return MPI_SUCCESS;
    *why = p->why;
    return MPI_SUCCESS;
}

void preempt_clear (struct preempt *p)
{
    (void)p;
    caught = 0;
}

int64_t preempt_period (const struct preempt *p)
{
    return !p ? 0 : p->period > 0 ? p->period : p->k;
}

int64_t preempt_deadline (const struct preempt *p)
{
    return p ? p->deadline : 0;
}
