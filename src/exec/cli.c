/* cli.c - elastic-exec's command line and its ELASTIC_* variables
 *
 * Both walk the table of settings (settings.h): each row is a long flag
 * (some with a short one or torchrun's spelling), a spec key
 * (elastic_agent_spec_set) and a variable ELASTIC_<OPTION>; flags win
 * over the environment.  The rows without a spec key are acted on here.
 * Split out of main.c so that the parser can be tested and fuzzed
 * (tests/fuzz/fuzz_exec_cli) without exiting.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "settings.h"
#include "util.h"

/* Flags that are not spec settings. */
#define OPT_STANDALONE "standalone"
#define OPT_HELP       "help"
#define OPT_VERSION    "version"
#define OPT_VERBOSE    "verbose"
#define OPT_QUIET      "quiet"
#define OPT_PRINT      "print-binding"
#define OPT_JOIN       "join"

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
    for (int i = 0; i < settings_count; i++) {
        const struct setting *o = &settings_table[i];
        char flag[96];
        int n = 0;

        if (!o->help)
            continue;
        if (o->short_flag)
            n = snprintf (flag, sizeof (flag), "-%c, ", o->short_flag);
        snprintf (flag + n,
                  sizeof (flag) - (size_t)n,
                  "--%s%s",
                  o->name,
                  o->arg == SETTING_VALUE ? " V" : "");
        fprintf (f, "  %-32s %s\n", flag, o->help);
    }
    fprintf (
        f, "\nSee elastic-exec(1) for the worker environment, exit codes and events.\n");
}

/* The spec's error with its key replaced by where the value came from. */
static int
bad_value (const char *key, const char *source, const char *text, elastic_error_t *err)
{
    size_t klen = strlen (key);

    if (strncmp (text, key, klen) == 0 && text[klen] == ':')
        return errprintf (err, "%s:%s", source, text + klen + 1);
    return errprintf (err, "%s", text);
}

/* A row without a spec key: --standalone, --print-binding (booleans from a
 * flag or the environment), --join (its value); the others act in parse_flags.  Returns
 * 0, or -1 with err. */
static int apply_cli_only (struct cli *cli,
                           const struct setting *o,
                           const char *value,
                           const char *source,
                           elastic_error_t *err)
{
    int b;

    if (strcmp (o->name, OPT_JOIN) == 0) {
        cli->join = value; /* checked by meshjob_join_parse */
        return 0;
    }
    if (strcmp (o->name, OPT_STANDALONE) != 0 && strcmp (o->name, OPT_PRINT) != 0)
        return 0;
    if (parse_bool (value, &b) < 0)
        return errprintf (err,
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

/* Apply one setting (from a flag or the environment).  Returns 0, or -1
 * with err. */
static int apply (elastic_agent_spec_t *spec,
                  struct cli *cli,
                  const struct setting *o,
                  const char *value,
                  const char *source,
                  elastic_error_t *err)
{
    elastic_error_t e;

    if (!o->set)
        return apply_cli_only (cli, o, value, source, err);
    if (elastic_agent_spec_set (spec, o->name, value, &e) != ELASTIC_OK)
        return bad_value (o->name, source, e.text, err);
    if (strcmp (o->name, "nproc-per-node") == 0)
        cli->nproc_given = 1;
    if (strcmp (o->name, "master-port") == 0 || strcmp (o->name, "master-addr") == 0)
        cli->master_given = 1;
    if (strcmp (o->name, "run-id") == 0)
        cli->run_id_given = 1;
    return 0;
}

/* torchelastic's variables first, then ELASTIC_*, each in table order. */
static int
apply_environment (elastic_agent_spec_t *spec, struct cli *cli, elastic_error_t *err)
{
    const char *v;

    for (int i = 0; i < settings_count; i++) {
        const struct setting *o = &settings_table[i];
        if (o->compat_env && (v = getenv (o->compat_env)) && *v &&
            apply (spec, cli, o, v, o->compat_env, err) < 0)
            return -1;
    }
    for (int i = 0; i < settings_count; i++) {
        const struct setting *o = &settings_table[i];
        if (o->env && (v = getenv (o->env)) && *v &&
            apply (spec, cli, o, v, o->env, err) < 0)
            return -1;
    }
    return 0;
}

/* The flag at argv[*i] (advanced past a separate value): its row in *op,
 * its value (NULL for a flag without one) in *valuep and its spelling for
 * messages in source.  Returns 0, or -1 with err. */
static int next_flag (int argc,
                      char **argv,
                      int *i,
                      const struct setting **op,
                      const char **valuep,
                      char *source,
                      size_t size,
                      elastic_error_t *err)
{
    const char *a = argv[*i], *value = NULL;
    const struct setting *o;

    if (a[1] == '-') {
        const char *eq = strchr (a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen (a + 2);
        if (!(o = settings_find_flag (a + 2, len)))
            return errprintf (
                err, "unknown option '%.*s' (see %s --help)", (int)len + 2, a, prog);
        snprintf (source, size, "--%s", o->name);
        if (eq) {
            if (o->arg == SETTING_NONE)
                return errprintf (err, "--%s takes no value", o->name);
            value = eq + 1;
        }
    } else {
        if (!(o = settings_find_short (a[1])))
            return errprintf (err, "unknown option '-%c' (see %s --help)", a[1], prog);
        snprintf (source, size, "-%c", o->short_flag);
        if (a[2] != '\0') {
            if (o->arg != SETTING_VALUE)
                return errprintf (err, "-%c takes no value (in '%s')", o->short_flag, a);
            value = a + 2;
        }
    }
    if (o->arg == SETTING_VALUE && !value) {
        if (*i + 1 >= argc)
            return errprintf (err, "%s needs a value", source);
        value = argv[++*i];
    }
    if (o->arg == SETTING_BOOL && !value)
        value = "1";
    *op = o;
    *valuep = value;
    return 0;
}

static int parse_flags (int argc,
                        char **argv,
                        elastic_agent_spec_t *spec,
                        struct cli *cli,
                        elastic_error_t *err)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        const struct setting *o = NULL;
        char source[96];

        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (next_flag (argc, argv, &i, &o, &value, source, sizeof (source), err) < 0)
            return -1;
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
        if (apply (spec, cli, o, value, source, err) < 0)
            return -1;
    }
    cli->entry = i;
    return 0;
}

int cli_parse (int argc,
               char **argv,
               elastic_agent_spec_t *spec,
               struct cli *cli,
               elastic_error_t *err)
{
    memset (cli, 0, sizeof (*cli));
    if (apply_environment (spec, cli, err) < 0)
        return -1;
    return parse_flags (argc, argv, spec, cli, err);
}
