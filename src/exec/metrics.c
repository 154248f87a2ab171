/* metrics.c - /metrics: the agent's state in Prometheus text format 0.0.4 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_impl.h"
#if HAVE_PMIX && HAVE_SODIUM
#include "meshjob.h"
#endif
#include "util.h"

struct text {
    char *buf;
    size_t len;
    size_t cap;
};

static void put (struct text *t, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static void put (struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!t->buf)
        return;
    for (;;) {
        va_start (ap, fmt);
        n = vsnprintf (t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end (ap);
        if (n < 0)
            return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        char *p = realloc (t->buf, t->cap * 2 + (size_t)n);
        if (!p) {
            free (t->buf);
            t->buf = NULL;
            return;
        }
        t->buf = p;
        t->cap = t->cap * 2 + (size_t)n;
    }
}

/* A label value with \, " and newline escaped. */
static void escape (const char *s, char *out, size_t size)
{
    size_t n = 0;

    for (; *s && n + 2 < size; s++) {
        if (*s == '\\' || *s == '"') {
            out[n++] = '\\';
            out[n++] = *s;
        } else if (*s == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else if ((unsigned char)*s >= 0x20)
            out[n++] = *s;
    }
    out[n] = '\0';
}

static void help (struct text *t, const char *name, const char *type, const char *text)
{
    put (t, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* What one /metrics answer shows, read once. */
struct view {
    struct elastic_agent_group_info g;
    struct elastic_agent_worker_info *wi;
    int n;
    int counts[ELASTIC_AGENT_FAILED + 1];
    int64_t last_snap;
    char role[256];
    /* the counters and the last failure (read under the lock) */
    int failures, fires, lost, spawned, capacity;
    int lf_rank, lf_local, lf_code, lf_sig;
    double lf_time;
    char msg[600];
    /* the last world change any worker reported (heartbeat version 4) */
    struct change {
        uint32_t n, kind; /* n: world changes that worker took part in */
        int old_size, new_size, new_ranks;
        int64_t step;
        uint64_t us[ELASTIC_HEARTBEAT_NPHASES];
    } change;
};

/* The agent's own series: liveness, uptime, restarts, failure counters. */
static void put_agent (struct text *t, elastic_agent_t *agent, const struct view *v)
{
    double age;
    int up = agent_loop_healthy (agent, &age);

    help (t,
          "elastic_agent_up",
          "gauge",
          "1 while the agent's loop makes progress within its health timeout.");
    put (t, "elastic_agent_up %d\n", up);
    help (t,
          "elastic_agent_loop_age_seconds",
          "gauge",
          "Seconds since the agent's loop last ran.");
    put (t, "elastic_agent_loop_age_seconds %.6f\n", age);
    help (t, "elastic_agent_uptime_seconds", "gauge", "Seconds since the agent started.");
    put (t, "elastic_agent_uptime_seconds %.3f\n", mono_now () - agent->start_mono);
    help (
        t, "elastic_agent_start_time_seconds", "gauge", "Epoch time the agent started.");
    put (t, "elastic_agent_start_time_seconds %.3f\n", agent->start_wall);
    help (t, "elastic_agent_restarts_total", "counter", "Worker group restarts so far.");
    put (t, "elastic_agent_restarts_total %d\n", v->g.restart_count);
    help (t, "elastic_agent_max_restarts", "gauge", "Restarts allowed (--max-restarts).");
    put (t, "elastic_agent_max_restarts %d\n", v->g.max_restarts);
    help (t, "elastic_agent_worker_failures_total", "counter", "Worker failures seen.");
    put (t, "elastic_agent_worker_failures_total %d\n", v->failures);
    help (t,
          "elastic_agent_ranks_lost_total",
          "counter",
          "Failed workers the others went on without (in-place recovery).");
    put (t, "elastic_agent_ranks_lost_total %d\n", v->lost);
    help (t,
          "elastic_agent_ranks_spawned_total",
          "counter",
          "Workers started into the running group for MPI_Comm_spawn (a growth).");
    put (t, "elastic_agent_ranks_spawned_total %d\n", v->spawned);
    help (
        t,
        "elastic_agent_spawn_capacity",
        "gauge",
        "Ranks the agent could start now for MPI_Comm_spawn (the heartbeat's capacity).");
    put (t, "elastic_agent_spawn_capacity %d\n", v->capacity);
    help (t,
          "elastic_agent_watchdog_fires_total",
          "counter",
          "Workers killed by the file timer or the hang timeout.");
    put (t, "elastic_agent_watchdog_fires_total %d\n", v->fires);
}

/* The group's state and its workers by state. */
static void put_group (struct text *t, const struct view *v)
{
    help (t,
          "elastic_agent_group_state",
          "gauge",
          "1 for the worker group's current state, 0 for the others.");
    for (int s = 0; s <= ELASTIC_AGENT_FAILED; s++)
        put (t,
             "elastic_agent_group_state{role=\"%s\",state=\"%s\"} %d\n",
             v->role,
             elastic_agent_state_name (s),
             v->g.state == s);
    help (t, "elastic_agent_workers", "gauge", "Workers of this agent by state.");
    for (int s = 0; s <= ELASTIC_AGENT_FAILED; s++)
        put (t,
             "elastic_agent_workers{role=\"%s\",state=\"%s\"} %d\n",
             v->role,
             elastic_agent_state_name (s),
             v->counts[s]);
}

/* One series per worker: pid, up, progress, snapshot. */
static void put_workers (struct text *t, const struct view *v)
{
    help (t,
          "elastic_agent_worker_pid",
          "gauge",
          "Process id of each worker (0 before start).");
    for (int i = 0; i < v->n; i++)
        put (t,
             "elastic_agent_worker_pid{role=\"%s\",rank=\"%d\",local_rank=\"%d\"} %d\n",
             v->role,
             v->wi[i].rank,
             v->wi[i].local_rank,
             (int)v->wi[i].pid);
    help (t,
          "elastic_agent_worker_up",
          "gauge",
          "1 while the worker is running and healthy.");
    for (int i = 0; i < v->n; i++)
        put (t,
             "elastic_agent_worker_up{role=\"%s\",rank=\"%d\",local_rank=\"%d\"} %d\n",
             v->role,
             v->wi[i].rank,
             v->wi[i].local_rank,
             v->wi[i].state == ELASTIC_AGENT_HEALTHY);
    help (t,
          "elastic_agent_worker_progress_step",
          "gauge",
          "Last step the worker reported through libelastic (-1: none).");
    for (int i = 0; i < v->n; i++)
        put (t,
             "elastic_agent_worker_progress_step{role=\"%s\",rank=\"%d\",local_rank=\"%"
             "d\"} %lld\n",
             v->role,
             v->wi[i].rank,
             v->wi[i].local_rank,
             (long long)v->wi[i].step);
    help (t,
          "elastic_agent_worker_progress_age_seconds",
          "gauge",
          "Seconds since the worker's last progress report (-1: none).");
    for (int i = 0; i < v->n; i++)
        put (t,
             "elastic_agent_worker_progress_age_seconds{role=\"%s\",rank=\"%d\",local_"
             "rank=\"%d\"} %.3f\n",
             v->role,
             v->wi[i].rank,
             v->wi[i].local_rank,
             v->wi[i].progress_age);
    help (t,
          "elastic_agent_worker_snapshot_step",
          "gauge",
          "Last snapshot step the worker reported (-1: none).");
    for (int i = 0; i < v->n; i++)
        put (t,
             "elastic_agent_worker_snapshot_step{role=\"%s\",rank=\"%d\",local_rank=\"%"
             "d\"} %lld\n",
             v->role,
             v->wi[i].rank,
             v->wi[i].local_rank,
             (long long)v->wi[i].snapshot_step);
}

/* The newest snapshot and the last failure. */
static void put_last (struct text *t, const struct view *v)
{
    help (t,
          "elastic_agent_last_snapshot_step",
          "gauge",
          "Newest snapshot step any worker reported (-1: none).");
    put (t, "elastic_agent_last_snapshot_step %lld\n", (long long)v->last_snap);
    help (t,
          "elastic_agent_last_failure_timestamp_seconds",
          "gauge",
          "Epoch time of the last worker failure (0: none).");
    put (t, "elastic_agent_last_failure_timestamp_seconds %.3f\n", v->lf_time);
    help (t,
          "elastic_agent_last_failure_info",
          "gauge",
          "The last worker failure (1 once there was one).");
    if (v->lf_rank >= 0)
        put (t,
             "elastic_agent_last_failure_info{role=\"%s\",rank=\"%d\",local_rank=\"%d\","
             "exitcode=\"%d\","
             "signal=\"%s\",message=\"%s\"} 1\n",
             v->role,
             v->lf_rank,
             v->lf_local,
             v->lf_code,
             v->lf_sig > 0 ? signal_name (v->lf_sig) : "",
             v->msg);
}

/* The last world change: the one of the worker that took part in the most
 * (a worker that joined later saw fewer), read consistently (heartbeat.h,
 * version 4).  Under agent->lock. */
static void change_read (elastic_agent_t *agent, struct view *v)
{
    for (int i = 0; i < agent->nworkers; i++) {
        const struct elastic_heartbeat *h = agent->w[i].hb;

        if (!h ||
            __atomic_load_n (&h->magic, __ATOMIC_ACQUIRE) != ELASTIC_HEARTBEAT_MAGIC ||
            __atomic_load_n (&h->version, __ATOMIC_RELAXED) < 4)
            continue;
        for (int tries = 0; tries < 8; tries++) {
            struct change c = {.n = __atomic_load_n (&h->changes, __ATOMIC_ACQUIRE)};

            if (c.n == 0 || c.n <= v->change.n)
                break;
            c.kind = __atomic_load_n (&h->change_kind, __ATOMIC_RELAXED);
            c.old_size = __atomic_load_n (&h->change_old_size, __ATOMIC_RELAXED);
            c.new_size = __atomic_load_n (&h->change_new_size, __ATOMIC_RELAXED);
            c.new_ranks = __atomic_load_n (&h->change_new_ranks, __ATOMIC_RELAXED);
            c.step = __atomic_load_n (&h->change_step, __ATOMIC_RELAXED);
            for (int p = 0; p < ELASTIC_HEARTBEAT_NPHASES; p++)
                c.us[p] = __atomic_load_n (&h->change_us[p], __ATOMIC_RELAXED);
            __atomic_thread_fence (__ATOMIC_ACQUIRE);
            if (__atomic_load_n (&h->changes, __ATOMIC_RELAXED) != c.n)
                continue; /* written meanwhile: read it again */
            v->change = c;
            break;
        }
    }
}

/* The last world change libelastic reported: its kind, sizes and phases. */
static void put_change (struct text *t, const struct view *v)
{
    static const char *kinds[] = {"", "reshard_down", "reshard_up", "grow_failed"};
    static const char *phases[ELASTIC_HEARTBEAT_NPHASES] = {"detect",
                                                            "shrink",
                                                            "snapshot",
                                                            "rewind",
                                                            "spawn",
                                                            "merge",
                                                            "restore",
                                                            "handler",
                                                            "protect",
                                                            "total"};
    const char *kind = v->change.kind < 4 ? kinds[v->change.kind] : "";

    help (t,
          "elastic_agent_world_changes",
          "gauge",
          "World changes (libelastic's reshard_down, reshard_up, grow_failed) the "
          "worker that took part in the most reported.");
    put (t, "elastic_agent_world_changes %u\n", v->change.n);
    if (v->change.n == 0)
        return;
    help (t,
          "elastic_agent_last_world_change_size",
          "gauge",
          "The last world change: working ranks before and after, new processes "
          "taken in, the step it rolled back to.");
    put (t,
         "elastic_agent_last_world_change_size{kind=\"%s\",size=\"old\"} %d\n"
         "elastic_agent_last_world_change_size{kind=\"%s\",size=\"new\"} %d\n"
         "elastic_agent_last_world_change_size{kind=\"%s\",size=\"new_ranks\"} %d\n"
         "elastic_agent_last_world_change_size{kind=\"%s\",size=\"step\"} %lld\n",
         kind,
         v->change.old_size,
         kind,
         v->change.new_size,
         kind,
         v->change.new_ranks,
         kind,
         (long long)v->change.step);
    help (t,
          "elastic_agent_last_world_change_seconds",
          "gauge",
          "The last world change's phases (libelastic's event; rewind: the steps "
          "redone instead of a snapshot, estimated).");
    for (int p = 0; p < ELASTIC_HEARTBEAT_NPHASES; p++)
        put (t,
             "elastic_agent_last_world_change_seconds{kind=\"%s\",phase=\"%s\"} %.6f\n",
             kind,
             phases[p],
             (double)v->change.us[p] * 1e-6);
}

/* Read what the answer shows (the workers' views, the counters). */
static int view_read (elastic_agent_t *agent, struct view *v)
{
    memset (v, 0, sizeof (*v));
    v->n = agent->nworkers;
    v->last_snap = -1;
    if (!(v->wi = calloc ((size_t)v->n, sizeof (*v->wi))))
        return -1;
    elastic_agent_group_info (agent, &v->g);
    for (int i = 0; i < v->n; i++) {
        elastic_agent_worker_info (agent, i, &v->wi[i]);
        if (v->wi[i].state >= 0 && v->wi[i].state <= ELASTIC_AGENT_FAILED)
            v->counts[v->wi[i].state]++;
        if (v->wi[i].snapshot_step > v->last_snap)
            v->last_snap = v->wi[i].snapshot_step;
    }
    escape (agent->spec->role, v->role, sizeof (v->role));
    pthread_mutex_lock (&agent->lock);
    v->failures = agent->failures_total;
    v->fires = agent->watchdog_fires;
    v->lost = agent->lost_total;
    v->spawned = __atomic_load_n (&agent->spawned_total, __ATOMIC_RELAXED);
    v->capacity = __atomic_load_n (&agent->capacity, __ATOMIC_RELAXED);
    v->lf_rank = agent->last_fail_rank;
    v->lf_local = agent->last_fail_local_rank;
    v->lf_code = agent->last_fail_exitcode;
    v->lf_sig = agent->last_fail_signal;
    v->lf_time = agent->last_fail_time;
    escape (agent->last_fail_message, v->msg, sizeof (v->msg));
    change_read (agent, v);
    pthread_mutex_unlock (&agent->lock);
    return 0;
}

char *agent_metrics (elastic_agent_t *agent)
{
    struct text t = {.cap = 8192};
    struct view v;

    if (!(t.buf = malloc (t.cap)))
        return NULL;
    if (view_read (agent, &v) < 0) {
        free (t.buf);
        return NULL;
    }
    put_agent (&t, agent, &v);
    put_group (&t, &v);
    put_workers (&t, &v);
    put_last (&t, &v);
    put_change (&t, &v);
#if HAVE_PMIX && HAVE_SODIUM
    if (agent->spec->mesh) {
        char *mesh = meshjob_metrics (agent->spec->mesh);
        if (mesh)
            put (&t, "%s", mesh);
        free (mesh);
    }
#endif
    free (v.wi);
    return t.buf;
}
