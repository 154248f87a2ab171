/* cli.h - elastic-exec's command line and ELASTIC_* variables (cli.c, over
 * the table of settings.h) */
#ifndef ELASTIC_EXEC_CLI_H
#define ELASTIC_EXEC_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"
#include "elastic/agent.h"

/* What the command line says beyond the spec's settings. */
struct cli {
    int standalone;
    int print_binding;
    int nproc_given;
    int master_given;
    int run_id_given;
    int verbosity;
    const char *join; /* --join JOBID[.STEP] (meshjob.h), or NULL */
    int entry;        /* index of the program in argv */
};

/* Apply the ELASTIC_* (and torchelastic's TORCHELASTIC_*) variables, then
 * the flags of argv, to spec, and fill in cli (which it initialises).
 * Returns 0; 1 when --help or --version was printed to stdout (the caller
 * exits 0); -1 with one line in err on bad usage (the caller exits 2). */
int cli_parse (int argc,
               char **argv,
               elastic_agent_spec_t *spec,
               struct cli *cli,
               elastic_error_t *err);

/* Print the usage text to f. */
void cli_usage (FILE *f);

#endif /* ELASTIC_EXEC_CLI_H */
