/* settings.c - elastic-exec's settings: their parsers and the one table
 *
 * Every setting is a row of settings_table[] (settings.h): the command line,
 * the environment and elastic_agent_spec_set all find it there.  Each
 * parser checks a value and stores it in the spec; its message names the
 * key, the value and what is accepted (cli.c puts the flag or variable in
 * place of the key).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/parse.h"
#include "settings.h"
#include "spec.h"
#include "template.h"
#include "util.h"

static int set_string (char **dst, const char *v)
{
    char *copy = strdup (v);
    if (!copy)
        return -1;
    free (*dst);
    *dst = copy;
    return 0;
}

static int set_role (struct elastic_agent_spec *s,
                     const char *key,
                     const char *v,
                     elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) > 64)
        return errprintf (
            err, "%s: '%s' is not a role name (expected 1-64 characters)", key, v);
    for (const char *p = v; *p; p++) {
        if (isspace ((unsigned char)*p) || !isprint ((unsigned char)*p))
            return errprintf (
                err, "%s: '%s' contains white space or control characters", key, v);
    }
    return set_string (&s->role, v);
}

static int count_gpus (void)
{
    DIR *d = opendir ("/dev");
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while ((e = readdir (d))) {
        const char *p = e->d_name;
        if (strncmp (p, "nvidia", 6) != 0 || p[6] == '\0')
            continue;
        for (p += 6; *p && isdigit ((unsigned char)*p); p++)
            ;
        if (*p == '\0')
            n++;
    }
    closedir (d);
    return n;
}

static int set_nproc (struct elastic_agent_spec *s,
                      const char *key,
                      const char *v,
                      elastic_error_t *err)
{
    elastic_error_t e;
    long n;
    int gpus;

    if (strcmp (v, "cpu") == 0) {
        s->nproc = (int)sysconf (_SC_NPROCESSORS_ONLN);
        return 0;
    }
    if (strcmp (v, "gpu") == 0 || strcmp (v, "auto") == 0) {
        gpus = count_gpus ();
        if (gpus > 0) {
            s->nproc = gpus;
            return 0;
        }
        if (strcmp (v, "gpu") == 0)
            return errprintf (err, "%s: 'gpu' but no GPU (/dev/nvidiaN) was found", key);
        s->nproc = (int)sysconf (_SC_NPROCESSORS_ONLN);
        return 0;
    }
    if (parse_long (key, v, 1, 4096, &n, &e) < 0)
        return errprintf (err, "%s or one of auto, cpu, gpu", e.text);
    s->nproc = (int)n;
    return 0;
}

static int set_int (
    int *dst, const char *key, const char *v, long min, long max, elastic_error_t *err)
{
    long n;
    if (parse_long (key, v, min, max, &n, err) < 0)
        return -1;
    *dst = (int)n;
    return 0;
}

static int set_max_restarts (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    return set_int (&s->max_restarts, key, v, 0, 1000000, err);
}

/* --nnodes N, or torchrun's MIN:MAX: the job starts with MAX nodes and goes
 * on while at least MIN are left (rdzv_mesh.h) */
static int set_nnodes (struct elastic_agent_spec *s,
                       const char *key,
                       const char *v,
                       elastic_error_t *err)
{
    const char *colon = strchr (v, ':');
    int lo, hi;

    if (!colon) {
        if (set_int (&s->nnodes, key, v, 1, 65536, err) < 0)
            return -1;
        s->min_nodes = s->nnodes;
        return 0;
    }
    {
        char a[32];
        if ((size_t)(colon - v) >= sizeof (a))
            return errprintf (err, "%s: '%s' is not N or MIN:MAX", key, v);
        snprintf (a, sizeof (a), "%.*s", (int)(colon - v), v);
        if (set_int (&lo, key, a, 1, 65536, err) < 0 ||
            set_int (&hi, key, colon + 1, 1, 65536, err) < 0)
            return -1;
    }
    if (lo > hi)
        return errprintf (
            err, "%s: '%s': MIN %d is larger than MAX %d (MIN:MAX)", key, v, lo, hi);
    s->nnodes = hi;
    s->min_nodes = lo;
    return 0;
}

