/* spec.c - the agent's settings, set by name from flags or environment */
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
#include <sys/stat.h>
#include <unistd.h>

#include "common/parse.h"
#include "spec.h"
#include "template.h"
#include "util.h"

typedef int (*setter_fn) (struct elastic_agent_spec *s,
                          const char *key,
                          const char *v,
                          char *err,
                          size_t errsz);

static void errset (elastic_error_t *err, const char *text)
{
    if (err)
        snprintf (err->text, sizeof (err->text), "%s", text);
}

static int set_string (char **dst, const char *v)
{
    char *copy = strdup (v);
    if (!copy)
        return -1;
    free (*dst);
    *dst = copy;
    return 0;
}

static int set_role (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) > 64) {
        snprintf (
            err, errsz, "%s: '%s' is not a role name (expected 1-64 characters)", key, v);
        return -1;
    }
    for (const char *p = v; *p; p++) {
        if (isspace ((unsigned char)*p) || !isprint ((unsigned char)*p)) {
            snprintf (err,
                      errsz,
                      "%s: '%s' contains white space or control characters",
                      key,
                      v);
            return -1;
        }
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

static int set_nproc (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
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
        if (strcmp (v, "gpu") == 0) {
            snprintf (err, errsz, "%s: 'gpu' but no GPU (/dev/nvidiaN) was found", key);
            return -1;
        }
        s->nproc = (int)sysconf (_SC_NPROCESSORS_ONLN);
        return 0;
    }
    if (ERR_BRIDGE (err, errsz, parse_long (key, v, 1, 4096, &n, &e_)) < 0) {
        size_t len = strlen (err);
        snprintf (err + len, errsz - len, " or one of auto, cpu, gpu");
        return -1;
    }
    s->nproc = (int)n;
    return 0;
}

static int set_int (
    int *dst, const char *key, const char *v, long min, long max, char *err, size_t errsz)
{
    long n;
    if (ERR_BRIDGE (err, errsz, parse_long (key, v, min, max, &n, &e_)) < 0)
        return -1;
    *dst = (int)n;
    return 0;
}

static int set_max_restarts (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_int (&s->max_restarts, key, v, 0, 1000000, err, errsz);
}

static int set_monitor_interval (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return ERR_BRIDGE (
        err, errsz, parse_seconds (key, v, 0.001, 3600, &s->monitor_interval, &e_));
}

static int set_master_addr (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' ')) {
        snprintf (err, errsz, "%s: '%s' is not a host name or address", key, v);
        return -1;
    }
    return set_string (&s->master_addr, v);
}

static int set_local_addr (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' ')) {
        snprintf (err, errsz, "%s: '%s' is not a host name or address", key, v);
        return -1;
    }
    return set_string (&s->local_addr, v);
}

static int set_master_port (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_int (&s->master_port, key, v, 0, 65535, err, errsz);
}

static int set_redirects (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return stdmap_parse (key, v, &s->redirects, err, errsz);
}

static int set_tee (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return stdmap_parse (key, v, &s->tee, err, errsz);
}

static int set_path (char **dst, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) >= PATH_MAX - 128) {
        snprintf (err, errsz, "%s: '%s' is not a usable path", key, v);
        return -1;
    }
    return set_string (dst, v);
}

static int set_log_dir (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_path (&s->log_dir, key, v, err, errsz);
}

static int set_event_log (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_path (&s->event_log, key, v, err, errsz);
}

static int set_timer_file (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_path (&s->timer_file, key, v, err, errsz);
}

static int set_prefix (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (template_check (key, v, err, errsz) < 0)
        return -1;
    return set_string (&s->prefix_template, v);
}

static int set_rank_filter (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    int *a = NULL, n;

    if ((n = ranklist_parse (key, v, &a, err, errsz)) < 0)
        return -1;
    free (s->rank_filter);
    s->rank_filter = a;
    s->nrank_filter = n;
    return 0;
}

static void free_list (char **a, int n)
{
    for (int i = 0; i < n; i++)
        free (a[i]);
    free (a);
}

static int set_filters (
    char ***dst, int *ndst, const char *key, const char *v, char *err, size_t errsz)
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
            free_list (a, n);
            free (copy);
            snprintf (err, errsz, "%s: out of memory", key);
            return -1;
        }
        a = tmp;
        n++;
    }
    free (copy);
    if (n == 0) {
        snprintf (err,
                  errsz,
                  "%s: '%s' has no filter string (expected comma-separated substrings)",
                  key,
                  v);
        return -1;
    }
    free_list (*dst, *ndst);
    *dst = a;
    *ndst = n;
    return 0;
}

