/* print-binding.c - show, or apply, the binding plan of a node's local ranks
 *
 *   print-binding [--bind POLICY | --numa-binding X] [--cpus-per-rank N]
 *                 [--virtual-local-rank] [--oversubscribe] [--rank-offset R]
 *                 --nproc N
 *       prints one line per local rank (binding_format) followed by
 *       CUDA_VISIBLE_DEVICES=VALUE or CUDA_VISIBLE_DEVICES unchanged;
 *       the plan's note, if any, goes to stderr as "print-binding: note: ...".
 *   print-binding ... --nproc N --apply L -- CMD [ARGS...]
 *       forks a child that applies local rank L's binding, sets
 *       CUDA_VISIBLE_DEVICES as planned, and execs CMD; exits with CMD's
 *       status (1 when the plan or the binding fails, 127 when CMD cannot
 *       be executed).
 *
 * HWLOC_XMLFILE selects another machine's topology (plans only; binding
 * by it needs HWLOC_THISSYSTEM=1).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binding.h"
#include "common/parse.h"

static const char *prog = "print-binding";

static void usage (FILE *f)
{
    fprintf (f,
             "usage: %s [--bind none|core|l3|numa|socket|auto | --numa-binding "
             "node|socket|exclusive|core-complex]\n"
             "       [--cpus-per-rank N] [--virtual-local-rank] [--oversubscribe] "
             "[--rank-offset R]\n"
             "       --nproc N [--apply LOCAL_RANK -- CMD [ARGS...]]\n",
             prog);
}

/* "--opt=value" or "--opt value": the value, advancing *i; NULL if absent. */
static const char *optval (int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen (name);

    if (strncmp (argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0') {
        if (*i + 1 >= argc) {
            fprintf (stderr, "%s: %s needs a value\n", prog, name);
            exit (2);
        }
        return argv[++*i];
    }
    return NULL;
}

static int run_applied (struct binding_plan *plan, int nproc, int local, char **cmd)
{
    const struct binding_slot *s = binding_plan_slot (plan, local);
    elastic_error_t err;
    int status;
    pid_t pid;

    if (!s) {
        fprintf (stderr,
                 "%s: --apply %d: not a local rank of this plan (accepted: 0..%d)\n",
                 prog,
                 local,
                 nproc - 1);
        return 1;
    }
    fflush (stdout);
    if ((pid = fork ()) < 0) {
        fprintf (stderr, "%s: fork: %s\n", prog, strerror (errno));
        return 1;
    }
    if (pid == 0) {
        if (binding_apply (plan, local, &err) < 0) {
            fprintf (stderr, "%s: %s\n", prog, err.text);
            _exit (1);
        }
        if (s->cuda_visible_devices[0])
            setenv ("CUDA_VISIBLE_DEVICES", s->cuda_visible_devices, 1);
        execvp (cmd[0], cmd);
        fprintf (stderr, "%s: cannot execute %s: %s\n", prog, cmd[0], strerror (errno));
        _exit (127);
    }
    while (waitpid (pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf (stderr, "%s: waitpid: %s\n", prog, strerror (errno));
            return 1;
        }
    }
    if (WIFEXITED (status))
        return WEXITSTATUS (status);
    return 128 + WTERMSIG (status);
}

int main (int argc, char **argv)
{
    struct binding_opts opts;
    struct binding_plan *plan;
    elastic_error_t err;
    char line[2048];
    long nproc = 0, apply = -1, offset = 0, v;
    char **cmd = NULL;
    const char *val;
    int rc = 0;

    binding_opts_init (&opts);
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--") == 0) {
            cmd = argv + i + 1;
            break;
        }
        if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0) {
            usage (stdout);
            return 0;
        }
        if ((val = optval (argc, argv, &i, "--bind"))) {
            if (binding_parse ("--bind", val, &opts, &err) < 0)
                goto badarg;
        } else if ((val = optval (argc, argv, &i, "--numa-binding"))) {
            if (binding_parse ("--numa-binding", val, &opts, &err) < 0)
                goto badarg;
        } else if ((val = optval (argc, argv, &i, "--cpus-per-rank"))) {
            if (parse_long ("--cpus-per-rank", val, 1, 1 << 20, &v, &err) < 0)
                goto badarg;
            opts.cpus_per_rank = (int)v;
        } else if ((val = optval (argc, argv, &i, "--nproc"))) {
            if (parse_long ("--nproc", val, 1, 65536, &nproc, &err) < 0)
                goto badarg;
        } else if ((val = optval (argc, argv, &i, "--rank-offset"))) {
            if (parse_long ("--rank-offset", val, 0, 1 << 30, &offset, &err) < 0)
                goto badarg;
        } else if ((val = optval (argc, argv, &i, "--apply"))) {
            if (parse_long ("--apply", val, 0, 65535, &apply, &err) < 0)
                goto badarg;
        } else if (strcmp (argv[i], "--virtual-local-rank") == 0)
            opts.virtual_local_rank = 1;
        else if (strcmp (argv[i], "--oversubscribe") == 0)
            opts.oversubscribe = 1;
        else {
            fprintf (stderr,
                     "%s: unknown argument '%s' (see --help for the accepted options)\n",
                     prog,
                     argv[i]);
            return 2;
        }
    }
    if (nproc < 1) {
        fprintf (stderr, "%s: --nproc N is required (the number of local ranks)\n", prog);
        return 2;
    }
    if (apply >= 0 && (!cmd || !cmd[0])) {
        fprintf (stderr, "%s: --apply %ld needs a command after --\n", prog, apply);
        return 2;
    }
    if (!(plan = binding_plan_create (&opts, (int)nproc, &err))) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        return 1;
    }
    if (binding_plan_note (plan)[0])
        fprintf (stderr, "%s: note: %s\n", prog, binding_plan_note (plan));
    if (apply >= 0)
        rc = run_applied (plan, (int)nproc, (int)apply, cmd);
    else {
        for (int l = 0; l < nproc; l++) {
            const struct binding_slot *s = binding_plan_slot (plan, l);
            if (binding_format (plan, l, (int)offset + l, line, sizeof (line)) < 0) {
                fprintf (stderr, "%s: cannot format local rank %d\n", prog, l);
                rc = 1;
                break;
            }
            if (s->cuda_visible_devices[0])
                printf ("%s CUDA_VISIBLE_DEVICES=%s\n", line, s->cuda_visible_devices);
            else
                printf ("%s CUDA_VISIBLE_DEVICES unchanged\n", line);
        }
    }
    binding_plan_destroy (plan);
    return rc;
badarg:
    fprintf (stderr, "%s: %s\n", prog, err.text);
    return 2;
}
