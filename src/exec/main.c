/* main.c - elastic-exec: start, watch and restart application processes
 *
 *   elastic-exec [options] [--] program [args...]
 *
 * Agent mode (--nproc-per-node N, --standalone, or no launcher): start N
 * local workers, like `torchrun --standalone`; MPI workers are the ranks of
 * a PMIx server the agent hosts (--wireup pmix, pmix_backend.c).  Wrapper
 * mode (under mpirun or srun, without --nproc-per-node): supervise one
 * worker whose rank is this task's, and die by the worker's signal when it
 * died by one (so the launcher tells the other ranks).  Every option may
 * also come from ELASTIC_<OPTION> (upper case, '-' as '_'); flags win over
 * the environment.  Bad input prints one line and exits 2.  See
 * elastic-exec(1).
 *
 * Binding (--bind, --numa-binding, with hwloc): the plan is computed here
 * once before anything starts, so that a request that does not fit is a
 * usage error, and printed by --print-binding; the local backend computes
 * it again for every start and applies it.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "binding.h"
#include "common/log.h"
#include "elastic/agent.h"
#include "errorfile.h"
#include "launcher.h"
#include "spec.h"
#include "util.h"

#define EXIT_USAGE 2

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

static const char *prog = "elastic-exec";

static void usage (FILE *f)
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

/* Print the spec's error with its key replaced by where the value came from. */
static void __attribute__ ((noreturn))
bad_value (const char *key, const char *source, const char *text)
{
    size_t klen = strlen (key);

    if (strncmp (text, key, klen) == 0 && text[klen] == ':')
        text += klen + 1;
    else
        source = NULL;
    if (source)
        fprintf (stderr, "%s: %s:%s\n", prog, source, text);
    else
        fprintf (stderr, "%s: %s\n", prog, text);
    exit (EXIT_USAGE);
}

struct cli {
    int standalone;
    int print_binding;
    int nproc_given;
    int master_given;
    int run_id_given;
    int verbosity;
    int entry; /* index of the program in argv */
};

/* Apply one option (from a flag or the environment). */
static void apply (elastic_agent_spec_t *spec,
                   struct cli *cli,
                   const struct opt *o,
                   const char *value,
                   const char *source)
{
    elastic_error_t err;
    int b;

    if (strcmp (o->name, OPT_STANDALONE) == 0 || strcmp (o->name, OPT_PRINT) == 0) {
        if (parse_bool (value, &b) < 0) {
            fprintf (
                stderr,
                "%s: %s: '%s' is not a boolean (expected 1, 0, true, false, yes, no)\n",
                prog,
                source,
                value);
            exit (EXIT_USAGE);
        }
        if (strcmp (o->name, OPT_STANDALONE) == 0)
            cli->standalone = b;
        else
            cli->print_binding = b;
        return;
    }
    if (strcmp (o->name, OPT_VERBOSE) == 0 || strcmp (o->name, OPT_QUIET) == 0 ||
        strcmp (o->name, OPT_HELP) == 0 || strcmp (o->name, OPT_VERSION) == 0)
        return;
    if (elastic_agent_spec_set (spec, o->name, value, &err) != ELASTIC_OK)
        bad_value (o->name, source, err.text);
    if (strcmp (o->name, "nproc-per-node") == 0)
        cli->nproc_given = 1;
    if (strcmp (o->name, "master-port") == 0 || strcmp (o->name, "master-addr") == 0)
        cli->master_given = 1;
    if (strcmp (o->name, "run-id") == 0)
        cli->run_id_given = 1;
}

static void apply_environment (elastic_agent_spec_t *spec, struct cli *cli)
{
    char var[96];
    const char *v;

    for (size_t i = 0; i < sizeof (compat_env) / sizeof (compat_env[0]); i++) {
        if ((v = getenv (compat_env[i].var)) && *v)
            apply (spec,
                   cli,
                   find_long (compat_env[i].key, strlen (compat_env[i].key)),
                   v,
                   compat_env[i].var);
    }
    for (int i = 0; i < NOPTS; i++) {
        if (opts[i].arg == ARG_NONE)
            continue;
        env_name (opts[i].name, var, sizeof (var));
        if ((v = getenv (var)) && *v)
            apply (spec, cli, &opts[i], v, var);
    }
}

