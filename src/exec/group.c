/* group.c - the worker records of one attempt: ranks, directories, env
 *
 * Rank assignment follows torchelastic's homogeneous case: worker i of the
 * agent with group rank g gets RANK = rank_base + i (rank_base defaults to
 * g * nproc), ROLE_RANK = RANK (one role), LOCAL_RANK = local_rank_base + i.
 * Each worker gets <attempt dir>/<local rank>/ for its logs, its error file
 * and its heartbeat file, and the environment contract of elastic-exec(1).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
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
        rc |= env_add (&v, &n, "ELASTIC_RESUME_FRESH_OK", "1");
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
static int make_heartbeat (struct worker *w, char *err, size_t errsz)
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
    errfmt (err, errsz, "heartbeat file %s: %s", w->heartbeat_file, strerror (errno));
    return -1;
}

int group_prepare (elastic_agent_t *agent, char *err, size_t errsz)
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
        snprintf (err, errsz, "log directory path too long: %s", agent->base_dir);
        return -1;
    }
    pthread_mutex_lock (&agent->lock);
    group_release (agent);
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
            errfmt (err, errsz, "log directory path too long: %s", agent->attempt_dir);
            return -1;
        }
        if (mkdir_p (w->dir) < 0) {
            errfmt (err, errsz, "cannot create %s: %s", w->dir, strerror (errno));
            return -1;
        }
        if (unlink (w->error_file) < 0 && errno != ENOENT) {
            errfmt (err,
                    errsz,
                    "cannot remove stale %s: %s",
                    w->error_file,
                    strerror (errno));
            return -1;
        }
        if (make_heartbeat (w, err, errsz) < 0)
            return -1;
        if (make_env (agent, w, local_size) < 0 || make_argv (w, spec) < 0) {
            snprintf (err, errsz, "out of memory");
            return -1;
        }
    }
    return 0;
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

int group_derive_state (elastic_agent_t *agent)
{
    int failed = 0, failed_alive = 0, succeeded = 0, lost = 0;
    double now = mono_now ();

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
    char lost[256], ended[256];
    int nlost = 0, nended = 0;

    for (int i = 0; i < agent->nworkers; i++) {
        nlost += agent->w[i].lost;
        nended += agent->w[i].after_end;
    }
    if (nlost == 0 && nended == 0)
        return;
    rank_list (agent, 0, lost, sizeof (lost));
    rank_list (agent, 1, ended, sizeof (ended));
    log_warn (
        "worker group '%s' SUCCEEDED: %d rank%s, %d lost and recovered in place%s%s%s, "
        "%d ended after finishing its work%s%s%s",
        agent->spec->role,
        agent->nworkers,
        agent->nworkers == 1 ? "" : "s",
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
