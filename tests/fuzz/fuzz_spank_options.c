/* fuzz_spank_options.c - the SPANK plugin's `--elastic=OPTIONS` value
 * (slurm/options.c, linked without Slurm)
 *
 * Input: one --elastic value per line, applied in turn to one option set
 * (later items win, a bad value leaves the set unchanged); then the
 * job's ELASTIC_* variables and elastic-exec's flags are formatted from it
 * as the plugin does.
 */
#include "fuzz.h"
#include "options.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), **line, args[4096];
    elastic_error_t err;
    struct spank_opts *o = spank_opts_create ();
    const char *name, *value;
    int n;

    if (!o)
        abort ();
    line = fuzz_lines (s, &n);
    for (int i = 0; i < n; i++)
        spank_opts_parse (o, i == 0 && !*line[0] ? NULL : line[i], &err);
    for (int i = 0; spank_opts_env (o, i, &name, &value) == 0; i++)
        ;
    spank_opts_exec_args (o, args, sizeof (args));
    spank_opts_exec_args (o, args, 16);
    spank_opts_wrap (o);
    spank_opts_snapshot_dir (o);
    spank_opts_destroy (o);
    free (line);
    free (s);
    return 0;
}
