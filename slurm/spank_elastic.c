/* spank_elastic.c - Slurm SPANK plugin: `srun|sbatch|salloc --elastic[=OPTIONS]`
 *
 * A thin shim (it does not link libslurm).  With --elastic:
 *
 *   - the job's environment gets the library settings given in OPTIONS
 *     (ELASTIC_SNAPSHOT_PERIOD, ELASTIC_PERSIST_PERIOD, ELASTIC_SPARE_RANKS,
 *     ELASTIC_MIN_WORLD_SIZE), ELASTIC_SNAPSHOT_DIR and ELASTIC_RUN_ID for
 *     this job id, and ELASTIC_RESTART_COUNT from Slurm's restart count,
 *     with ELASTIC_RESUME=1 once the job was requeued, so that the library
 *     resumes from its snapshot;
 *   - each task of a job step runs under `elastic-exec` in wrapper mode with
 *     the elastic-exec options given in OPTIONS (see options.h).  The batch
 *     script itself, the extern and interactive steps, MPI launch daemons
 *     (prted, orted) and the tasks of --multi-prog steps (whose per-task
 *     argv SPANK cannot reach) are not wrapped.
 *
 * How a task is wrapped.  In slurm_spank_task_init (the task's own process,
 * just before slurmstepd execs it) the plugin replaces argv[0] of the step
 * with the small helper `elastic-slurm-task` and passes the real program,
 * the elastic-exec path and its flags through ELASTIC_SPANK_* variables;
 * slurmstepd then runs the task prolog, sets TMPDIR and the user's limits
 * and execs the helper as usual, and the helper execs `elastic-exec FLAGS --
 * PROGRAM ARGS...`.  Nothing of slurmstepd's own launch is skipped.
 *
 * plugstack.conf arguments:
 *   exec=PATH          elastic-exec (default: the installed one)
 *   shim=PATH          elastic-slurm-task (default: the installed one)
 *   snapshot_dir=DIR   base of ELASTIC_SNAPSHOT_DIR when --elastic has no
 *                      snapshot-dir (default: $SLURM_SUBMIT_DIR/elastic-snapshots)
 *
 * Failure mode.  A bad --elastic value is refused where the user typed it
 * (srun, sbatch, salloc): one error line, and the job is not submitted.  On
 * the nodes (slurmd, slurmstepd, prolog/epilog) the plugin never returns an
 * error, so it can never fail a node launch or drain a node: what goes
 * wrong there is reported through slurm_error (which srun shows the user)
 * and the task runs unwrapped.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "options.h"

SPANK_PLUGIN (elastic, 1);

#ifndef ELASTIC_EXEC_PATH
#define ELASTIC_EXEC_PATH "/usr/local/bin/elastic-exec"
#endif
#ifndef ELASTIC_SHIM_PATH
#define ELASTIC_SHIM_PATH "/usr/local/libexec/elastic/elastic-slurm-task"
#endif

static struct {
    char exec[PATH_MAX];
    char shim[PATH_MAX];
    char snapshot_base[PATH_MAX];
    int given;               /* --elastic was used */
    int broken;              /* the option could not be applied here */
    struct spank_opts *opts; /* its value */
} state;

static int elastic_opt_cb (int val, const char *optarg, int remote);

static struct spank_option elastic_option = {
    "elastic",
    "[OPTIONS]",
    "Run the tasks under elastic-exec and set ELASTIC_* for the job. OPTIONS: "
    "KEY=VALUE,... with KEY one of snapshot-period, persist-period, spare-ranks, "
    "min-world-size, snapshot-dir, max-restarts, hang-timeout, shutdown-timeout, "
    "exit-barrier-timeout, event-log, log-dir, node-timeout, status-file, verbose, "
    "wrap (see elastic's "
    "doc/slurm.md)",
    2, /* the argument is optional */
    0,
    elastic_opt_cb,
};

static int copy_arg (char *dst, size_t size, const char *arg, const char *value)
{
    if (*value == '\0' || strlen (value) >= size) {
        slurm_error (
            "elastic: plugstack.conf: '%s' needs a path shorter than %zu characters",
            arg,
            size);
        return -1;
    }
    snprintf (dst, size, "%s", value);
    return 0;
}

/* Read the plugstack.conf arguments; a bad one is reported and ignored. */
static void parse_plugstack_args (int ac, char **av)
{
    snprintf (state.exec, sizeof (state.exec), "%s", ELASTIC_EXEC_PATH);
    snprintf (state.shim, sizeof (state.shim), "%s", ELASTIC_SHIM_PATH);
    state.snapshot_base[0] = '\0';
    for (int i = 0; i < ac; i++) {
        if (strncmp (av[i], "exec=", 5) == 0)
            copy_arg (state.exec, sizeof (state.exec), av[i], av[i] + 5);
        else if (strncmp (av[i], "shim=", 5) == 0)
            copy_arg (state.shim, sizeof (state.shim), av[i], av[i] + 5);
        else if (strncmp (av[i], "snapshot_dir=", 13) == 0)
            copy_arg (
                state.snapshot_base, sizeof (state.snapshot_base), av[i], av[i] + 13);
        else
            slurm_error (
                "elastic: plugstack.conf: unknown argument '%s' (accepted: exec=PATH, "
                "shim=PATH, snapshot_dir=DIR); ignored",
                av[i]);
    }
}

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context ();
    spank_err_t rc;

    parse_plugstack_args (ac, av);
    /* The option is registered in every context that sees it: srun
     * (local), sbatch/salloc (allocator) and slurmstepd (remote). */
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
        return 0;
    if (!state.opts && !(state.opts = spank_opts_create ())) {
        slurm_error ("elastic: out of memory");
        return 0;
    }
    if ((rc = spank_option_register (sp, &elastic_option)) != ESPANK_SUCCESS)
        slurm_error ("elastic: cannot register --elastic: %s", spank_strerror (rc));
    return 0;
}

