/* fuzz_exec_cli.c - elastic-exec's flags and ELASTIC_* variables
 * (src/exec/cli.c) and every setting's value parser behind them
 * (src/exec/spec.c: counts, durations, signal lists, --redirects/--tee
 * maps, rank lists, prefix templates, binding policies, addresses, ...)
 *
 * Input: VAR=VALUE lines (only ELASTIC_* and TORCHELASTIC_* variables are
 * set), a line "%%", then one argument per line (argv[0] is
 * elastic-exec).  A fresh spec takes the environment and the flags as
 * elastic-exec's main does; when they parse, the settings are checked
 * against each other, read back by key and formatted; every variable is
 * unset before the next input.
 */
#include <stdio.h>

#include "cli.h"
#include "fuzz.h"
#include "spec.h"
#include "template.h"

static const char *const keys[] = {
    "role",
    "nproc-per-node",
    "max-restarts",
    "monitor-interval",
    "master-addr",
    "master-port",
    "redirects",
    "tee",
    "log-line-prefix-template",
    "local-ranks-filter",
    "duplicate-stdout-filters",
    "signals-to-handle",
    "preempt-signals",
    "stop-signal",
    "bind",
    "cpus-per-rank",
    "run-id",
    "hang-timeout",
    "health-port",
    "restart-policy",
    "wireup",
    "mpi-btl",
    "init-timeout",
};

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    /* --help and --version print to stdout */
    if (!freopen ("/dev/null", "w", stdout))
        abort ();
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), *part[2], **env, **args, **argv;
    elastic_error_t err;
    char buf[2048];
    int nenv, nargs;
    elastic_agent_spec_t *spec;
    struct cli cli;

    fuzz_parts (s, part, 2);
    env = fuzz_lines (part[0], &nenv);
    args = fuzz_lines (part[1], &nargs);
    for (int i = 0; i < nenv; i++) {
        char *eq = strchr (env[i], '=');
        if (!eq || eq == env[i] ||
            (strncmp (env[i], "ELASTIC_", 8) != 0 &&
             strncmp (env[i], "TORCHELASTIC_", 13) != 0)) {
            env[i] = NULL;
            continue;
        }
        *eq = '\0';
        setenv (env[i], eq + 1, 1);
    }
    if (!(argv = calloc ((size_t)nargs + 2, sizeof (*argv))))
        abort ();
    argv[0] = (char *)"elastic-exec";
    for (int i = 0; i < nargs; i++)
        argv[i + 1] = args[i];
    if (!(spec = elastic_agent_spec_create ()))
        abort ();
    if (cli_parse (nargs + 1, argv, spec, &cli, &err) == 0) {
        spec_check (spec, &err);
        for (size_t k = 0; k < sizeof (keys) / sizeof (keys[0]); k++)
            elastic_agent_spec_get (spec, keys[k]);
        stdmap_format (&spec->redirects, buf, sizeof (buf));
        stdmap_format (&spec->tee, buf, 16);
        if (spec->prefix_template)
            template_expand (spec->prefix_template, spec->role, 3, 7, "node-1", buf, 64);
        spec_rank_on_console (spec, 1);
        spec_wireup (spec);
        spec_restart_policy (spec);
    }
    elastic_agent_spec_destroy (spec);
    for (int i = 0; i < nenv; i++)
        if (env[i])
            unsetenv (env[i]);
    free (argv);
    free (args);
    free (env);
    free (s);
    return 0;
}