/* --rdzv-backend: elastic (the mesh's rounds), c10d (torchrun's habit:
 * the same, there is no store to host), static (a fixed group: a lost node
 * ends the job) */
static int set_rdzv_backend (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    if (!strcmp (v, "elastic") || !strcmp (v, "c10d"))
        s->rdzv_backend = RDZV_ELASTIC;
    else if (!strcmp (v, "static"))
        s->rdzv_backend = RDZV_STATIC;
    else
        return errprintf (
            err,
            "%s: '%s' is not a rendezvous backend (elastic, c10d or static)",
            key,
            v);
    return 0;
}

/* --rdzv-conf KEY=VALUE,...: torchrun's keys that mean something here */
static int set_rdzv_conf (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          elastic_error_t *err)
{
    char *copy = strdup (v), *save = NULL, *kv;
    double interval = 0, attempts = 0;
    int rc = 0;

    if (!copy)
        return errprintf (err, "out of memory");
    for (kv = strtok_r (copy, ",", &save); kv && rc == 0;
         kv = strtok_r (NULL, ",", &save)) {
        char *eq = strchr (kv, '=');
        double d;
        if (!eq || eq == kv) {
            rc = errprintf (err, "%s: '%s' is not KEY=VALUE", key, kv);
            break;
        }
        *eq = '\0';
        if (!strcmp (kv, "join_timeout")) {
            rc = parse_seconds (key, eq + 1, 1, 1e7, &s->rdzv_join_timeout, err);
        } else if (!strcmp (kv, "keep_alive_interval")) {
            rc = parse_seconds (key, eq + 1, 0.1, 1e6, &interval, err);
        } else if (!strcmp (kv, "keep_alive_max_attempt")) {
            rc = parse_seconds (key, eq + 1, 1, 1e6, &attempts, err);
        } else if (!strcmp (kv, "last_call_timeout")) {
            rc = parse_seconds (key, eq + 1, 0, 1e7, &s->rdzv_last_call, err);
        } else if (!strcmp (kv, "close_timeout") || !strcmp (kv, "read_timeout") ||
                   !strcmp (kv, "timeout")) {
            /* accepted, no meaning here (doc/mesh.md) */
            rc = parse_seconds (key, eq + 1, 0, 1e7, &d, err);
        } else if (!strcmp (kv, "is_host") || !strcmp (kv, "store_type")) {
            /* the c10d store's: there is none here */
        } else {
            rc = errprintf (err,
                            "%s: '%s' is not a rendezvous setting (join_timeout, "
                            "last_call_timeout, keep_alive_interval, "
                            "keep_alive_max_attempt; close_timeout, read_timeout, "
                            "timeout, is_host and store_type are accepted and ignored)",
                            key,
                            kv);
        }
    }
    free (copy);
    if (rc < 0)
        return -1;
    if (interval > 0 || attempts > 0) {
        /* torchrun's keep-alive: a node silent for interval x attempts is
         * gone; here that is the mesh's node timeout */
        s->node_timeout = (interval > 0 ? interval : 5) * (attempts > 0 ? attempts : 3);
        if (s->node_timeout < 0.5)
            s->node_timeout = 0.5;
    }
    return 0;
}

static int set_node_rank (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          elastic_error_t *err)
{
    return set_int (&s->node_rank, key, v, 0, 65535, err);
}

static int set_rdzv_endpoint (struct elastic_agent_spec *s,
                              const char *key,
                              const char *v,
                              elastic_error_t *err)
{
    if (!*v || strlen (v) > 255)
        return errprintf (err, "%s: '%s' is not HOST[:PORT]", key, v);
    return set_string (&s->rdzv_endpoint, v);
}

