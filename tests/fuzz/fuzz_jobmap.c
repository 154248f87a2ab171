/* fuzz_jobmap.c - the job map a mesh member computes from its launcher's
 * environment (src/exec/jobmap.c): a Slurm task environment, one
 * NAME=value per line, read in both launch shapes (one task per rank, and
 * one per node with 4 ranks each), then described
 *
 * Input: the environment lines.
 */
#include "fuzz.h"
#include "exec/jobmap.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), *env[65], *save = NULL, *line, buf[2048];
    elastic_error_t err;
    int n = 0;

    for (line = strtok_r (s, "\n", &save); line && n < 64;
         line = strtok_r (NULL, "\n", &save))
        env[n++] = line;
    env[n] = NULL;
    for (int shape = 0; shape <= 4; shape += 4) {
        struct jobmap_opts o = {.nproc_per_node = shape};
        struct jobmap *m = jobmap_from_slurm (&o, env, &err);
        if (m) {
            jobmap_describe (m, buf, sizeof (buf));
            for (int r = 0; r < m->world_size && r < 4096; r++)
                if (jobmap_rank_node (m, r) < 0 || jobmap_local_rank (m, r) < 0)
                    abort (); /* every rank is placed */
        }
        jobmap_destroy (m);
    }
    free (s);
    return 0;
}
