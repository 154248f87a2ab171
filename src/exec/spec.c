/* spec.c - the agent's settings: create, set by name, check together
 *
 * A setting is set by its name (elastic_agent_spec_set); the names, their
 * parsers and their flags and variables are the table of settings.c.
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
#include <sys/stat.h>
#include <unistd.h>

#include "settings.h"
#include "spec.h"
#include "util.h"

void spec_strv_free (char **a, int n)
{
    for (int i = 0; i < n; i++)
        free (a[i]);
    free (a);
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
    s->node_timeout = 2.0;
    s->node_rank = -1;
    s->rdzv_last_call = -1;
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
    s->start_timeout = 60;
    s->spawn_timeout = 60;
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
            spec_strv_free (s->argv, s->argc);
        free (s->master_addr);
        free (s->local_addr);
        free (s->log_dir);
        free (s->prefix_template);
        free (s->rank_filter);
        spec_strv_free (s->dup_out, s->ndup_out);
        spec_strv_free (s->dup_err, s->ndup_err);
        free (s->event_log);
        free (s->status_file);
        free (s->rdzv_endpoint);
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
    const struct setting *st;
    elastic_error_t e = {{0}};
    char *copy;
    int k;

    if (!s || !key || !value)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_agent_spec_set: NULL argument");
    if (!(st = settings_find_key (key)))
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "unknown setting '%s' (see elastic-exec(1) for the list)",
                         key);
    if (st->set (s, st->name, value, &e) < 0) {
        if (!e.text[0])
            return errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
        return errcodef (err, ELASTIC_ERR_INVAL, "%s", e.text);
    }
    k = (int)(st - settings_table);
    if ((copy = strdup (value))) {
        free (s->text[k]);
        s->text[k] = copy;
    }
    return ELASTIC_OK;
}

const char *elastic_agent_spec_get (const elastic_agent_spec_t *s, const char *key)
{
    const struct setting *st;

    if (!s || !(st = settings_find_key (key)))
        return NULL;
    return s->text[st - settings_table];
}

/* Find prog in PATH as execvp would; copy the found path into buf.
 * Returns 0, or -1 with why (what is wrong with it). */
static int find_program (const char *prog, char *buf, size_t size, elastic_error_t *why)
{
    struct stat st;
    const char *path;
    char *copy, *dir, *save = NULL;
    int found = 0, saw_noexec = 0;

    if (strchr (prog, '/')) {
        if (stat (prog, &st) < 0)
            return errprintf (why, "%s", strerror (errno));
        if (!S_ISREG (st.st_mode))
            return errprintf (why, "not a regular file");
        if (access (prog, X_OK) < 0)
            return errprintf (why, "not executable");
        snprintf (buf, size, "%s", prog);
        return 0;
    }
    if (!(path = getenv ("PATH")) || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    if (!(copy = strdup (path)))
        return errprintf (why, "out of memory");
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
    if (!found)
        return errprintf (why, "%s", saw_noexec ? "not executable" : "not found in PATH");
    return 0;
}

int elastic_agent_spec_set_entrypoint (elastic_agent_spec_t *s,
                                       int argc,
                                       char *const argv[],
                                       elastic_error_t *err)
{
    char path[PATH_MAX];
    elastic_error_t why;
    char **a;

    if (!s || argc < 1 || !argv || !argv[0] || argv[0][0] == '\0')
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "no entrypoint: give the program to run and its arguments");
    if (find_program (argv[0], path, sizeof (path), &why) < 0)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "entrypoint '%.200s': %s", argv[0], why.text);
    if (!(a = calloc ((size_t)argc + 1, sizeof (*a))))
        goto nomem;
    for (int i = 0; i < argc; i++) {
        if (!(a[i] = strdup (argv[i] ? argv[i] : ""))) {
            spec_strv_free (a, i);
            goto nomem;
        }
    }
    if (s->argv)
        spec_strv_free (s->argv, s->argc);
    s->argv = a;
    s->argc = argc;
    s->fn = NULL;
    s->fn_arg = NULL;
    return ELASTIC_OK;
nomem:
    return errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
}

int elastic_agent_spec_set_function (elastic_agent_spec_t *s,
                                     elastic_agent_fn fn,
                                     void *arg,
                                     elastic_error_t *err)
{
    if (!s || !fn)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_agent_spec_set_function: NULL function");
    if (s->argv)
        spec_strv_free (s->argv, s->argc);
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

int spec_check (const struct elastic_agent_spec *s, elastic_error_t *err)
{
    enum wireup w = spec_wireup (s);

#if !HAVE_PMIX
    if (s->wireup == WIREUP_PMIX) {
        errprintf (
            err,
            "wireup: 'pmix' needs the hosted PMIx server, which this build does not "
            "have (configure found no PMIx; accepted: none, inherit)");
        return -1;
    }
#endif
    if (w == WIREUP_PMIX && s->wrapper) {
        errprintf (
            err,
            "wireup: 'pmix' is for agent mode (--nproc-per-node); under a launcher "
            "the ranks are the launcher's (accepted here: inherit, none)");
        return -1;
    }
    if (w == WIREUP_PMIX && !s->argv && !s->hosting) {
        errprintf (err,
                   "wireup: 'pmix' needs a program entrypoint (a function runs in a fork "
                   "of the agent and cannot be its PMIx client; accepted: none)");
        return -1;
    }
    if (s->restart_policy == RESTART_IN_PLACE && w != WIREUP_PMIX) {
#if HAVE_PMIX
        errprintf (
            err,
            "restart-policy: 'in-place' needs the hosted PMIx server (--wireup pmix, "
            "agent mode); with --wireup %s only 'group' is accepted",
            spec_wireup_name (w));
#else
        errprintf (err,
                   "restart-policy: 'in-place' needs the hosted PMIx server, which this "
                   "build does not have (configure found no PMIx; accepted: group)");
#endif
        return -1;
    }
    if (s->init_timeout > 0 && w != WIREUP_PMIX) {
        errprintf (
            err,
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
