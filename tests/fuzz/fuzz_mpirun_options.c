/* fuzz_mpirun_options.c - elastic-mpirun's command line
 * (src/mpirun/options.c): its own options, the mpirun options it knows,
 * --pass, and the program
 *
 * Input: one argument per line (argv[0] is "elastic-mpirun").
 */
#include <stdio.h>

#include "fuzz.h"
#include "mpirun/options.h"

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    /* --help and --version print to stdout */
    if (!freopen ("/dev/null", "w", stdout))
        abort ();
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), **line, **argv;
    elastic_error_t err;
    struct options o;
    int n;

    line = fuzz_lines (s, &n);
    if (!(argv = calloc ((size_t)n + 2, sizeof (*argv))))
        abort ();
    argv[0] = (char *)"elastic-mpirun";
    for (int i = 0; i < n; i++)
        argv[i + 1] = line[i];
    if (options_parse (&o, n + 1, argv, &err) >= 0)
        options_has_mca (&o, "btl");
    options_free (&o); /* what it allocated, on success or not */
    free (argv);
    free (line);
    free (s);
    return 0;
}