static int set_dup_out (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_filters (&s->dup_out, &s->ndup_out, key, v, err, errsz);
}

static int set_dup_err (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_filters (&s->dup_err, &s->ndup_err, key, v, err, errsz);
}

static int set_seconds (
    double *dst, const char *key, const char *v, double min, char *err, size_t errsz)
{
    return ERR_BRIDGE (err, errsz, parse_seconds (key, v, min, 1e7, dst, &e_));
}

static int set_exit_barrier (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_seconds (&s->exit_barrier_timeout, key, v, 0, err, errsz);
}

static int set_shutdown_timeout (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_seconds (&s->shutdown_timeout, key, v, 0, err, errsz);
}

static int set_handled (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return ERR_BRIDGE (err, errsz, signal_list_parse (key, v, &s->handled, &e_));
}

static int set_preempt (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return ERR_BRIDGE (err, errsz, signal_list_parse (key, v, &s->preempt, &e_));
}

static int set_signal (int *dst, const char *key, const char *v, char *err, size_t errsz)
{
    int sig = signal_parse (v);
    if (sig <= 0 || sig == SIGSTOP || sig == SIGCHLD) {
        snprintf (err,
                  errsz,
                  "%s: '%s' is not a signal (expected a name such as SIGTERM or SIGKILL, "
                  "or a number)",
                  key,
                  v);
        return -1;
    }
    *dst = sig;
    return 0;
}

static int set_stop_signal (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_signal (&s->stop_signal, key, v, err, errsz);
}

static int set_hang_signal (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_signal (&s->hang_signal, key, v, err, errsz);
}

static int set_boolean (int *dst, const char *key, const char *v, char *err, size_t errsz)
{
    if (parse_bool (v, dst) < 0) {
        snprintf (err,
                  errsz,
                  "%s: '%s' is not a boolean (expected 1, 0, true, false, yes, no)",
                  key,
                  v);
        return -1;
    }
    return 0;
}

static int set_vlr (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_boolean (&s->virtual_local_rank, key, v, err, errsz);
}

/* --bind and --numa-binding: binding_parse's message starts with the flag
 * ("--bind: ..."); drop the dashes so that the caller can name the source
 * (the flag or ELASTIC_BIND) as for every other key. */
static int set_policy (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
#if HAVE_HWLOC
    struct binding_opts o = s->binding;

    if (binding_parse (key, v, &o, err, errsz) < 0) {
        if (strncmp (err, "--", 2) == 0)
            memmove (err, err + 2, strlen (err + 2) + 1);
        return -1;
    }
    s->binding = o;
    return 0;
#else
    if (strcmp (key, "bind") == 0 && strcmp (v, "none") == 0) {
        s->binding.policy = BINDING_NONE;
        return 0;
    }
    snprintf (err,
              errsz,
              "%s: '%s' needs hwloc, which this build does not have (configure found no "
              "libhwloc)%s",
              key,
              v,
              strcmp (key, "bind") == 0 ? "; accepted: none" : "");
    return -1;
#endif
}

static int set_cpus_per_rank (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
#if HAVE_HWLOC
    return set_int (&s->binding.cpus_per_rank, key, v, 0, 65536, err, errsz);
#else
    snprintf (err,
              errsz,
              "%s: '%s' needs hwloc, which this build does not have (configure found no "
              "libhwloc)",
              key,
              v);
    return -1;
#endif
}

static int set_oversubscribe (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_boolean (&s->binding.oversubscribe, key, v, err, errsz);
}

static int set_file_timer (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_boolean (&s->file_timer, key, v, err, errsz);
}

static int set_subreaper (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_boolean (&s->subreaper, key, v, err, errsz);
}

static int set_run_id (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) > 100 || strchr (v, '/') || strcmp (v, ".") == 0 ||
        strcmp (v, "..") == 0) {
        snprintf (err,
                  errsz,
                  "%s: '%s' is not a run id (expected 1-100 characters, no '/')",
                  key,
                  v);
        return -1;
    }
    for (const char *p = v; *p; p++) {
        if (!isprint ((unsigned char)*p) || isspace ((unsigned char)*p)) {
            snprintf (err,
                      errsz,
                      "%s: '%s' contains white space or control characters",
                      key,
                      v);
            return -1;
        }
    }
    return set_string (&s->run_id, v);
}

