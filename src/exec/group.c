/* group.c - the worker records: ranks, directories, env, and what the
 * backends and the watchdogs report about each worker
 *
 * Rank assignment follows torchelastic's homogeneous case: worker i of the
 * agent with group rank g gets RANK = rank_base + i (rank_base defaults to
 * g * nproc), ROLE_RANK = RANK (one role), LOCAL_RANK = local_rank_base + i.
 * Each worker gets <attempt dir>/<local rank>/ for its logs, its error file
 * and its heartbeat file, and the environment contract of elastic-exec(1).
 * A start, an exit, a job abort or a watchdog's kill is recorded here, and
 * every failure through one worker_fail().
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
#include "errorfile.h"
#include "filetimer.h"
#include "util.h"

static void free_strv (char **v)
{
    if (v) {
        for (char **p = v; *p; p++)
            free (*p);
        free (v);
    }
}

void group_release (elastic_agent_t *agent)
{
    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (w->hb)
            munmap (w->hb, sizeof (*w->hb));
        w->hb = NULL;
        free_strv (w->env);
        free_strv (w->argv);
        free (w->message);
        free (w->traceback);
        free (w->reason);
        free (w->ret);
        w->env = w->argv = NULL;
        w->message = w->traceback = w->reason = NULL;
        w->ret = NULL;
    }
}

/* Append "NAME=value" to a NULL-terminated vector. */
static int env_add (char ***vp, int *np, const char *name, const char *fmt, ...)
{
    char value[PATH_MAX + 64], *entry;
    char **v;
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (value, sizeof (value), fmt, ap);
    va_end (ap);
    if (asprintf (&entry, "%s=%s", name, value) < 0)
        return -1;
    if (!(v = realloc (*vp, (size_t)(*np + 2) * sizeof (*v)))) {
        free (entry);
        return -1;
    }
    v[(*np)++] = entry;
    v[*np] = NULL;
    *vp = v;
    return 0;
}

/* Replace every "${local_rank}" in s (torchelastic's macro). */
static char *substitute (const char *s, int local_rank)
{
    static const char macro[] = "${local_rank}";
    char num[16], *out, *o;
    size_t count = 0;

    snprintf (num, sizeof (num), "%d", local_rank);
    for (const char *p = s; (p = strstr (p, macro)); p += sizeof (macro) - 1)
        count++;
    if (!(out = malloc (strlen (s) + count * strlen (num) + 1)))
        return NULL;
    o = out;
    while (*s) {
        if (strncmp (s, macro, sizeof (macro) - 1) == 0) {
            o = stpcpy (o, num);
            s += sizeof (macro) - 1;
        } else
            *o++ = *s++;
    }
    *o = '\0';
    return out;
}

static int make_argv (struct worker *w, const struct elastic_agent_spec *spec)
{
    if (!spec->argv)
        return 0;
    if (!(w->argv = calloc ((size_t)spec->argc + 1, sizeof (char *))))
        return -1;
    for (int i = 0; i < spec->argc; i++)
        if (!(w->argv[i] = substitute (spec->argv[i], w->local_rank)))
            return -1;
    return 0;
}