/* --elastic: check the value where the user gave it; refuse a bad one. */
static int elastic_opt_cb (int val, const char *optarg, int remote)
{
    elastic_error_t err;

    (void)val;
    state.given = 1;
    if (!state.opts) {
        slurm_error ("elastic: out of memory");
        state.broken = 1;
        return remote ? 0 : -1;
    }
    if (spank_opts_parse (state.opts, optarg, &err) < 0) {
        if (remote) {
            /* never fail a launch on the node: report, run unwrapped */
            slurm_error ("elastic: --elastic=%s: %s; this job step runs without elastic",
                         optarg ? optarg : "",
                         err.text);
            state.broken = 1;
            return 0;
        }
        slurm_error ("elastic: --elastic=%s: %s", optarg ? optarg : "", err.text);
        return -1;
    }
    return 0;
}

/* Set VAR=VALUE in the job's environment; report a failure. */
static void job_setenv (spank_t sp, const char *var, const char *value, int overwrite)
{
    spank_err_t rc = spank_setenv (sp, var, value, overwrite);

    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
        slurm_error ("elastic: cannot set %s: %s", var, spank_strerror (rc));
}

/* The job's restart count: Slurm's item, or SLURM_RESTART_COUNT inherited
 * by the steps of a requeued batch job. */
static unsigned long restart_count (spank_t sp)
{
    uint32_t n = 0;
    char buf[32], *end;
    unsigned long v;

    if (spank_get_item (sp, S_SLURM_RESTART_COUNT, &n) == ESPANK_SUCCESS && n > 0)
        return n;
    if (spank_getenv (sp, "SLURM_RESTART_COUNT", buf, sizeof (buf)) != ESPANK_SUCCESS)
        return 0;
    errno = 0;
    v = strtoul (buf, &end, 10);
    return (errno || *end || end == buf) ? 0 : v;
}

/* ELASTIC_SNAPSHOT_DIR: BASE/<job id>.  A value the user exported is kept
 * unless --elastic names a snapshot-dir. */