static void
parse_flags (int argc, char **argv, elastic_agent_spec_t *spec, struct cli *cli)
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
            if (!(o = find_long (a + 2, len))) {
                fprintf (stderr,
                         "%s: unknown option '%.*s' (see %s --help)\n",
                         prog,
                         (int)len + 2,
                         a,
                         prog);
                exit (EXIT_USAGE);
            }
            snprintf (source, sizeof (source), "--%s", o->name);
            if (eq) {
                if (o->arg == ARG_NONE) {
                    fprintf (stderr, "%s: --%s takes no value\n", prog, o->name);
                    exit (EXIT_USAGE);
                }
                value = eq + 1;
            }
        } else {
            if (!(o = find_short (a[1]))) {
                fprintf (stderr,
                         "%s: unknown option '-%c' (see %s --help)\n",
                         prog,
                         a[1],
                         prog);
                exit (EXIT_USAGE);
            }
            snprintf (source, sizeof (source), "-%c", o->short_name);
            if (a[2] != '\0') {
                if (o->arg != ARG_REQUIRED) {
                    fprintf (stderr,
                             "%s: -%c takes no value (in '%s')\n",
                             prog,
                             o->short_name,
                             a);
                    exit (EXIT_USAGE);
                }
                value = a + 2;
            }
        }
        if (o->arg == ARG_REQUIRED && !value) {
            if (i + 1 >= argc) {
                fprintf (stderr, "%s: %s needs a value\n", prog, source);
                exit (EXIT_USAGE);
            }
            value = argv[++i];
        }
        if (o->arg == ARG_BOOL && !value)
            value = "1";
        if (strcmp (o->name, OPT_HELP) == 0) {
            usage (stdout);
            exit (0);
        }
        if (strcmp (o->name, OPT_VERSION) == 0) {
            printf ("%s (elastic) %s\n", prog, PACKAGE_VERSION);
            exit (0);
        }
        if (strcmp (o->name, OPT_VERBOSE) == 0) {
            cli->verbosity++;
            continue;
        }
        if (strcmp (o->name, OPT_QUIET) == 0) {
            cli->verbosity = -1;
            continue;
        }
        apply (spec, cli, o, value, source);
    }
    cli->entry = i;
}

#if HAVE_HWLOC
/* CUDA_VISIBLE_DEVICES under --virtual-local-rank when hwloc chose no GPU,
 * as the worker gets it (group.c): the local_rank-th entry of ours, or the
 * local rank. */
static void vlr_device (int local_rank, char *buf, size_t size)
{
    const char *p = getenv ("CUDA_VISIBLE_DEVICES");

    snprintf (buf, size, "%d", local_rank);
    if (!p || !*p)
        return;
    for (int i = 0; p && i < local_rank; i++)
        if ((p = strchr (p, ',')))
            p++;
    if (p && *p)
        snprintf (buf, size, "%.*s", (int)strcspn (p, ","), p);
}
#endif

/* Compute the binding plan the workers will get (li: wrapper mode, this
 * task's place among the launcher's local tasks; NULL: agent mode) and,
 * with print, write one line per worker of this agent with its
 * CUDA_VISIBLE_DEVICES.  Returns 0, or EXIT_USAGE after one line on stderr
 * when the plan cannot be made. */
static int binding_preflight (const struct elastic_agent_spec *spec,
                              const struct launcher_info *li,
                              int print)
{
#if HAVE_HWLOC
    struct binding_plan *plan;
    struct binding_opts o;
    char err[1024], line[2048], dev[64];
    int n = spec->nproc, base = li ? li->local_rank : 0, rank0 = li ? li->rank : 0;
    int nlocal = li ? li->local_size : n;

    if (base + n > nlocal)
        nlocal = base + n;
    spec_binding_opts (spec, nlocal, n, &o);
    if (!(plan = binding_plan_create (&o, nlocal, err, sizeof (err)))) {
        fprintf (stderr, "%s: %s\n", prog, err);
        return EXIT_USAGE;
    }
    if (!print && !binding_plan_is_this_system (plan)) {
        for (int i = 0; i < n; i++) {
            const struct binding_slot *s = binding_plan_slot (plan, base + i);
            if (s && s->cpus[0] && !s->kept) {
                fprintf (stderr,
                         "%s: HWLOC_XMLFILE=%s is another machine's topology: its plan "
                         "can be printed (--print-binding) but not applied here (use "
                         "--bind none to choose GPUs only, or HWLOC_THISSYSTEM=1 to bind "
                         "by it)\n",
                         prog,
                         getenv ("HWLOC_XMLFILE") ? getenv ("HWLOC_XMLFILE") : "");
                binding_plan_destroy (plan);
                return EXIT_USAGE;
            }
        }
    }
    if (print) {
        const char *note = spec_binding_note (plan, base, err, sizeof (err));
        if (note[0])
            fprintf (stderr, "%s: note: %s\n", prog, note);
        for (int i = 0; i < n; i++) {
            const struct binding_slot *s = binding_plan_slot (plan, base + i);
            if (!s || binding_format (plan, base + i, rank0 + i, line, sizeof (line)) < 0)
                continue;
            if (s->cuda_visible_devices[0])
                printf ("%s CUDA_VISIBLE_DEVICES=%s\n", line, s->cuda_visible_devices);
            else if (spec->virtual_local_rank) {
                vlr_device (base + i, dev, sizeof (dev));
                printf ("%s CUDA_VISIBLE_DEVICES=%s\n", line, dev);
            } else
                printf ("%s CUDA_VISIBLE_DEVICES unchanged\n", line);
        }
        fflush (stdout);
    }
    binding_plan_destroy (plan);
    return 0;
#else
    (void)spec;
    (void)li;
    if (print) {
        fprintf (stderr,
                 "%s: --print-binding needs hwloc, which this build does not have "
                 "(configure found no libhwloc)\n",
                 prog);
        return EXIT_USAGE;
    }
    return 0;
#endif
}