static int set_hang_timeout (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_seconds (&s->hang_timeout, key, v, 0, err, errsz);
}

static int set_health_port (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
#if HAVE_MICROHTTPD
    return set_int (&s->health_port, key, v, -1, 65535, err, errsz);
#else
    snprintf (err,
              errsz,
              "%s: this build has no HTTP server (configure found no libmicrohttpd)",
              key);
    return -1;
#endif
}

static int set_health_addr (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (*v == '\0' || strlen (v) > 255 || strchr (v, ' ')) {
        snprintf (err, errsz, "%s: '%s' is not an address", key, v);
        return -1;
    }
    return set_string (&s->health_addr, v);
}

static int set_health_timeout (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return ERR_BRIDGE (
        err, errsz, parse_seconds (key, v, 0.01, 1e6, &s->health_timeout, &e_));
}

static int set_restart_policy (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (strcmp (v, "group") == 0)
        s->restart_policy = RESTART_GROUP;
    else if (strcmp (v, "in-place") == 0)
        s->restart_policy = RESTART_IN_PLACE;
    else {
        snprintf (err,
                  errsz,
                  "%s: '%s' is not a restart policy (accepted: in-place, group)",
                  key,
                  v);
        return -1;
    }
    return 0;
}

static int set_wireup (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (strcmp (v, "pmix") == 0)
        s->wireup = WIREUP_PMIX;
    else if (strcmp (v, "none") == 0)
        s->wireup = WIREUP_NONE;
    else if (strcmp (v, "inherit") == 0)
        s->wireup = WIREUP_INHERIT;
    else {
        snprintf (err,
                  errsz,
                  "%s: '%s' is not a wire-up (accepted: pmix, none, inherit)",
                  key,
                  v);
        return -1;
    }
    return 0;
}

static int set_mpi_btl (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    if (strcmp (v, "sm") != 0 && strcmp (v, "tcp") != 0) {
        snprintf (err, errsz, "%s: '%s' is not accepted (sm, tcp)", key, v);
        return -1;
    }
    return set_string (&s->mpi_btl, v);
}

static int set_init_timeout (
    struct elastic_agent_spec *s, const char *key, const char *v, char *err, size_t errsz)
{
    return set_seconds (&s->init_timeout, key, v, 0, err, errsz);
}

static const struct key {
    const char *name;
    setter_fn set;
} keys[] = {
    {"role", set_role},
    {"nproc-per-node", set_nproc},
    {"max-restarts", set_max_restarts},
    {"monitor-interval", set_monitor_interval},
    {"master-addr", set_master_addr},
    {"master-port", set_master_port},
    {"local-addr", set_local_addr},
    {"redirects", set_redirects},
    {"tee", set_tee},
    {"log-dir", set_log_dir},
    {"log-line-prefix-template", set_prefix},
    {"local-ranks-filter", set_rank_filter},
    {"duplicate-stdout-filters", set_dup_out},
    {"duplicate-stderr-filters", set_dup_err},
    {"event-log", set_event_log},
    {"exit-barrier-timeout", set_exit_barrier},
    {"shutdown-timeout", set_shutdown_timeout},
    {"signals-to-handle", set_handled},
    {"preempt-signals", set_preempt},
    {"stop-signal", set_stop_signal},
    {"virtual-local-rank", set_vlr},
    {"bind", set_policy},
    {"numa-binding", set_policy},
    {"cpus-per-rank", set_cpus_per_rank},
    {"oversubscribe", set_oversubscribe},
    {"run-id", set_run_id},
    {"enable-file-timer", set_file_timer},
    {"timer-file", set_timer_file},
    {"hang-timeout", set_hang_timeout},
    {"hang-signal", set_hang_signal},
    {"health-port", set_health_port},
    {"health-addr", set_health_addr},
    {"health-timeout", set_health_timeout},
    {"restart-policy", set_restart_policy},
    {"wireup", set_wireup},
    {"mpi-btl", set_mpi_btl},
    {"init-timeout", set_init_timeout},
    {"subreaper", set_subreaper},
};
#define NKEYS ((int)(sizeof (keys) / sizeof (keys[0])))

