/* elastic-slurm-task.c - exec a Slurm task under elastic-exec
 *
 *   elastic-slurm-task ARGS...
 *
 * spank_elastic.so makes slurmstepd exec this helper in place of the task's
 * program (argv[0]), and passes in the environment:
 *
 *   ELASTIC_SPANK_ARGV0      the task's program (its argv[0])
 *   ELASTIC_SPANK_EXEC       elastic-exec's path
 *   ELASTIC_SPANK_EXEC_ARGS  elastic-exec's flags, one per line (may be empty)
 *
 * It removes those variables and execs
 *   ELASTIC_SPANK_EXEC FLAGS... -- ELASTIC_SPANK_ARGV0 ARGS...
 * so the task's process becomes elastic-exec in wrapper mode.  Exit status
 * 2 when it was not started by the plugin, 127 when elastic-exec cannot be
 * executed (one line on stderr says why).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "elastic-slurm-task";

int main (int argc, char **argv)
{
    const char *argv0 = getenv ("ELASTIC_SPANK_ARGV0");
    const char *exec = getenv ("ELASTIC_SPANK_EXEC");
    const char *flags = getenv ("ELASTIC_SPANK_EXEC_ARGS");
    char *a0, *ex, *fl, *line, *save = NULL;
    char **nargv;
    int n = 0, nflags = 0;

    if (!argv0 || !*argv0 || !exec || !*exec) {
        fprintf (stderr,
                 "%s: ELASTIC_SPANK_ARGV0 and ELASTIC_SPANK_EXEC are not set: this "
                 "helper is run "
                 "by spank_elastic.so (srun --elastic), not by hand\n",
                 prog);
        return 2;
    }
    if (!(a0 = strdup (argv0)) || !(ex = strdup (exec)) ||
        !(fl = strdup (flags ? flags : ""))) {
        fprintf (stderr, "%s: out of memory\n", prog);
        return 127;
    }
    unsetenv ("ELASTIC_SPANK_ARGV0");
    unsetenv ("ELASTIC_SPANK_EXEC");
    unsetenv ("ELASTIC_SPANK_EXEC_ARGS");
    for (const char *p = fl; *p; p++)
        nflags += *p == '\n';
    nflags += *fl != '\0';
    /* exec, flags, "--", argv0, argv[1..argc-1], NULL */
    if (!(nargv = calloc ((size_t)(nflags + argc + 3), sizeof (*nargv)))) {
        fprintf (stderr, "%s: out of memory\n", prog);
        return 127;
    }
    nargv[n++] = ex;
    for (line = strtok_r (fl, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
        nargv[n++] = line;
    nargv[n++] = "--";
    nargv[n++] = a0;
    for (int i = 1; i < argc; i++)
        nargv[n++] = argv[i];
    nargv[n] = NULL;
    execv (ex, nargv);
    fprintf (stderr, "%s: cannot run %s: %s\n", prog, ex, strerror (errno));
    return 127;
}