static void set_snapshot_dir (spank_t sp)
{
    const char *base = spank_opts_snapshot_dir (state.opts);
    char path[PATH_MAX + 64], submit[PATH_MAX], buf[8];
    uint32_t jobid = 0;
    int n;

    if (spank_get_item (sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS) {
        slurm_error ("elastic: cannot get the job id; ELASTIC_SNAPSHOT_DIR not set");
        return;
    }
    if (!base) {
        if (spank_getenv (sp, "ELASTIC_SNAPSHOT_DIR", buf, sizeof (buf)) !=
            ESPANK_ENV_NOEXIST)
            return; /* the user's own (any length) */
        if (state.snapshot_base[0])
            base = state.snapshot_base;
    }
    if (base)
        n = snprintf (path, sizeof (path), "%s/%" PRIu32, base, jobid);
    else if (spank_getenv (sp, "SLURM_SUBMIT_DIR", submit, sizeof (submit)) ==
             ESPANK_SUCCESS)
        n = snprintf (
            path, sizeof (path), "%s/elastic-snapshots/%" PRIu32, submit, jobid);
    else
        n = snprintf (path, sizeof (path), "elastic-snapshots/%" PRIu32, jobid);
    if (n < 0 || (size_t)n >= sizeof (path)) {
        slurm_error ("elastic: the snapshot directory path is too long; "
                     "ELASTIC_SNAPSHOT_DIR not set");
        return;
    }
    job_setenv (sp, "ELASTIC_SNAPSHOT_DIR", path, 1);
}

/* ELASTIC_RUN_ID: the job id, unless the user exported one.  It names the
 * run whose snapshots a resumed run reads, and elastic-exec takes it as its
 * --run-id: without it each job step would be a run of its own
 * ("slurm-<job>.<step>"), so a requeued job whose steps are numbered
 * differently, or a later step of the same job, would not find the
 * snapshots. */
static void set_run_id (spank_t sp)
{
    uint32_t jobid = 0;
    char id[32];

    if (spank_get_item (sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS)
        return; /* set_snapshot_dir reported it */
    snprintf (id, sizeof (id), "%" PRIu32, jobid);
    job_setenv (sp, "ELASTIC_RUN_ID", id, 0);
}

/* Once per job step on each node (and for the batch script): the job's
 * ELASTIC_* settings. */
int slurm_spank_user_init (spank_t sp, int ac, char **av)
{
    const char *name, *value;

    (void)ac;
    (void)av;
    if (!state.given || state.broken || !spank_remote (sp))
        return 0;
    for (int i = 0; spank_opts_env (state.opts, i, &name, &value) == 0; i++)
        job_setenv (sp, name, value, 1);
    set_snapshot_dir (sp);
    set_run_id (sp);
    return 0;
}

/* ELASTIC_RESTART_COUNT and ELASTIC_RESUME for one task.  Done per task:
 * slurmstepd adds SLURM_RESTART_COUNT to the environment of a requeued
 * batch script only when it starts the task, after slurm_spank_user_init. */
static void set_restart_env (spank_t sp)
{
    char count[32];
    unsigned long restarts = restart_count (sp);

    snprintf (count, sizeof (count), "%lu", restarts);
    job_setenv (sp, "ELASTIC_RESTART_COUNT", count, 1);
    if (restarts > 0)
        job_setenv (sp, "ELASTIC_RESUME", "1", 1);
    else
        spank_unsetenv (sp, "ELASTIC_RESUME");
}

/* Report a problem of this task to the log and to the user (slurmstepd
 * copies its errors to the task's stderr, which srun shows). */
static void task_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void task_error (const char *fmt, ...)
{
    char msg[PATH_MAX * 2 + 256];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (msg, sizeof (msg), fmt, ap);
    va_end (ap);
    slurm_error ("elastic: %s", msg);
}

static const char *base_name (const char *path)
{
    const char *s = strrchr (path, '/');
    return s ? s + 1 : path;
}

/* Is this step's program one that must not be wrapped? */
static int skip_program (const char *prog)
{
    static const char *daemons[] = {
        "prted", "orted", "elastic-exec", "elastic-slurm-task"};
    const char *b = base_name (prog);

    for (size_t i = 0; i < sizeof (daemons) / sizeof (daemons[0]); i++)
        if (strcmp (b, daemons[i]) == 0)
            return 1;
    return 0;
}

/* A --multi-prog step: srun sends the configuration file's name and its
 * text as argv[0] and argv[1], and slurmstepd gives each task its own
 * argv, which SPANK cannot reach. */
static int is_multi_prog (int argc, char **argv)
{
    return argc >= 2 && argv[1] && strchr (argv[1], '\n') && access (argv[0], X_OK) < 0;
}

/* In the task's process, just before slurmstepd execs it: the restart
 * count, and the task runs through elastic-slurm-task, which execs
 * elastic-exec. */
int slurm_spank_task_init (spank_t sp, int ac, char **av)
{
    char args[8192], *shim;
    uint32_t stepid = 0;
    char **argv = NULL;
    int argc = 0;

    (void)ac;
    (void)av;
    if (!state.given || state.broken)
        return 0;
    set_restart_env (sp);
    if (!spank_opts_wrap (state.opts))
        return 0;
    if (spank_get_item (sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
        stepid == SLURM_BATCH_SCRIPT || stepid == SLURM_EXTERN_CONT ||
        stepid == SLURM_INTERACTIVE_STEP)
        return 0;
    if (spank_get_item (sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 ||
        !argv || !argv[0])
        return 0;
    if (skip_program (argv[0])) {
        slurm_info ("elastic: %s is not wrapped", argv[0]);
        return 0;
    }
    if (is_multi_prog (argc, argv)) {
        task_error (
            "--multi-prog tasks are not wrapped: start elastic-exec in the lines of %s",
            argv[0]);
        return 0;
    }
    if (access (state.shim, X_OK) < 0) {
        task_error (
            "%s: %s; the task runs without elastic-exec", state.shim, strerror (errno));
        return 0;
    }
    if (access (state.exec, X_OK) < 0) {
        task_error (
            "%s: %s; the task runs without elastic-exec", state.exec, strerror (errno));
        return 0;
    }
    if (spank_opts_exec_args (state.opts, args, sizeof (args)) < 0) {
        task_error ("too many elastic-exec options; the task runs without elastic-exec");
        return 0;
    }
    if (spank_setenv (sp, "ELASTIC_SPANK_ARGV0", argv[0], 1) != ESPANK_SUCCESS ||
        spank_setenv (sp, "ELASTIC_SPANK_EXEC", state.exec, 1) != ESPANK_SUCCESS ||
        spank_setenv (sp, "ELASTIC_SPANK_EXEC_ARGS", args, 1) != ESPANK_SUCCESS) {
        task_error (
            "cannot set the task's environment; the task runs without elastic-exec");
        return 0;
    }
    /* This is the task's own process (forked from slurmstepd): the step's
     * argv array is its private copy, and slurmstepd execs argv[0]. */
    if (!(shim = strdup (state.shim))) {
        task_error ("out of memory; the task runs without elastic-exec");
        return 0;
    }
    argv[0] = shim;
    return 0;
}

int slurm_spank_exit (spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    spank_opts_destroy (state.opts);
    state.opts = NULL;
    return 0;
}