_Static_assert(sizeof (keys) / sizeof (keys[0]) <= SPEC_NKEYS, "SPEC_NKEYS too small");

static int key_index (const char *key)
{
    char norm[64];
    size_t i;

    if (!key || strlen (key) >= sizeof (norm))
        return -1;
    for (i = 0; key[i]; i++)
        norm[i] = key[i] == '_' ? '-' : key[i];
    norm[i] = '\0';
    for (int k = 0; k < NKEYS; k++)
        if (strcmp (keys[k].name, norm) == 0)
            return k;
    return -1;
}

elastic_agent_spec_t *elastic_agent_spec_create (void)
{
    struct elastic_agent_spec *s;

    if (!(s = calloc (1, sizeof (*s))))
        return NULL;
    if (!(s->role = strdup ("default")) || !(s->health_addr = strdup ("127.0.0.1"))) {
        elastic_agent_spec_destroy (s);
        return NULL;
    }
    s->nproc = 1;
    s->monitor_interval = 0.1;
    s->exit_barrier_timeout = 300;
    s->shutdown_timeout = 30;
    sigemptyset (&s->handled);
    sigaddset (&s->handled, SIGTERM);
    sigaddset (&s->handled, SIGINT);
    sigaddset (&s->handled, SIGHUP);
    sigaddset (&s->handled, SIGQUIT);
    sigaddset (&s->handled, SIGUSR1);
    sigemptyset (&s->preempt);
    sigaddset (&s->preempt, SIGTERM);
    sigaddset (&s->preempt, SIGUSR1);
    s->stop_signal = SIGTERM;
    s->hang_signal = SIGKILL;
    s->health_port = -1;
    s->health_timeout = 10;
    s->subreaper = 1;
    /* no binding unless asked: under mpirun or srun the launcher binds, and
     * two agents sharing a node would pin their workers to the same cores */
    s->binding.policy = BINDING_NONE;
    s->binding.respect_launcher = 1;
    return s;
}

void elastic_agent_spec_destroy (elastic_agent_spec_t *s)
{
    int saved = errno;

    if (s) {
        free (s->role);
        if (s->argv)
            free_list (s->argv, s->argc);
        free (s->master_addr);
        free (s->local_addr);
        free (s->log_dir);
        free (s->prefix_template);
        free (s->rank_filter);
        free_list (s->dup_out, s->ndup_out);
        free_list (s->dup_err, s->ndup_err);
        free (s->event_log);
        free (s->run_id);
        free (s->timer_file);
        free (s->health_addr);
        free (s->mpi_btl);
        for (int i = 0; i < SPEC_NKEYS; i++)
            free (s->text[i]);
        free (s);
    }
    errno = saved;
}

int elastic_agent_spec_set (elastic_agent_spec_t *s,
                            const char *key,
                            const char *value,
                            elastic_error_t *err)
{
    char msg[sizeof (err->text)] = "";
    char *copy;
    int k;

    if (!s || !key || !value) {
        errset (err, "elastic_agent_spec_set: NULL argument");
        return ELASTIC_ERR_INVAL;
    }
    if ((k = key_index (key)) < 0) {
        snprintf (msg,
                  sizeof (msg),
                  "unknown setting '%s' (see elastic-exec(1) for the list)",
                  key);
        errset (err, msg);
        return ELASTIC_ERR_INVAL;
    }
    if (keys[k].set (s, keys[k].name, value, msg, sizeof (msg)) < 0) {
        errset (err, msg[0] ? msg : "out of memory");
        return msg[0] ? ELASTIC_ERR_INVAL : ELASTIC_ERR_NOMEM;
    }
    if ((copy = strdup (value))) {
        free (s->text[k]);
        s->text[k] = copy;
    }
    return ELASTIC_OK;
}

const char *elastic_agent_spec_get (const elastic_agent_spec_t *s, const char *key)
{
    int k;

    if (!s || (k = key_index (key)) < 0)
        return NULL;
    return s->text[k];
}