/* Wrapper mode: die by the signal that killed the worker, so that the
 * launcher (PRRTE) sees a death by signal and tells the other ranks (an
 * exit 128+N is a normal termination to it, and ULFM survivors wait
 * forever).  No core dump for this re-raise.  Returns only if the signal
 * did not end the process. */
static void die_by_signal (int sig)
{
    struct rlimit no_core = {0, 0};
    struct sigaction dfl;
    sigset_t set;

    fflush (NULL);
    setrlimit (RLIMIT_CORE, &no_core);
    memset (&dfl, 0, sizeof (dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction (sig, &dfl, NULL);
    sigemptyset (&set);
    sigaddset (&set, sig);
    sigprocmask (SIG_UNBLOCK, &set, NULL);
    raise (sig);
}

/* What a rank's failure means when Slurm's PMIx plugin wired the job up. */
#define SLURM_PMIX_NOTE                                                                  \
    "Slurm's PMIx plugin ends the whole job step when one of its processes is "          \
    "lost, so the ranks can neither be restarted nor recover in place; for that, "       \
    "run elastic-mpirun inside the allocation (see doc/slurm.md)"

static void late_signal (int sig)
{
    (void)sig;
}

/* The agent blocks the signals it handles while it runs and restores the
 * mask when it returns.  A preemption notice can arrive twice (Slurm
 * signals every process of the step, the agent relays it as well): one
 * that lands after the run must not kill this process before it reports
 * the status the run decided.  A handler that does nothing is reset to
 * the default by exec, so the workers are not affected; signals ignored
 * on entry stay ignored. */
static void catch_late_signals (const elastic_agent_spec_t *spec)
{
    struct sigaction sa, old;

    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = late_signal;
    sigemptyset (&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember (&spec->handled, sig) != 1 &&
            sigismember (&spec->preempt, sig) != 1)
            continue;
        if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction (sig, &sa, NULL);
    }
}

int main (int argc, char **argv)
{
    elastic_agent_spec_t *spec;
    elastic_agent_t *agent = NULL;
    elastic_agent_result_t *result = NULL;
    struct launcher_info li;
    struct cli cli = {0};
    elastic_error_t err = {{0}};
    char msg[256], own_error_file[PATH_MAX] = "";
    const char *v;
    int wrapper = 0, rc, status = EXIT_USAGE, reraise = 0, slurm_pmix = 0;

    if (!(spec = elastic_agent_spec_create ())) {
        fprintf (stderr, "%s: out of memory\n", prog);
        return 1;
    }
    /* An enclosing agent's error file (we are its worker): read it before
     * our own ELASTIC_* settings are applied. */
    if (((v = getenv ("ELASTIC_ERROR_FILE")) && *v) ||
        ((v = getenv ("TORCHELASTIC_ERROR_FILE")) && *v))
        snprintf (own_error_file, sizeof (own_error_file), "%s", v);
    apply_environment (spec, &cli);
    parse_flags (argc, argv, spec, &cli);
    log_init (prog,
              cli.verbosity < 0    ? LOG_ERROR
              : cli.verbosity == 0 ? LOG_WARN
              : cli.verbosity == 1 ? LOG_INFO
                                   : LOG_DEBUG);

    if (cli.entry >= argc && !cli.print_binding) {
        fprintf (stderr,
                 "%s: no program to run (usage: %s [options] program [args...])\n",
                 prog,
                 prog);
        goto out;
    }

    /* wrapper mode: a launcher started us, and no agent-mode flag was given */
    if (!cli.standalone && !cli.nproc_given) {
        int found = launcher_detect (&li, msg, sizeof (msg));
        if (found < 0) {
            fprintf (stderr, "%s: %s\n", prog, msg);
            goto out;
        }
        wrapper = found;
    } else if (!cli.print_binding && launcher_detect (&li, msg, sizeof (msg)) > 0 &&
               li.size > 1)
        log_warn (
            "agent mode under %s with %d tasks: each task runs its own single-node group "
            "(multi-node rendezvous is not in this version)",
            li.name,
            li.size);
    if (cli.print_binding) {
        status = binding_preflight (spec, wrapper ? &li : NULL, 1);
        goto out;
    }
    if (elastic_agent_spec_set_entrypoint (
            spec, argc - cli.entry, argv + cli.entry, &err) != ELASTIC_OK) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        goto out;
    }
    spec->wrapper = wrapper;
    if (spec_check (spec, msg, sizeof (msg)) < 0) {
        fprintf (stderr, "%s: --%s\n", prog, msg);
        goto out;
    }
    if (spec_binding_wanted (spec) && binding_preflight (spec, wrapper ? &li : NULL, 0))
        goto out;
    if (wrapper && !cli.run_id_given && li.job_id[0]) {
        char id[101];
        size_t n = 0;
        for (const char *p = li.job_id; *p && n < sizeof (id) - 1; p++)
            id[n++] =
                (*p == '/' || isspace ((unsigned char)*p) || !isprint ((unsigned char)*p))
                    ? '_'
                    : *p;
        id[n] = '\0';
        elastic_agent_spec_set (spec, "run-id", id, NULL);
    }
    slurm_pmix = wrapper && strcmp (li.name, "Slurm") == 0 && getenv ("PMIX_RANK");
    if (slurm_pmix && spec->max_restarts > 0) {
        if (li.rank == 0)
            log_warn ("--max-restarts %d has no effect under srun --mpi=pmix: %s",
                      spec->max_restarts,
                      SLURM_PMIX_NOTE);
        spec->max_restarts = 0;
    }
    if (!(agent = elastic_agent_create (spec, &err))) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        goto out;
    }
    if (wrapper) {
        struct elastic_agent_rdzv_info info = {
            .group_rank = li.rank,
            .group_world_size = li.size,
            .rank_base = li.rank,
            .world_size = li.size,
            .local_rank_base = li.local_rank,
            .node_local_size = li.local_size,
            .master_port = cli.master_given ? 0 : -1,
        };
        if (elastic_agent_set_static_rendezvous (agent, &info, &err) != ELASTIC_OK) {
            fprintf (stderr, "%s: %s\n", prog, err.text);
            goto out;
        }
        log_info ("wrapper mode (%s): rank %d of %d, local rank %d of %d",
                  li.name,
                  li.rank,
                  li.size,
                  li.local_rank,
                  li.local_size);
    }

    catch_late_signals (spec);
    rc = elastic_agent_run (agent, &result, &err);
    if (rc != ELASTIC_OK) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        status = rc == ELASTIC_ERR_INVAL ? EXIT_USAGE : 1;
    } else {
        int root_rank;
        status = elastic_agent_result_exit_status (result);
        if (elastic_agent_result_failures (result, &root_rank) > 0 &&
            elastic_agent_result_state (result) == ELASTIC_AGENT_FAILED) {
            struct elastic_agent_failure f;
            elastic_agent_result_report (result, STDERR_FILENO);
            if (own_error_file[0] &&
                elastic_agent_result_failure (result, root_rank, &f) == ELASTIC_OK) {
                char text[1024];
                snprintf (text, sizeof (text), "rank %d: %s", f.rank, f.message);
                if (errorfile_write (own_error_file, text, f.timestamp) < 0)
                    log_warn ("cannot write %s: %s", own_error_file, strerror (errno));
            }
            if (slurm_pmix)
                fprintf (stderr,
                         "%s: rank %d failed under srun --mpi=pmix: %s\n",
                         prog,
                         li.rank,
                         SLURM_PMIX_NOTE);
            if (wrapper &&
                elastic_agent_result_failure (result, root_rank, &f) == ELASTIC_OK &&
                f.signal > 0 && status == 128 + f.signal &&
                signal_default_terminates (f.signal))
                reraise = f.signal;
        }
    }
out:
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
    if (reraise) {
        log_info ("the worker died by %s: so does this wrapper", signal_name (reraise));
        die_by_signal (reraise);
    }
    return status;
}