static int set_monitor_interval (struct elastic_agent_spec *s,
                                 const char *key,
                                 const char *v,
                                 elastic_error_t *err)
{
    return parse_seconds (key, v, 0.001, 3600, &s->monitor_interval, err);
}

static int set_master_addr (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' '))
        return errprintf (err, "%s: '%s' is not a host name or address", key, v);
    return set_string (&s->master_addr, v);
}

static int set_local_addr (struct elastic_agent_spec *s,
                           const char *key,
                           const char *v,
                           elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' '))
        return errprintf (err, "%s: '%s' is not a host name or address", key, v);
    return set_string (&s->local_addr, v);
}

static int set_master_port (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    return set_int (&s->master_port, key, v, 0, 65535, err);
}

static int set_redirects (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          elastic_error_t *err)
{
    return stdmap_parse (key, v, &s->redirects, err);
}

static int set_tee (struct elastic_agent_spec *s,
                    const char *key,
                    const char *v,
                    elastic_error_t *err)
{
    return stdmap_parse (key, v, &s->tee, err);
}

static int set_path (char **dst, const char *key, const char *v, elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) >= PATH_MAX - 128)
        return errprintf (err, "%s: '%s' is not a usable path", key, v);
    return set_string (dst, v);
}

static int set_log_dir (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    return set_path (&s->log_dir, key, v, err);
}

static int set_event_log (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          elastic_error_t *err)
{
    return set_path (&s->event_log, key, v, err);
}

static int set_timer_file (struct elastic_agent_spec *s,
                           const char *key,
                           const char *v,
                           elastic_error_t *err)
{
    return set_path (&s->timer_file, key, v, err);
}

static int set_prefix (struct elastic_agent_spec *s,
                       const char *key,
                       const char *v,
                       elastic_error_t *err)
{
    if (template_check (key, v, err) < 0)
        return -1;
    return set_string (&s->prefix_template, v);
}

static int set_rank_filter (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    int *a = NULL, n;

    if ((n = ranklist_parse (key, v, &a, err)) < 0)
        return -1;
    free (s->rank_filter);
    s->rank_filter = a;
    s->nrank_filter = n;
    return 0;
}

static int
set_filters (char ***dst, int *ndst, const char *key, const char *v, elastic_error_t *err)
{
    char *copy, *tok, *save = NULL;
    char **a = NULL;
    int n = 0;

    if (!(copy = strdup (v)))
        return -1;
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        char **tmp;
        if (*tok == '\0')
            continue;
        if (!(tmp = realloc (a, (size_t)(n + 1) * sizeof (*a))) ||
            !(tmp[n] = strdup (tok))) {
            if (tmp)
                a = tmp;
            spec_strv_free (a, n);
            free (copy);
            return errprintf (err, "%s: out of memory", key);
        }
        a = tmp;
        n++;
    }
    free (copy);
    if (n == 0)
        return errprintf (
            err,
            "%s: '%s' has no filter string (expected comma-separated substrings)",
            key,
            v);
    spec_strv_free (*dst, *ndst);
    *dst = a;
    *ndst = n;
    return 0;
}

static int set_dup_out (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    return set_filters (&s->dup_out, &s->ndup_out, key, v, err);
}

static int set_dup_err (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    return set_filters (&s->dup_err, &s->ndup_err, key, v, err);
}

static int set_seconds (
    double *dst, const char *key, const char *v, double min, elastic_error_t *err)
{
    return parse_seconds (key, v, min, 1e7, dst, err);
}

static int set_exit_barrier (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    return set_seconds (&s->exit_barrier_timeout, key, v, 0, err);
}

static int set_node_timeout (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    return set_seconds (&s->node_timeout, key, v, 0.5, err);
}

static int set_status_file (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    return set_path (&s->status_file, key, v, err);
}

static int set_shutdown_timeout (struct elastic_agent_spec *s,
                                 const char *key,
                                 const char *v,
                                 elastic_error_t *err)
{
    return set_seconds (&s->shutdown_timeout, key, v, 0, err);
}