/* Find prog in PATH as execvp would; copy the found path into buf. */
static int
find_program (const char *prog, char *buf, size_t size, char *why, size_t whysz)
{
    struct stat st;
    const char *path;
    char *copy, *dir, *save = NULL;
    int found = 0, saw_noexec = 0;

    if (strchr (prog, '/')) {
        if (stat (prog, &st) < 0) {
            snprintf (why, whysz, "%s", strerror (errno));
            return -1;
        }
        if (!S_ISREG (st.st_mode)) {
            snprintf (why, whysz, "not a regular file");
            return -1;
        }
        if (access (prog, X_OK) < 0) {
            snprintf (why, whysz, "not executable");
            return -1;
        }
        snprintf (buf, size, "%s", prog);
        return 0;
    }
    if (!(path = getenv ("PATH")) || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    if (!(copy = strdup (path))) {
        snprintf (why, whysz, "out of memory");
        return -1;
    }
    for (dir = strtok_r (copy, ":", &save); dir && !found;
         dir = strtok_r (NULL, ":", &save)) {
        snprintf (buf, size, "%s/%s", *dir ? dir : ".", prog);
        if (stat (buf, &st) == 0 && S_ISREG (st.st_mode)) {
            if (access (buf, X_OK) == 0)
                found = 1;
            else
                saw_noexec = 1;
        }
    }
    free (copy);
    if (!found) {
        snprintf (why, whysz, saw_noexec ? "not executable" : "not found in PATH");
        return -1;
    }
    return 0;
}

int elastic_agent_spec_set_entrypoint (elastic_agent_spec_t *s,
                                       int argc,
                                       char *const argv[],
                                       elastic_error_t *err)
{
    char path[PATH_MAX], why[128], msg[sizeof (err->text)];
    char **a;

    if (!s || argc < 1 || !argv || !argv[0] || argv[0][0] == '\0') {
        errset (err, "no entrypoint: give the program to run and its arguments");
        return ELASTIC_ERR_INVAL;
    }
    if (find_program (argv[0], path, sizeof (path), why, sizeof (why)) < 0) {
        errfmt (msg, sizeof (msg), "entrypoint '%.200s': %s", argv[0], why);
        errset (err, msg);
        return ELASTIC_ERR_INVAL;
    }
    if (!(a = calloc ((size_t)argc + 1, sizeof (*a))))
        goto nomem;
    for (int i = 0; i < argc; i++) {
        if (!(a[i] = strdup (argv[i] ? argv[i] : ""))) {
            free_list (a, i);
            goto nomem;
        }
    }
    if (s->argv)
        free_list (s->argv, s->argc);
    s->argv = a;
    s->argc = argc;
    s->fn = NULL;
    s->fn_arg = NULL;
    return ELASTIC_OK;
nomem:
    errset (err, "out of memory");
    return ELASTIC_ERR_NOMEM;
}

int elastic_agent_spec_set_function (elastic_agent_spec_t *s,
                                     elastic_agent_fn fn,
                                     void *arg,
                                     elastic_error_t *err)
{
    if (!s || !fn) {
        errset (err, "elastic_agent_spec_set_function: NULL function");
        return ELASTIC_ERR_INVAL;
    }
    if (s->argv)
        free_list (s->argv, s->argc);
    s->argv = NULL;
    s->argc = 0;
    s->fn = fn;
    s->fn_arg = arg;
    return ELASTIC_OK;
}

enum wireup spec_wireup (const struct elastic_agent_spec *s)
{
    if (s->wireup != WIREUP_AUTO)
        return s->wireup;
    if (s->wrapper)
        return WIREUP_INHERIT;
#if HAVE_PMIX
    /* a function entrypoint runs in a fork of the agent, not exec'd: it
     * cannot be a PMIx client of the agent */
    if (s->argv)
        return WIREUP_PMIX;
#endif
    return WIREUP_NONE;
}

enum restart_policy spec_restart_policy (const struct elastic_agent_spec *s)
{
    if (s->restart_policy != RESTART_AUTO)
        return s->restart_policy;
    return spec_wireup (s) == WIREUP_PMIX ? RESTART_IN_PLACE : RESTART_GROUP;
}

const char *spec_wireup_name (enum wireup w)
{
    switch (w) {
        case WIREUP_PMIX:
            return "pmix";
        case WIREUP_NONE:
            return "none";
        case WIREUP_INHERIT:
            return "inherit";
        default:
            return "auto";
    }
}

const char *spec_restart_policy_name (enum restart_policy p)
{
    switch (p) {
        case RESTART_GROUP:
            return "group";
        case RESTART_IN_PLACE:
            return "in-place";
        default:
            return "auto";
    }
}

int spec_check (const struct elastic_agent_spec *s, char *err, size_t errsz)
{
    enum wireup w = spec_wireup (s);

#if !HAVE_PMIX
    if (s->wireup == WIREUP_PMIX) {
        snprintf (
            err,
            errsz,
            "wireup: 'pmix' needs the hosted PMIx server, which this build does not "
            "have (configure found no PMIx; accepted: none, inherit)");
        return -1;
    }
#endif
    if (w == WIREUP_PMIX && s->wrapper) {
        snprintf (err,
                  errsz,
                  "wireup: 'pmix' is for agent mode (--nproc-per-node); under a launcher "
                  "the ranks are the launcher's (accepted here: inherit, none)");
        return -1;
    }
    if (w == WIREUP_PMIX && !s->argv) {
        snprintf (err,
                  errsz,
                  "wireup: 'pmix' needs a program entrypoint (a function runs in a fork "
                  "of the agent and cannot be its PMIx client; accepted: none)");
        return -1;
    }
    if (s->restart_policy == RESTART_IN_PLACE && w != WIREUP_PMIX) {
#if HAVE_PMIX
        snprintf (
            err,
            errsz,
            "restart-policy: 'in-place' needs the hosted PMIx server (--wireup pmix, "
            "agent mode); with --wireup %s only 'group' is accepted",
            spec_wireup_name (w));
#else
        snprintf (err,
                  errsz,
                  "restart-policy: 'in-place' needs the hosted PMIx server, which this "
                  "build does not have (configure found no PMIx; accepted: group)");
#endif
        return -1;
    }
    if (s->init_timeout > 0 && w != WIREUP_PMIX) {
        snprintf (
            err,
            errsz,
            "init-timeout: only the hosted PMIx server sees MPI_Init (--wireup pmix, "
            "agent mode); with --wireup %s leave it out",
            spec_wireup_name (w));
        return -1;
    }
    return 0;
}

int spec_rank_on_console (const struct elastic_agent_spec *s, int local_rank)
{
    if (!s->rank_filter)
        return 1;
    for (int i = 0; i < s->nrank_filter; i++)
        if (s->rank_filter[i] == local_rank)
            return 1;
    return 0;
}

#if HAVE_HWLOC
/* 1 if hwloc could find an NVIDIA GPU to choose: a topology file (it may
 * describe another machine's GPUs) or a /dev/nvidiaN device. */
static int gpu_possible (void)
{
    const char *xml = getenv ("HWLOC_XMLFILE");
    struct dirent *de;
    DIR *d;
    int found = 0;

    if (xml && *xml)
        return 1;
    if (!(d = opendir ("/dev")))
        return 1;
    while (!found && (de = readdir (d)))
        found = strncmp (de->d_name, "nvidia", 6) == 0 &&
                isdigit ((unsigned char)de->d_name[6]);
    closedir (d);
    return found;
}
#endif

int spec_binding_wanted (const struct elastic_agent_spec *s)
{
#if HAVE_HWLOC
    /* the topology (with its I/O devices) costs tens of milliseconds: only
     * for a placement, or for a GPU to choose when there can be one */
    return s->binding.policy != BINDING_NONE || s->binding.cpus_per_rank > 0 ||
           (s->virtual_local_rank && gpu_possible ());
#else
    (void)s;
    return 0;
#endif
}

void spec_binding_opts (const struct elastic_agent_spec *s,
                        int nlocal,
                        int nmine,
                        struct binding_opts *opts)
{
    *opts = s->binding;
    opts->virtual_local_rank = s->virtual_local_rank;
    if (nlocal > nmine)
        opts->respect_launcher = 1;
}

const char *
spec_binding_note (const struct binding_plan *plan, int slot, char *buf, size_t size)
{
#if HAVE_HWLOC
    const struct binding_slot *s = binding_plan_slot (plan, slot);

    if (s && s->kept) {
        snprintf (buf,
                  size,
                  "local rank %d keeps the launcher's binding (cpus %s): in wrapper mode "
                  "elastic-exec places ranks only when the launcher does not bind them "
                  "(mpirun --bind-to none, srun --cpu-bind=none)",
                  slot,
                  s->cpus);
        return buf;
    }
    return binding_plan_note (plan);
#else
    (void)plan;
    (void)slot;
    if (size > 0)
        buf[0] = '\0';
    return buf;
#endif
}
