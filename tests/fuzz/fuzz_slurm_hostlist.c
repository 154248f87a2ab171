/* fuzz_slurm_hostlist.c - the Slurm allocation as elastic-mpirun reads it
 * (src/mpirun/hostlist.c over src/common/hostlist.c): a count list such as
 * SLURM_TASKS_PER_NODE "2(x3),1", the hosts of `scontrol show hostnames`
 * or a compact host list ("n[1-3,5],gpu07", hostlist_expand), and the node
 * states of `sinfo -h -N -o "%N %t"`
 *
 * Input: COUNTS, a line "%%", HOSTNAMES (one per line), a line "%%",
 * SINFO text.
 */
#include "fuzz.h"
#include "mpirun/hostlist.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), *part[3], buf[1024];
    elastic_error_t err;
    int counts[64], np;
    char **names;
    struct hostlist *hl = hostlist_create ();

    fuzz_parts (s, part, 3);
    slurm_expand_counts (part[0], counts, 64, &err);
    if (hostlist_expand (part[1], 4096, &names, &err) >= 0)
        hostlist_names_free (names);
    if (hostlist_add_slurm (hl, part[1], part[0], &err) < 0)
        hostlist_add_slurm (hl, part[1], NULL, &err);
    hostlist_mark_slurm_down (hl, part[2]);
    hostlist_plan_np (hl, 0, 1, 0, 0, &np, &err);
    hostlist_describe (hl, buf, sizeof (buf));
    hostlist_destroy (hl);
    free (s);
    return 0;
}