static int set_handled (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    return signal_list_parse (key, v, &s->handled, err);
}

static int set_preempt (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    return signal_list_parse (key, v, &s->preempt, err);
}

static int set_signal (int *dst, const char *key, const char *v, elastic_error_t *err)
{
    int sig = signal_parse (v);
    if (sig <= 0 || sig == SIGSTOP || sig == SIGCHLD)
        return errprintf (
            err,
            "%s: '%s' is not a signal (expected a name such as SIGTERM or SIGKILL, "
            "or a number)",
            key,
            v);
    *dst = sig;
    return 0;
}

static int set_stop_signal (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    return set_signal (&s->stop_signal, key, v, err);
}

static int set_hang_signal (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    return set_signal (&s->hang_signal, key, v, err);
}

static int set_boolean (int *dst, const char *key, const char *v, elastic_error_t *err)
{
    if (parse_bool (v, dst) < 0)
        return errprintf (
            err,
            "%s: '%s' is not a boolean (expected 1, 0, true, false, yes, no)",
            key,
            v);
    return 0;
}

static int set_vlr (struct elastic_agent_spec *s,
                    const char *key,
                    const char *v,
                    elastic_error_t *err)
{
    return set_boolean (&s->virtual_local_rank, key, v, err);
}

/* --bind and --numa-binding: binding_parse's message starts with the flag
 * ("--bind: ..."); drop the dashes so that the caller can name the source
 * (the flag or ELASTIC_BIND) as for every other key. */
static int set_policy (struct elastic_agent_spec *s,
                       const char *key,
                       const char *v,
                       elastic_error_t *err)
{
#if HAVE_HWLOC
    struct binding_opts o = s->binding;
    elastic_error_t e;

    if (binding_parse (key, v, &o, &e) < 0)
        return errprintf (
            err, "%s", strncmp (e.text, "--", 2) == 0 ? e.text + 2 : e.text);
    s->binding = o;
    return 0;
#else
    if (strcmp (key, "bind") == 0 && strcmp (v, "none") == 0) {
        s->binding.policy = BINDING_NONE;
        return 0;
    }
    errprintf (err,
               "%s: '%s' needs hwloc, which this build does not have (configure found no "
               "libhwloc)%s",
               key,
               v,
               strcmp (key, "bind") == 0 ? "; accepted: none" : "");
    return -1;
#endif
}

static int set_cpus_per_rank (struct elastic_agent_spec *s,
                              const char *key,
                              const char *v,
                              elastic_error_t *err)
{
#if HAVE_HWLOC
    return set_int (&s->binding.cpus_per_rank, key, v, 0, 65536, err);
#else
    return errprintf (
        err,
        "%s: '%s' needs hwloc, which this build does not have (configure found no "
        "libhwloc)",
        key,
        v);
#endif
}

static int set_oversubscribe (struct elastic_agent_spec *s,
                              const char *key,
                              const char *v,
                              elastic_error_t *err)
{
    return set_boolean (&s->binding.oversubscribe, key, v, err);
}

static int set_file_timer (struct elastic_agent_spec *s,
                           const char *key,
                           const char *v,
                           elastic_error_t *err)
{
    return set_boolean (&s->file_timer, key, v, err);
}

static int set_subreaper (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          elastic_error_t *err)
{
    return set_boolean (&s->subreaper, key, v, err);
}

static int set_run_id (struct elastic_agent_spec *s,
                       const char *key,
                       const char *v,
                       elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) > 100 || strchr (v, '/') || strcmp (v, ".") == 0 ||
        strcmp (v, "..") == 0)
        return errprintf (
            err, "%s: '%s' is not a run id (expected 1-100 characters, no '/')", key, v);
    for (const char *p = v; *p; p++) {
        if (!isprint ((unsigned char)*p) || isspace ((unsigned char)*p))
            return errprintf (
                err, "%s: '%s' contains white space or control characters", key, v);
    }
    return set_string (&s->run_id, v);
}

