/* cli.c - elastic-exec's command line and its ELASTIC_* variables
 *
 * One table of options: each is a long flag (some with a short one or
 * torchrun's spelling), a spec key (elastic_agent_spec_set) and a variable
 * ELASTIC_<OPTION>; flags win over the environment.  Split out of main.c
 * so that the parser can be tested and fuzzed (tests/fuzz/fuzz_exec_cli)
 * without exiting.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* One line into err; returns -1. */
static int usage_err (char *err, size_t errsz, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static int usage_err (char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (err, errsz, fmt, ap);
    va_end (ap);
    return -1;
}

enum { ARG_NONE = 0, ARG_REQUIRED = 1, ARG_BOOL = 2 };

struct opt {
    const char *name;  /* long flag without dashes, and the spec key */
    char short_name;   /* 0 if none */
    int arg;           /* ARG_* */
    const char *alias; /* another long spelling (torchrun's), or NULL */
    const char *help;
};

/* Flags that are not spec settings. */
#define OPT_STANDALONE "standalone"
#define OPT_HELP       "help"
#define OPT_VERSION    "version"
#define OPT_VERBOSE    "verbose"
#define OPT_QUIET      "quiet"
#define OPT_PRINT      "print-binding"

static const struct opt opts[] = {
    {"nproc-per-node",
     0,
     ARG_REQUIRED,
     NULL,
     "workers to start here: N, auto, cpu or gpu (agent mode)"},
    {"standalone",
     0,
     ARG_BOOL,
     NULL,
     "agent mode on this node only (the default without a launcher)"},
    {"role", 0, ARG_REQUIRED, NULL, "the workers' role name (default: default)"},
    {"max-restarts",
     0,
     ARG_REQUIRED,
     NULL,
     "restarts of the worker group before giving up (default: 0)"},
    {"monitor-interval",
     0,
     ARG_REQUIRED,
     NULL,
     "longest wait between watchdog checks (default: 0.1 s)"},
    {"master-addr",
     0,
     ARG_REQUIRED,
     NULL,
     "MASTER_ADDR for the workers (default: 127.0.0.1)"},
    {"master-port",
     0,
     ARG_REQUIRED,
     NULL,
     "MASTER_PORT for the workers (default: a free port per attempt)"},
    {"local-addr",
     0,
     ARG_REQUIRED,
     NULL,
     "this node's address (MASTER_ADDR when it hosts rank 0)"},
    {"run-id",
     0,
     ARG_REQUIRED,
     "rdzv-id",
     "the run's id (default: random, or the launcher's job id)"},
    {"redirects",
     'r',
     ARG_REQUIRED,
     NULL,
     "worker output to log files: 0-3 or a map like 0:3,1:0"},
    {"tee",
     't',
     ARG_REQUIRED,
     NULL,
     "worker output to log files and the console: 0-3 or a map"},
    {"log-dir",
     0,
     ARG_REQUIRED,
     NULL,
     "directory for <run-id>/attempt_N/<local_rank>/ logs"},
    {"log-line-prefix-template",
     0,
     ARG_REQUIRED,
     NULL,
     "console prefix: ${role_name} ${local_rank} ${rank} ${hostname}"},
    {"local-ranks-filter",
     0,
     ARG_REQUIRED,
     NULL,
     "local ranks whose output reaches the console, e.g. 0,1"},
    {"duplicate-stdout-filters",
     0,
     ARG_REQUIRED,
     NULL,
     "copy console stdout lines containing any of these to filtered_stdout.log"},
    {"duplicate-stderr-filters",
     0,
     ARG_REQUIRED,
     NULL,
     "copy console stderr lines containing any of these to filtered_stderr.log"},
    {"event-log", 0, ARG_REQUIRED, NULL, "append JSON-lines events to this file"},
    {"exit-barrier-timeout",
     0,
     ARG_REQUIRED,
     NULL,
     "wait for the other agents at exit (default: 300 s)"},
    {"shutdown-timeout",
     0,
     ARG_REQUIRED,
     NULL,
     "grace before SIGKILL when stopping workers (default: 30 s)"},
    {"signals-to-handle",
     0,
     ARG_REQUIRED,
     NULL,
     "signals relayed to the workers (default: SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1)"},
    {"preempt-signals",
     0,
     ARG_REQUIRED,
     NULL,
     "signals that mean preemption: exit 75 (default: SIGTERM,SIGUSR1)"},
    {"stop-signal",
     0,
     ARG_REQUIRED,
     NULL,
     "signal that stops a worker group for a restart (default: SIGTERM)"},
    {"wireup",
     0,
     ARG_REQUIRED,
     NULL,
     "MPI wire-up: pmix (host the ranks' PMIx server; agent mode's default), none, "
     "or inherit (the launcher's; wrapper mode's default)"},
    {"restart-policy",
     0,
     ARG_REQUIRED,
     NULL,
     "in-place (MPI survivors go on; default with --wireup pmix) or group (stop "
     "all, start all)"},
    {"mpi-btl",
     0,
     ARG_REQUIRED,
     NULL,
     "the ranks' Open MPI transport with --wireup pmix: sm or tcp (default: sm)"},
    {"init-timeout",
     0,
     ARG_REQUIRED,
     NULL,
     "restart the group when MPI_Init takes longer (--wireup pmix; default: 0, off)"},
    {"virtual-local-rank",
     0,
     ARG_BOOL,
     NULL,
     "LOCAL_RANK=0 and only the worker's own GPU visible"},
    {"bind",
     0,
     ARG_REQUIRED,
     NULL,
     "bind workers: none (default), core, l3, numa, socket or auto"},
    {"numa-binding",
     0,
     ARG_REQUIRED,
     NULL,
     "torchrun's: node, socket, exclusive or core-complex (a GPU per worker)"},
    {"cpus-per-rank",
     0,
     ARG_REQUIRED,
     NULL,
     "cores per worker with --bind (default: the cores divided evenly)"},
    {"oversubscribe",
     0,
     ARG_BOOL,
     NULL,
     "let workers share cores when they outnumber them"},
    {"print-binding",
     0,
     ARG_BOOL,
     NULL,
     "print each worker's cpus, NUMA node and GPU, and exit"},
    {"enable-file-timer",
     0,
     ARG_BOOL,
     NULL,
     "serve torchelastic's file-timer watchdog FIFO"},
    {"timer-file",
     0,
     ARG_REQUIRED,
     NULL,
     "path of the file-timer FIFO (default: in the run directory)"},
    {"hang-timeout",
     0,
     ARG_REQUIRED,
     NULL,
     "kill a worker whose libelastic heartbeat stops this long (0: off)"},
    {"hang-signal", 0, ARG_REQUIRED, NULL, "signal for a hung worker (default: SIGKILL)"},
    {"health-port",
     0,
     ARG_REQUIRED,
     NULL,
     "serve /healthz and /metrics on this port (0: any free port)"},
    {"health-addr",
     0,
     ARG_REQUIRED,
     NULL,
     "address of the health server (default: 127.0.0.1)"},
    {"health-timeout",
     0,
     ARG_REQUIRED,
     NULL,
     "/healthz is 503 when the agent's loop stalls this long (default: 10 s)"},
    {"verbose", 'v', ARG_NONE, NULL, "more diagnostics (twice: debug)"},
    {"quiet", 'q', ARG_NONE, NULL, "errors only"},
    {"version", 'V', ARG_NONE, NULL, "print the version and exit"},
    {"help", 'h', ARG_NONE, NULL, "print this help and exit"},
};
#define NOPTS ((int)(sizeof (opts) / sizeof (opts[0])))

/* torchelastic's variable names for the same settings */
static const struct {
    const char *var;
    const char *key;
} compat_env[] = {
    {"TORCHELASTIC_ENABLE_FILE_TIMER", "enable-file-timer"},
    {"TORCHELASTIC_TIMER_FILE", "timer-file"},
    {"TORCHELASTIC_HEALTH_CHECK_PORT", "health-port"},
};

static const char *const prog = "elastic-exec";

void cli_usage (FILE *f)
{
    fprintf (
        f,
        "Usage: %s [options] [--] program [args...]\n"
        "Start, watch and restart workers (agent mode: --nproc-per-node N; wrapper "
        "mode:\n"
        "one worker per task under mpirun or srun).  Each option can also be given as\n"
        "ELASTIC_<OPTION> in the environment (e.g. ELASTIC_MAX_RESTARTS=3).\n\n",
        prog);
    for (int i = 0; i < NOPTS; i++) {
        char flag[96];
        int n = 0;
        if (opts[i].short_name)
            n = snprintf (flag, sizeof (flag), "-%c, ", opts[i].short_name);
        snprintf (flag + n,
                  sizeof (flag) - (size_t)n,
                  "--%s%s",
                  opts[i].name,
                  opts[i].arg == ARG_REQUIRED ? " V" : "");
        fprintf (f, "  %-32s %s\n", flag, opts[i].help);
    }
    fprintf (
        f, "\nSee elastic-exec(1) for the worker environment, exit codes and events.\n");
}

/* The environment variable for an option: ELASTIC_MAX_RESTARTS. */
static void env_name (const char *name, char *buf, size_t size)
{
    size_t n = (size_t)snprintf (buf, size, "ELASTIC_");
    for (const char *p = name; *p && n + 1 < size; p++)
        buf[n++] = *p == '-' ? '_' : (char)toupper ((unsigned char)*p);
    buf[n] = '\0';
}

static const struct opt *find_long (const char *name, size_t len)
{
    char norm[64];

    if (len >= sizeof (norm))
        return NULL;
    for (size_t i = 0; i < len; i++)
        norm[i] = name[i] == '_' ? '-' : name[i];
    norm[len] = '\0';
    for (int i = 0; i < NOPTS; i++)
        if (strcmp (opts[i].name, norm) == 0 ||
            (opts[i].alias && strcmp (opts[i].alias, norm) == 0))
            return &opts[i];
    return NULL;
}

static const struct opt *find_short (char c)
{
    for (int i = 0; i < NOPTS; i++)
        if (opts[i].short_name == c)
            return &opts[i];
    return NULL;
}

/* The spec's error with its key replaced by where the value came from. */
static int
bad_value (const char *key, const char *source, const char *text, char *err, size_t errsz)
{
    size_t klen = strlen (key);

    if (strncmp (text, key, klen) == 0 && text[klen] == ':')
        snprintf (err, errsz, "%s:%s", source, text + klen + 1);
    else
        snprintf (err, errsz, "%s", text);
    return -1;
}

/* Apply one option (from a flag or the environment).  Returns 0, or -1
 * with err. */
static int apply (elastic_agent_spec_t *spec,
                  struct cli *cli,
                  const struct opt *o,
                  const char *value,
                  const char *source,
                  char *err,
                  size_t errsz)
{
    elastic_error_t e;
    int b;

    if (strcmp (o->name, OPT_STANDALONE) == 0 || strcmp (o->name, OPT_PRINT) == 0) {
        if (parse_bool (value, &b) < 0)
            return usage_err (
                err,
                errsz,
                "%s: '%s' is not a boolean (expected 1, 0, true, false, yes, "
                "no)",
                source,
                value);
        if (strcmp (o->name, OPT_STANDALONE) == 0)
            cli->standalone = b;
        else
            cli->print_binding = b;
        return 0;
    }
    if (strcmp (o->name, OPT_VERBOSE) == 0 || strcmp (o->name, OPT_QUIET) == 0 ||
        strcmp (o->name, OPT_HELP) == 0 || strcmp (o->name, OPT_VERSION) == 0)
        return 0;
    if (elastic_agent_spec_set (spec, o->name, value, &e) != ELASTIC_OK)
        return bad_value (o->name, source, e.text, err, errsz);
    if (strcmp (o->name, "nproc-per-node") == 0)
        cli->nproc_given = 1;
    if (strcmp (o->name, "master-port") == 0 || strcmp (o->name, "master-addr") == 0)
        cli->master_given = 1;
    if (strcmp (o->name, "run-id") == 0)
        cli->run_id_given = 1;
    return 0;
}

static int
apply_environment (elastic_agent_spec_t *spec, struct cli *cli, char *err, size_t errsz)
{
    char var[96];
    const char *v;

    for (size_t i = 0; i < sizeof (compat_env) / sizeof (compat_env[0]); i++) {
        if ((v = getenv (compat_env[i].var)) && *v &&
            apply (spec,
                   cli,
                   find_long (compat_env[i].key, strlen (compat_env[i].key)),
                   v,
                   compat_env[i].var,
                   err,
                   errsz) < 0)
            return -1;
    }
    for (int i = 0; i < NOPTS; i++) {
        if (opts[i].arg == ARG_NONE)
            continue;
        env_name (opts[i].name, var, sizeof (var));
        if ((v = getenv (var)) && *v &&
            apply (spec, cli, &opts[i], v, var, err, errsz) < 0)
            return -1;
    }
    return 0;
}

static int parse_flags (int argc,
                        char **argv,
                        elastic_agent_spec_t *spec,
                        struct cli *cli,
                        char *err,
                        size_t errsz)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        const struct opt *o;
        char source[96];

        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (a[1] == '-') {
            const char *eq = strchr (a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen (a + 2);
            if (!(o = find_long (a + 2, len)))
                return usage_err (err,
                                  errsz,
                                  "unknown option '%.*s' (see %s --help)",
                                  (int)len + 2,
                                  a,
                                  prog);
            snprintf (source, sizeof (source), "--%s", o->name);
            if (eq) {
                if (o->arg == ARG_NONE)
                    return usage_err (err, errsz, "--%s takes no value", o->name);
                value = eq + 1;
            }
        } else {
            if (!(o = find_short (a[1])))
                return usage_err (
                    err, errsz, "unknown option '-%c' (see %s --help)", a[1], prog);
            snprintf (source, sizeof (source), "-%c", o->short_name);
            if (a[2] != '\0') {
                if (o->arg != ARG_REQUIRED)
                    return usage_err (
                        err, errsz, "-%c takes no value (in '%s')", o->short_name, a);
                value = a + 2;
            }
        }
        if (o->arg == ARG_REQUIRED && !value) {
            if (i + 1 >= argc)
                return usage_err (err, errsz, "%s needs a value", source);
            value = argv[++i];
        }
        if (o->arg == ARG_BOOL && !value)
            value = "1";
        if (strcmp (o->name, OPT_HELP) == 0) {
            cli_usage (stdout);
            return 1;
        }
        if (strcmp (o->name, OPT_VERSION) == 0) {
            printf ("%s (elastic) %s\n", prog, PACKAGE_VERSION);
            return 1;
        }
        if (strcmp (o->name, OPT_VERBOSE) == 0) {
            cli->verbosity++;
            continue;
        }
        if (strcmp (o->name, OPT_QUIET) == 0) {
            cli->verbosity = -1;
            continue;
        }
        if (apply (spec, cli, o, value, source, err, errsz) < 0)
            return -1;
    }
    cli->entry = i;
    return 0;
}

int cli_parse (int argc,
               char **argv,
               elastic_agent_spec_t *spec,
               struct cli *cli,
               char *err,
               size_t errsz)
{
    memset (cli, 0, sizeof (*cli));
    if (apply_environment (spec, cli, err, errsz) < 0)
        return -1;
    return parse_flags (argc, argv, spec, cli, err, errsz);
}