static int make_env (elastic_agent_t *agent, struct worker *w, int local_world_size)
{
    const struct elastic_agent_spec *spec = agent->spec;
    char **v = NULL;
    int n = 0, rc = 0;

    rc |= env_add (
        &v, &n, "LOCAL_RANK", "%d", spec->virtual_local_rank ? 0 : w->local_rank);
    rc |= env_add (&v, &n, "RANK", "%d", w->rank);
    rc |= env_add (&v, &n, "GROUP_RANK", "%d", agent->rinfo.group_rank);
    rc |= env_add (&v, &n, "ROLE_RANK", "%d", w->role_rank);
    rc |= env_add (&v, &n, "ROLE_NAME", "%s", spec->role);
    rc |= env_add (&v, &n, "LOCAL_WORLD_SIZE", "%d", local_world_size);
    rc |= env_add (&v, &n, "WORLD_SIZE", "%d", w->world_size);
    rc |= env_add (&v, &n, "GROUP_WORLD_SIZE", "%d", agent->rinfo.group_world_size);
    rc |= env_add (&v, &n, "ROLE_WORLD_SIZE", "%d", w->role_world_size);
    if (agent->master_port > 0) {
        rc |= env_add (&v, &n, "MASTER_ADDR", "%s", agent->master_addr);
        rc |= env_add (&v, &n, "MASTER_PORT", "%d", agent->master_port);
    }
    rc |= env_add (&v, &n, "ELASTIC_RESTART_COUNT", "%d", agent->restart_count);
    /* a restarted group resumes from its last persistent (HDF5) snapshot
     * when libelastic has one, and starts fresh otherwise */
    if (agent->restart_count > 0 && !getenv ("ELASTIC_RESUME"))
        rc |= env_add (&v, &n, "ELASTIC_RESUME", "1");
    if (agent->restart_count > 0 && !getenv ("ELASTIC_RESUME_FRESH_OK"))
        rc |= env_add (&v, &n, "ELASTIC_RESUME_FRESH_OK", "2");
    rc |= env_add (&v, &n, "ELASTIC_MAX_RESTARTS", "%d", spec->max_restarts);
    rc |= env_add (&v, &n, "ELASTIC_RUN_ID", "%s", agent->run_id);
    rc |= env_add (&v, &n, "ELASTIC_ERROR_FILE", "%s", w->error_file);
    rc |= env_add (&v, &n, "ELASTIC_HEARTBEAT_FILE", "%s", w->heartbeat_file);
    rc |= env_add (&v, &n, "TORCHELASTIC_RESTART_COUNT", "%d", agent->restart_count);
    rc |= env_add (&v, &n, "TORCHELASTIC_MAX_RESTARTS", "%d", spec->max_restarts);
    rc |= env_add (&v, &n, "TORCHELASTIC_RUN_ID", "%s", agent->run_id);
    rc |= env_add (&v, &n, "TORCHELASTIC_ERROR_FILE", "%s", w->error_file);
    /* The workers host their own store (rank 0 binds MASTER_PORT). */
    rc |= env_add (&v, &n, "TORCHELASTIC_USE_AGENT_STORE", "False");
    if (agent->ft) {
        rc |= env_add (&v, &n, "TORCHELASTIC_TIMER_FILE", "%s", agent->timer_path);
        rc |= env_add (&v, &n, "ELASTIC_TIMER_FILE", "%s", agent->timer_path);
    }
    if (!getenv ("NCCL_ASYNC_ERROR_HANDLING"))
        rc |= env_add (&v, &n, "NCCL_ASYNC_ERROR_HANDLING", "1");
    if (local_world_size > 1 && !getenv ("OMP_NUM_THREADS"))
        rc |= env_add (&v, &n, "OMP_NUM_THREADS", "1");
    if (spec->virtual_local_rank) {
        /* each worker sees its own device as device 0 */
        const char *visible = getenv ("CUDA_VISIBLE_DEVICES");
        char dev[64];
        snprintf (dev, sizeof (dev), "%d", w->local_rank);
        if (visible && *visible) {
            const char *p = visible;
            for (int i = 0; p && i < w->local_rank; i++)
                if ((p = strchr (p, ',')))
                    p++;
            if (p && *p) {
                size_t len = strcspn (p, ",");
                snprintf (dev, sizeof (dev), "%.*s", (int)len, p);
            }
        }
        rc |= env_add (&v, &n, "CUDA_VISIBLE_DEVICES", "%s", dev);
    }
    if (rc != 0) {
        free_strv (v);
        return -1;
    }
    w->env = v;
    return 0;
}