static int set_hang_timeout (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    return set_seconds (&s->hang_timeout, key, v, 0, err);
}

static int set_start_timeout (struct elastic_agent_spec *s,
                              const char *key,
                              const char *v,
                              elastic_error_t *err)
{
    return set_seconds (&s->start_timeout, key, v, 0, err);
}

static int set_health_port (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
#if HAVE_MICROHTTPD
    return set_int (&s->health_port, key, v, -1, 65535, err);
#else
    return errprintf (
        err, "%s: this build has no HTTP server (configure found no libmicrohttpd)", key);
#endif
}

static int set_health_addr (struct elastic_agent_spec *s,
                            const char *key,
                            const char *v,
                            elastic_error_t *err)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' '))
        return errprintf (err, "%s: '%s' is not an address", key, v);
    return set_string (&s->health_addr, v);
}

static int set_health_timeout (struct elastic_agent_spec *s,
                               const char *key,
                               const char *v,
                               elastic_error_t *err)
{
    return parse_seconds (key, v, 0.01, 1e6, &s->health_timeout, err);
}

static int set_restart_policy (struct elastic_agent_spec *s,
                               const char *key,
                               const char *v,
                               elastic_error_t *err)
{
    if (strcmp (v, "group") == 0)
        s->restart_policy = RESTART_GROUP;
    else if (strcmp (v, "in-place") == 0)
        s->restart_policy = RESTART_IN_PLACE;
    else {
        return errprintf (
            err, "%s: '%s' is not a restart policy (accepted: in-place, group)", key, v);
    }
    return 0;
}

static int set_wireup (struct elastic_agent_spec *s,
                       const char *key,
                       const char *v,
                       elastic_error_t *err)
{
    if (strcmp (v, "pmix") == 0)
        s->wireup = WIREUP_PMIX;
    else if (strcmp (v, "none") == 0)
        s->wireup = WIREUP_NONE;
    else if (strcmp (v, "inherit") == 0)
        s->wireup = WIREUP_INHERIT;
    else {
        return errprintf (
            err, "%s: '%s' is not a wire-up (accepted: pmix, none, inherit)", key, v);
    }
    return 0;
}

static int set_mpi_btl (struct elastic_agent_spec *s,
                        const char *key,
                        const char *v,
                        elastic_error_t *err)
{
    if (strcmp (v, "sm") != 0 && strcmp (v, "tcp") != 0 && strcmp (v, "sm,tcp") != 0)
        return errprintf (err, "%s: '%s' is not accepted (sm, tcp, sm,tcp)", key, v);
    return set_string (&s->mpi_btl, v);
}

static int set_init_timeout (struct elastic_agent_spec *s,
                             const char *key,
                             const char *v,
                             elastic_error_t *err)
{
    return set_seconds (&s->init_timeout, key, v, 0, err);
}

static int set_spawn_timeout (struct elastic_agent_spec *s,
                              const char *key,
                              const char *v,
                              elastic_error_t *err)
{
    return set_seconds (&s->spawn_timeout, key, v, 0, err);
}

/* In --help order; a row without help is a spec key only, a row without
 * set is a flag of elastic-exec only (cli.c acts on it). */
