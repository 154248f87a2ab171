/* options.h - elastic-mpirun's command line: its own options, the mpirun
 * options it must know about, and the rest passed through untouched
 *
 *   elastic-mpirun [elastic options] [mpirun options] [--] program [args]
 *
 * Elastic options and mpirun options may be mixed.  An mpirun option is
 * recognised from a built-in table of Open MPI 4/5 options (so that its
 * value is not mistaken for the program); an option in neither table is an
 * error (a typo of an elastic option must not reach mpirun and be relaunched
 * over and over).  --pass ARG hands an unlisted option to mpirun verbatim.
 */
#ifndef ELASTIC_MPIRUN_OPTIONS_H
#define ELASTIC_MPIRUN_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"

enum tristate { TRI_AUTO = -1, TRI_NO = 0, TRI_YES = 1 };

struct options {
    /* elastic-mpirun's own */
    const char *mpirun; /* NULL: ELASTIC_MPIRUN, else the configured one */
    int max_relaunches;
    int spares;         /* -1: not given */
    int np_min, np_max; /* 0: not given */
    int wrap;
    const char *exec; /* elastic-exec to wrap ranks in (NULL: search) */
    char **exec_opts; /* options for elastic-exec */
    int nexec_opts;
    int ulfm;                       /* enum tristate */
    const char *detector;           /* auto, off, PERIOD[,TIMEOUT] */
    double det_period, det_timeout; /* parsed from detector; 0: off/auto */
    int det_mode;                   /* 0 auto, 1 off, 2 explicit */
    const char *run_dir;
    int resume; /* enum tristate */
    double relaunch_delay;
    double suspend_timeout;
    double init_timeout; /* MPI_Init's deadline after a rank died; 0: off */
    int dry_run;
    int verbose; /* -1 quiet, 0, 1 (-v), 2 (-vv) */

    /* mpirun options that elastic-mpirun acts on */
    int np;       /* -n/-np/-c; 0: not given */
    int npernode; /* -N; 0: not given */
    const char *hostfile;
    char *hosts;       /* --host lists joined with ',' */
    int oversubscribe; /* --oversubscribe or --map-by ...:OVERSUBSCRIBE */
    int bind_given;
    const char *with_ft; /* --with-ft value */
    char **mca_keys;     /* keys of --mca/--gmca given by the user */
    int nmca_keys;

    /* everything else for mpirun, in order */
    char **pass;
    int npass;

    /* the program and its arguments */
    char **app;
    int napp;
};

/* Parse argv into o (which it initialises).  On bad input returns -1 with
 * one line in err; returns 1 if --help or --version was handled (printed to
 * stdout), 0 otherwise. */
int options_parse (struct options *o, int argc, char **argv, elastic_error_t *err);

/* Free what options_parse allocated. */
void options_free (struct options *o);

/* Whether the user gave --mca KEY (any of --mca/--gmca/-mca) for key. */
int options_has_mca (const struct options *o, const char *key);

/* Number of arguments the mpirun option `name` (without dashes) takes:
 * 0, 1 or 2, or -1 if it is not a known mpirun option. */
int mpirun_option_arity (const char *name);

/* Print the usage text to f. */
void options_usage (FILE *f);

#endif /* ELASTIC_MPIRUN_OPTIONS_H */