/* Create the zero-filled heartbeat file and map it read-only. */
static int make_heartbeat (struct worker *w, elastic_error_t *err)
{
    void *p;
    int fd;

    unlink (w->heartbeat_file);
    if ((fd = open (w->heartbeat_file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        goto fail;
    if (ftruncate (fd, sizeof (struct elastic_heartbeat)) < 0) {
        close (fd);
        goto fail;
    }
    p = mmap (NULL, sizeof (struct elastic_heartbeat), PROT_READ, MAP_SHARED, fd, 0);
    close (fd);
    if (p == MAP_FAILED)
        goto fail;
    w->hb = p;
    return 0;
fail:
    return errprintf (err, "heartbeat file %s: %s", w->heartbeat_file, strerror (errno));
}

int group_prepare (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    const struct elastic_agent_rdzv_info *ri = &agent->rinfo;
    int n = spec->nproc;
    int rank_base = ri->rank_base >= 0 ? ri->rank_base : ri->group_rank * n;
    int world = ri->world_size > 0 ? ri->world_size : ri->group_world_size * n;
    int local_size = ri->node_local_size > 0 ? ri->node_local_size : n;

    if (snprintf (agent->attempt_dir,
                  sizeof (agent->attempt_dir),
                  "%s/attempt_%d",
                  agent->base_dir,
                  agent->restart_count) >= (int)sizeof (agent->attempt_dir)) {
        return errprintf (err, "log directory path too long: %s", agent->base_dir);
    }
    pthread_mutex_lock (&agent->lock);
    group_release (agent);
    /* the workers spawned into the last attempt go with it */
    agent->nworkers = n;
    __atomic_store_n (&agent->nspawned, 0, __ATOMIC_RELAXED);
    __atomic_store_n (&agent->capacity, 0, __ATOMIC_RELAXED);
    agent->next_rank = rank_base + n > world ? rank_base + n : world;
    for (int i = 0; i < n; i++) {
        struct worker *w = &agent->w[i];
        memset (w, 0, sizeof (*w));
        w->index = i;
        w->local_rank = ri->local_rank_base + i;
        w->rank = rank_base + i;
        w->role_rank = w->rank;
        w->world_size = world;
        w->role_world_size = world;
        w->state = ELASTIC_AGENT_INIT;
    }
    pthread_mutex_unlock (&agent->lock);
    for (int i = 0; i < n; i++) {
        struct worker *w = &agent->w[i];
        if (pathfmt (
                w->dir, sizeof (w->dir), "%s/%d", agent->attempt_dir, w->local_rank) <
                0 ||
            pathfmt (w->error_file, sizeof (w->error_file), "%s/error.json", w->dir) <
                0 ||
            pathfmt (
                w->heartbeat_file, sizeof (w->heartbeat_file), "%s/heartbeat", w->dir) <
                0) {
            return errprintf (err, "log directory path too long: %s", agent->attempt_dir);
        }
        if (mkdir_p (w->dir) < 0) {
            return errprintf (err, "cannot create %s: %s", w->dir, strerror (errno));
        }
        if (unlink (w->error_file) < 0 && errno != ENOENT) {
            return errprintf (
                err, "cannot remove stale %s: %s", w->error_file, strerror (errno));
        }
        if (make_heartbeat (w, err) < 0)
            return -1;
        if (make_env (agent, w, local_size) < 0 || make_argv (w, spec) < 0) {
            return errprintf (err, "out of memory");
        }
    }
    return 0;
}

/* Make room for one more record (w may move: under the lock, for the
 * readers on other threads).  Returns 0 or -1. */
static int grow_records (elastic_agent_t *agent)
{
    struct worker *nw;
    int cap = agent->wcap * 2 + 4;

    if (agent->nworkers < agent->wcap)
        return 0;
    pthread_mutex_lock (&agent->lock);
    if ((nw = realloc (agent->w, (size_t)cap * sizeof (*nw)))) {
        memset (nw + agent->wcap, 0, (size_t)(cap - agent->wcap) * sizeof (*nw));
        agent->w = nw;
        agent->wcap = cap;
    }
    pthread_mutex_unlock (&agent->lock);
    return nw ? 0 : -1;
}

static int copy_argv (struct worker *w, char *const argv[])
{
    int argc = 0;

    while (argv[argc])
        argc++;
    if (!(w->argv = calloc ((size_t)argc + 1, sizeof (char *))))
        return -1;
    for (int i = 0; i < argc; i++)
        if (!(w->argv[i] = strdup (argv[i])))
            return -1;
    return 0;
}

int agent_worker_add (elastic_agent_t *agent,
                      int local_rank,
                      char *const argv[],
                      elastic_error_t *err)
{
    const struct elastic_agent_rdzv_info *ri = &agent->rinfo;
    int local_size = ri->node_local_size > 0 ? ri->node_local_size : agent->spec->nproc;
    struct worker *w, tmp;

    if (!argv || !argv[0] || !argv[0][0])
        return errprintf (err, "no program to run");
    if (grow_records (agent) < 0)
        return errprintf (err, "out of memory");
    /* built aside, then published under the lock */
    memset (&tmp, 0, sizeof (tmp));
    w = &tmp;
    w->index = agent->nworkers;
    w->local_rank = local_rank;
    w->rank = agent->next_rank;
    w->role_rank = w->rank;
    w->world_size = agent->nworkers > 0 ? agent->w[0].world_size : 0;
    w->role_world_size = w->world_size;
    w->state = ELASTIC_AGENT_INIT;
    if (pathfmt (w->dir, sizeof (w->dir), "%s/spawn_%d", agent->attempt_dir, w->rank) <
            0 ||
        pathfmt (w->error_file, sizeof (w->error_file), "%s/error.json", w->dir) < 0 ||
        pathfmt (w->heartbeat_file, sizeof (w->heartbeat_file), "%s/heartbeat", w->dir) <
            0)
        return errprintf (err, "log directory path too long: %s", agent->attempt_dir);
    if (mkdir_p (w->dir) < 0)
        return errprintf (err, "cannot create %s: %s", w->dir, strerror (errno));
    unlink (w->error_file);
    if (make_heartbeat (w, err) < 0)
        return -1;
    if (make_env (agent, w, local_size) < 0 || copy_argv (w, argv) < 0) {
        munmap (w->hb, sizeof (*w->hb));
        free_strv (w->env);
        free_strv (w->argv);
        return errprintf (err, "out of memory");
    }
    pthread_mutex_lock (&agent->lock);
    agent->w[agent->nworkers] = tmp;
    agent->nworkers++;
    agent->next_rank++;
    __atomic_add_fetch (&agent->nspawned, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&agent->spawned_total, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock (&agent->lock);
    return tmp.index;
}

void agent_next_rank_at_least (elastic_agent_t *agent, int rank)
{
    pthread_mutex_lock (&agent->lock);
    if (agent->next_rank < rank)
        agent->next_rank = rank;
    pthread_mutex_unlock (&agent->lock);
}

void agent_capacity_set (elastic_agent_t *agent, int capacity)
{
    uint32_t v = capacity > 0 ? (uint32_t)capacity : 0;

    __atomic_store_n (&agent->capacity, (int)v, __ATOMIC_RELAXED);
    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        int fd;

        if (!w->hb || w->pid <= 0 || w->exited ||
            __atomic_load_n (&w->hb->capacity, __ATOMIC_RELAXED) == v)
            continue;
        /* the agent's mapping is read-only: the file takes the write */
        if ((fd = open (w->heartbeat_file, O_WRONLY | O_CLOEXEC)) < 0)
            continue;
        if (pwrite (fd, &v, sizeof (v), offsetof (struct elastic_heartbeat, capacity)) !=
            (ssize_t)sizeof (v))
            log_debug ("rank %d: cannot write the spawn capacity into %s: %s",
                       w->rank,
                       w->heartbeat_file,
                       strerror (errno));
        close (fd);
    }
}

int agent_capacity (elastic_agent_t *agent)
{
    return __atomic_load_n (&agent->capacity, __ATOMIC_RELAXED);
}

void group_set_state (elastic_agent_t *agent, int state)
{
    int old = agent->state;

    if (old == state)
        return;
    pthread_mutex_lock (&agent->lock);
    agent->state = state;
    pthread_mutex_unlock (&agent->lock);
    eventlog_emit (agent->ev,
                   "group_state",
                   json_pack ("{s:s s:s s:i}",
                              "from",
                              elastic_agent_state_name (old),
                              "to",
                              elastic_agent_state_name (state),
                              "attempt",
                              agent->restart_count));
    log_debug ("worker group %s -> %s",
               elastic_agent_state_name (old),
               elastic_agent_state_name (state));
}

void agent_hosting_ends (elastic_agent_t *agent)
{
    agent->hosting_ends = 1;
}

int group_derive_state (elastic_agent_t *agent)
{
    int failed = 0, failed_alive = 0, succeeded = 0, lost = 0;
    double now = mono_now ();

    if (agent->spec->hosting && !agent->hosting_ends && group_alive (agent) == 0) {
        int bad = 0;
        for (int i = 0; i < agent->nworkers; i++)
            bad |= agent->w[i].failed && !agent->w[i].lost;
        if (!bad)
            return ELASTIC_AGENT_HEALTHY; /* waiting for processes spawned here */
    }
    if (agent->spec->hosting && group_alive (agent) == 0) {
        for (int i = 0; i < agent->nworkers; i++)
            if (agent->w[i].failed && !agent->w[i].lost)
                failed++;
        return failed ? ELASTIC_AGENT_FAILED : ELASTIC_AGENT_SUCCEEDED;
    }

    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (w->lost)
            lost++; /* recovered in place: the others went on */
        else if (w->failed && !w->exited && w->fire_mono > 0 &&
                 now - w->fire_mono < agent->spec->shutdown_timeout)
            ; /* a watchdog's victim, dying: its death tells how it counts
                 (lost in place, or a failure) */
        else if (w->failed) {
            failed++;
            if (!w->exited)
                failed_alive++;
        } else if (w->exited && (w->exitcode == 0 || w->after_end))
            succeeded++;
    }
    if (failed)
        return failed_alive ? ELASTIC_AGENT_UNHEALTHY : ELASTIC_AGENT_FAILED;
    if (lost == agent->nworkers)
        return ELASTIC_AGENT_FAILED; /* nobody was left to go on */
    if (succeeded + lost == agent->nworkers)
        return ELASTIC_AGENT_SUCCEEDED;
    return ELASTIC_AGENT_HEALTHY;
}

/* Append " R" for each worker with the field set to buf (a rank list). */
static void rank_list (elastic_agent_t *agent, int after_end, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < agent->nworkers && len + 16 < size; i++) {
        const struct worker *w = &agent->w[i];
        if (after_end ? w->after_end : w->lost)
            len +=
                (size_t)snprintf (buf + len, size - len, "%s%d", len ? " " : "", w->rank);
    }
}

void group_summary (elastic_agent_t *agent)
{
    char lost[256], ended[256], spawned[64];
    int nlost = 0, nended = 0;

    snprintf (spawned, sizeof (spawned), " (%d spawned)", agent->nspawned);

    for (int i = 0; i < agent->nworkers; i++) {
        nlost += agent->w[i].lost;
        nended += agent->w[i].after_end;
    }
    if (nlost == 0 && nended == 0)
        return;
    rank_list (agent, 0, lost, sizeof (lost));
    rank_list (agent, 1, ended, sizeof (ended));
    log_warn (
        "worker group '%s' SUCCEEDED: %d rank%s%s, %d lost and recovered in place%s%s%s, "
        "%d ended after finishing its work%s%s%s",
        agent->spec->role,
        agent->nworkers,
        agent->nworkers == 1 ? "" : "s",
        agent->nspawned > 0 ? spawned : "",
        nlost,
        nlost ? " (ranks " : "",
        lost,
        nlost ? ")" : "",
        nended,
        nended ? " (ranks " : "",
        ended,
        nended ? ")" : "");
}

int worker_reported (const struct worker *w, uint32_t flag)
{
    const struct elastic_heartbeat *hb = w->hb;

    return hb &&
           __atomic_load_n (&hb->magic, __ATOMIC_ACQUIRE) == ELASTIC_HEARTBEAT_MAGIC &&
           __atomic_load_n (&hb->version, __ATOMIC_RELAXED) >= 2 &&
           (__atomic_load_n (&hb->flags, __ATOMIC_ACQUIRE) & flag);
}

int worker_reported_end (const struct worker *w)
{
    return worker_reported (w, ELASTIC_HEARTBEAT_ENDED);
}

int group_alive (elastic_agent_t *agent)
{
    int n = 0;

    for (int i = 0; i < agent->nworkers; i++)
        if (agent->w[i].pid > 0 && !agent->w[i].exited)
            n++;
    return n;
}

/* ---- what backends and watchdogs report ------------------------------------ */

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

void worker_fail (elastic_agent_t *agent,
                  struct worker *w,
                  double when,
                  char *message,
                  int exitcode,
                  int signum)
{
    w->failed = 1;
    w->fail_seq = ++agent->fail_seq;
    w->fail_time = when;
    free (w->message);
    w->message = message;
    agent->failures_total++;
    agent->last_fail_rank = w->rank;
    agent->last_fail_local_rank = w->local_rank;
    agent->last_fail_exitcode = exitcode;
    agent->last_fail_signal = signum;
    agent->last_fail_time = when;
    snprintf (agent->last_fail_message,
              sizeof (agent->last_fail_message),
              "%s",
              message ? message : "");
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
    w->stopped_ns = 0;
    w->fire_mono = 0;
    w->fire_stuck = 0;
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

/* A worker a watchdog killed (or that aborted the job) ended: keep its
 * reason, add how it ended and its error file's traceback. */
static void end_after_fire (elastic_agent_t *agent,
                            struct worker *w,
                            struct error_record *rec,
                            int how)
{
    char *exitdesc = describe_exit (w), *m = NULL;

    if (asprintf (
            &m, "%s; %s", w->reason ? w->reason : "watchdog", exitdesc ? exitdesc : "") >=
        0) {
        free (w->message);
        w->message = m;
    }
    free (exitdesc);
    if (rec->message) {
        free (w->traceback);
        w->traceback = rec->traceback ? rec->traceback : rec->message;
        if (rec->traceback)
            free (rec->message);
        rec->message = rec->traceback = NULL;
    }
    w->state = ELASTIC_AGENT_FAILED;
    /* the survivors recover without it (a hung rank, in place) */
    if (how == END_LOST) {
        w->lost = 1;
        agent->lost_total++;
    }
    /* its peers can learn of its death only now (a killed process may be
     * reaped late on a loaded machine, and they must agree on it before
     * they report again): the fresh timeout the watchdog gave them runs
     * from here, not from the kill (t5016 nohb-init in a CI preview: the
     * survivors, still before their first report, were judged 6 s after
     * the kill, while they were leaving elastic_manager_create to
     * relaunch) */
    uint64_t now = mono_ns ();
    for (int i = 0; i < agent->nworkers; i++)
        if (!agent->w[i].failed && agent->w[i].hang_grace_ns < now)
            agent->w[i].hang_grace_ns = now;
}

/* A worker failed by its exit: its error file's message (or the exit's
 * description) and time, with note added. */
static void end_failed (elastic_agent_t *agent,
                        struct worker *w,
                        struct error_record *rec,
                        int how,
                        int signum,
                        const char *note)
{
    char *message;
    double when;

    w->lost = how == END_LOST;
    w->state = ELASTIC_AGENT_FAILED;
    if (rec->message) {
        message = rec->message;
        free (w->traceback);
        w->traceback = rec->traceback;
        rec->message = rec->traceback = NULL;
        when = rec->timestamp > 0 ? rec->timestamp : wall_now ();
    } else {
        message = describe_exit (w);
        when = wall_now ();
    }
    worker_fail (agent, w, when, with_note (message, note), w->exitcode, signum);
    if (w->lost)
        agent->lost_total++;
}

/* Record an exit in w (under the lock): how it counts, its state. */
static void record_end (elastic_agent_t *agent,
                        struct worker *w,
                        int exitcode,
                        int signum,
                        int how,
                        int ended,
                        int failed,
                        struct error_record *rec,
                        const char *note)
{
    w->exited = 1;
    w->signum = signum;
    w->exitcode = signum > 0 ? -signum : exitcode;
    w->exit_mono = mono_now ();
    if (w->aborted) {
        /* the agent killed it after its MPI_Abort: the abort is the story */
        w->signum = 0;
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
    else if (w->failed)
        end_after_fire (agent, w, rec, how);
    else if (agent->stopping)
        w->state = ELASTIC_AGENT_STOPPED;
    else
        end_failed (agent, w, rec, how, signum, note);
}

/* The worker_exit (and rank_lost) events and the log line of an exit. */
static void report_end (elastic_agent_t *agent, struct worker *w, int signum)
{
    json_t *o = worker_brief (w);
    int survivors;

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
    else if (w->failed) {
        log_warn ("rank %d (local rank %d, pid %d) failed: %s",
                  w->rank,
                  w->local_rank,
                  (int)w->pid,
                  w->message ? w->message : "");
        if (agent->failure_note[0] && !agent->failure_noted) {
            agent->failure_noted = 1;
            fprintf (stderr, "%s\n", agent->failure_note);
            fflush (stderr);
        }
    } else
        log_debug ("rank %d (pid %d) exited with %d", w->rank, (int)w->pid, w->exitcode);
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
    int failed, ended;

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
    record_end (agent, w, exitcode, signum, how, ended, failed, &rec, note);
    pthread_mutex_unlock (&agent->lock);
    errorfile_clear (&rec);
    if (agent->ft)
        filetimer_clear_pid (agent->ft, w->pid);
    report_end (agent, w, w->aborted ? 0 : signum);
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
        w->aborted = 1;
        w->abort_code = code;
        free (w->reason);
        w->reason = strdup (reason);
        worker_fail (agent, w, wall_now (), strdup (reason), code, 0);
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
        w->fire_mono = mono_now ();
        w->fire_signum = signum;
        w->fire_pid = target;
        free (w->reason);
        w->reason = strdup (reason);
        worker_fail (agent, w, wall_now (), strdup (reason), -signum, signum);
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

void agent_worker_kill (elastic_agent_t *agent,
                        int index,
                        int signum,
                        const char *kind,
                        const char *reason,
                        json_t *fields)
{
    struct worker *w;

    if (!agent || index < 0 || index >= agent->nworkers) {
        json_decref (fields);
        return;
    }
    w = &agent->w[index];
    agent_watchdog_fire (agent, w, w->pid, signum, kind, reason, fields);
}