const struct setting settings_table[] = {
    {.name = "nproc-per-node",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_NPROC_PER_NODE",
     .set = set_nproc,
     .help = "workers to start here: N, auto, cpu or gpu (agent mode)"},
    {.name = "standalone",
     .arg = SETTING_BOOL,
     .env = "ELASTIC_STANDALONE",
     .help = "agent mode on this node only (the default without a launcher)"},
    {.name = "role",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_ROLE",
     .set = set_role,
     .help = "the workers' role name (default: default)"},
    {.name = "max-restarts",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_MAX_RESTARTS",
     .set = set_max_restarts,
     .help = "restarts of the worker group before giving up (default: 0)"},
    {.name = "monitor-interval",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_MONITOR_INTERVAL",
     .set = set_monitor_interval,
     .help = "longest wait between watchdog checks (default: 0.1 s)"},
    {.name = "master-addr",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_MASTER_ADDR",
     .set = set_master_addr,
     .help = "MASTER_ADDR for the workers (default: 127.0.0.1)"},
    {.name = "master-port",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_MASTER_PORT",
     .set = set_master_port,
     .help = "MASTER_PORT for the workers (default: a free port per attempt)"},
    {.name = "local-addr",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_LOCAL_ADDR",
     .set = set_local_addr,
     .help = "this node's address (MASTER_ADDR when it hosts rank 0)"},
    {.name = "run-id",
     .alias = "rdzv-id",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_RUN_ID",
     .set = set_run_id,
     .help = "the run's id (default: random, or the launcher's job id)"},
    {.name = "redirects",
     .short_flag = 'r',
     .arg = SETTING_VALUE,
     .env = "ELASTIC_REDIRECTS",
     .set = set_redirects,
     .help = "worker output to log files: 0-3 or a map like 0:3,1:0"},
    {.name = "tee",
     .short_flag = 't',
     .arg = SETTING_VALUE,
     .env = "ELASTIC_TEE",
     .set = set_tee,
     .help = "worker output to log files and the console: 0-3 or a map"},
    {.name = "log-dir",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_LOG_DIR",
     .set = set_log_dir,
     .help = "directory for <run-id>/attempt_N/<local_rank>/ logs"},
    {.name = "log-line-prefix-template",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_LOG_LINE_PREFIX_TEMPLATE",
     .set = set_prefix,
     .help = "console prefix: ${role_name} ${local_rank} ${rank} ${hostname}"},
    {.name = "local-ranks-filter",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_LOCAL_RANKS_FILTER",
     .set = set_rank_filter,
     .help = "local ranks whose output reaches the console, e.g. 0,1"},
    {.name = "duplicate-stdout-filters",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_DUPLICATE_STDOUT_FILTERS",
     .set = set_dup_out,
     .help = "copy console stdout lines containing any of these to filtered_stdout.log"},
    {.name = "duplicate-stderr-filters",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_DUPLICATE_STDERR_FILTERS",
     .set = set_dup_err,
     .help = "copy console stderr lines containing any of these to filtered_stderr.log"},
    {.name = "event-log",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_EVENT_LOG",
     .set = set_event_log,
     .help = "append JSON-lines events to this file"},
    {.name = "nnodes",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_NNODES",
     .set = set_nnodes,
     .help = "multi-node (torchrun's spelling): the job's nodes, N or MIN:MAX (it "
             "starts with MIN to MAX, takes in nodes that come later up to MAX and "
             "goes on while MIN are left; --wireup none)"},
    {.name = "node-rank",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_NODE_RANK",
     .set = set_node_rank,
     .help = "with --nnodes: this node's rank, 0..N-1"},
    {.name = "rdzv-endpoint",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_RDZV_ENDPOINT",
     .set = set_rdzv_endpoint,
     .help = "with --nnodes: HOST[:PORT] where the nodes meet at start (default port "
             "29400)"},
    {.name = "rdzv-backend",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_RDZV_BACKEND",
     .set = set_rdzv_backend,
     .help = "with --nnodes: elastic (the default; c10d is accepted for it: rounds "
             "over the mesh, no store) or static (a lost node ends the job)"},
    {.name = "rdzv-conf",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_RDZV_CONF",
     .set = set_rdzv_conf,
     .help = "with --nnodes: join_timeout=S (a round's wait, default 300 s), "
             "keep_alive_interval=S,keep_alive_max_attempt=N (the node timeout)"},
    {.name = "node-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_NODE_TIMEOUT",
     .set = set_node_timeout,
     .help = "multi-node (mesh): a member silent this long is lost (default: 2 s; at "
             "least 0.5 s)"},
    {.name = "join",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_JOIN",
     .help = "multi-node (mesh): join the running job step JOBID[.STEP] as a member "
             "with no ranks of its own, where the job grows into new processes "
             "(another step or allocation of the same user; no program)"},
    {.name = "status-file",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_STATUS_FILE",
     .set = set_status_file,
     .help = "multi-node (mesh): write the job's agreed result here (exit code and "
             "summary, one line)"},
    {.name = "exit-barrier-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_EXIT_BARRIER_TIMEOUT",
     .set = set_exit_barrier,
     .help = "wait for the other agents at exit (default: 300 s)"},
    {.name = "shutdown-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_SHUTDOWN_TIMEOUT",
     .set = set_shutdown_timeout,
     .help = "grace before SIGKILL when stopping workers (default: 30 s)"},
    {.name = "signals-to-handle",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_SIGNALS_TO_HANDLE",
     .set = set_handled,
     .help = "signals relayed to the workers (default: "
             "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1)"},
    {.name = "preempt-signals",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_PREEMPT_SIGNALS",
     .set = set_preempt,
     .help = "signals that mean preemption: exit 75 (default: SIGTERM,SIGUSR1)"},
    {.name = "stop-signal",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_STOP_SIGNAL",
     .set = set_stop_signal,
     .help = "signal that stops a worker group for a restart (default: SIGTERM)"},
    {.name = "wireup",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_WIREUP",
     .set = set_wireup,
     .help = "MPI wire-up: pmix (host the ranks' PMIx server; agent mode's default), "
             "none, or inherit (the launcher's; wrapper mode's default)"},
    {.name = "restart-policy",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_RESTART_POLICY",
     .set = set_restart_policy,
     .help = "in-place (MPI survivors go on; default with --wireup pmix) or group (stop "
             "all, start all)"},
    {.name = "mpi-btl",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_MPI_BTL",
     .set = set_mpi_btl,
     .help =
         "the ranks' Open MPI transport with --wireup pmix: sm, tcp or sm,tcp "
         "(default: sm on one node, sm,tcp across nodes; sm,tcp lets a job grow back)"},
    {.name = "init-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_INIT_TIMEOUT",
     .set = set_init_timeout,
     .help =
         "restart the group when MPI_Init takes longer (--wireup pmix; default: 0, off)"},
    {.name = "spawn-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_SPAWN_TIMEOUT",
     .set = set_spawn_timeout,
     .help = "fail an MPI_Comm_spawn whose processes have not reached their parents "
             "within this time (hosted PMIx server, in place; default: 60 s)"},
    {.name = "virtual-local-rank",
     .arg = SETTING_BOOL,
     .env = "ELASTIC_VIRTUAL_LOCAL_RANK",
     .set = set_vlr,
     .help = "LOCAL_RANK=0 and only the worker's own GPU visible"},
    {.name = "bind",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_BIND",
     .set = set_policy,
     .help = "bind workers: none (default), core, l3, numa, socket or auto"},
    {.name = "numa-binding",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_NUMA_BINDING",
     .set = set_policy,
     .help = "torchrun's: node, socket, exclusive or core-complex (a GPU per worker)"},
    {.name = "cpus-per-rank",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_CPUS_PER_RANK",
     .set = set_cpus_per_rank,
     .help = "cores per worker with --bind (default: the cores divided evenly)"},
    {.name = "oversubscribe",
     .arg = SETTING_BOOL,
     .env = "ELASTIC_OVERSUBSCRIBE",
     .set = set_oversubscribe,
     .help = "let workers share cores when they outnumber them"},
    {.name = "print-binding",
     .arg = SETTING_BOOL,
     .env = "ELASTIC_PRINT_BINDING",
     .help = "print each worker's cpus, NUMA node and GPU, and exit"},
    {.name = "enable-file-timer",
     .arg = SETTING_BOOL,
     .env = "ELASTIC_ENABLE_FILE_TIMER",
     .compat_env = "TORCHELASTIC_ENABLE_FILE_TIMER",
     .set = set_file_timer,
     .help = "serve torchelastic's file-timer watchdog FIFO"},
    {.name = "timer-file",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_TIMER_FILE",
     .compat_env = "TORCHELASTIC_TIMER_FILE",
     .set = set_timer_file,
     .help = "path of the file-timer FIFO (default: in the run directory)"},
    {.name = "hang-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_HANG_TIMEOUT",
     .set = set_hang_timeout,
     .help = "kill a worker whose libelastic heartbeat stops this long (0: off)"},
    {.name = "start-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_START_TIMEOUT",
     .set = set_start_timeout,
     .help = "with --hang-timeout: a worker stopped this long before its first report, "
             "or MPI_Init (pmix) this long, is hung (default: 60 s; 0: off)"},
    {.name = "hang-signal",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_HANG_SIGNAL",
     .set = set_hang_signal,
     .help = "signal for a hung worker (default: SIGKILL)"},
    {.name = "health-port",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_HEALTH_PORT",
     .compat_env = "TORCHELASTIC_HEALTH_CHECK_PORT",
     .set = set_health_port,
     .help = "serve /healthz and /metrics on this port (0: any free port)"},
    {.name = "health-addr",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_HEALTH_ADDR",
     .set = set_health_addr,
     .help = "address of the health server (default: 127.0.0.1)"},
    {.name = "health-timeout",
     .arg = SETTING_VALUE,
     .env = "ELASTIC_HEALTH_TIMEOUT",
     .set = set_health_timeout,
     .help = "/healthz is 503 when the agent's loop stalls this long (default: 10 s)"},
    {.name = "verbose",
     .short_flag = 'v',
     .arg = SETTING_NONE,
     .help = "more diagnostics (twice: debug)"},
    {.name = "quiet", .short_flag = 'q', .arg = SETTING_NONE, .help = "errors only"},
    {.name = "version",
     .short_flag = 'V',
     .arg = SETTING_NONE,
     .help = "print the version and exit"},
    {.name = "help",
     .short_flag = 'h',
     .arg = SETTING_NONE,
     .help = "print this help and exit"},
    /* a spec key only: not a flag, not a variable */
    {.name = "subreaper", .arg = SETTING_BOOL, .set = set_subreaper},
};
const int settings_count = (int)(sizeof (settings_table) / sizeof (settings_table[0]));

_Static_assert(sizeof (settings_table) / sizeof (settings_table[0]) <= SPEC_NKEYS,
               "SPEC_NKEYS too small");

/* name[0..len) with '_' as '-' into norm; -1 when it does not fit. */
static int normalize (const char *name, size_t len, char *norm, size_t size)
{
    if (len >= size)
        return -1;
    for (size_t i = 0; i < len; i++)
        norm[i] = name[i] == '_' ? '-' : name[i];
    norm[len] = '\0';
    return 0;
}

const struct setting *settings_find_key (const char *key)
{
    char norm[64];

    if (!key || normalize (key, strlen (key), norm, sizeof (norm)) < 0)
        return NULL;
    for (int i = 0; i < settings_count; i++)
        if (settings_table[i].set && strcmp (settings_table[i].name, norm) == 0)
            return &settings_table[i];
    return NULL;
}

const struct setting *settings_find_flag (const char *name, size_t len)
{
    char norm[64];

    if (normalize (name, len, norm, sizeof (norm)) < 0)
        return NULL;
    for (int i = 0; i < settings_count; i++)
        if (settings_table[i].help &&
            (strcmp (settings_table[i].name, norm) == 0 ||
             (settings_table[i].alias && strcmp (settings_table[i].alias, norm) == 0)))
            return &settings_table[i];
    return NULL;
}

const struct setting *settings_find_short (char c)
{
    for (int i = 0; i < settings_count; i++)
        if (settings_table[i].help && settings_table[i].short_flag &&
            settings_table[i].short_flag == c)
            return &settings_table[i];
    return NULL;
}
