/* fuzz_hostfile.c - elastic-mpirun's host lists: an Open MPI hostfile and a
 * --host list (src/mpirun/hostlist.c)
 *
 * Input: a hostfile's text, optionally followed by a line "%%" and a --host
 * list.  Whatever parsed is then put through the bookkeeping a relaunch
 * does with it: spares, exclusion of a failed host, promotion of spares,
 * the world-size plan, the one-line description and the hostfile written
 * for mpirun.
 */
#include <stdio.h>

#include "fuzz.h"
#include "mpirun/hostlist.h"

static FILE *devnull;

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    devnull = fopen ("/dev/null", "w");
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), *part[2], buf[1024], log[512];
    elastic_error_t err;
    struct hostlist *hl = hostlist_create ();
    int np;

    fuzz_parts (s, part, 2);
    hostlist_parse_hostfile (hl, part[0], "fuzz", &err);
    if (*part[1])
        hostlist_parse_hosts (hl, part[1], &err);
    if (hostlist_count (hl) > 0) {
        const struct host *h0 = hostlist_get (hl, 0);
        size_t n = hostlist_count (hl);
        hostlist_set_spares (hl, (int)(size % 3), &err);
        hostlist_plan_np (hl, 0, 1, 0, 0, &np, &err);
        hostlist_fail (hl, h0->name, "fuzz");
        if (n > 1)
            hostlist_match (h0->name, hostlist_get (hl, n - 1)->name);
        hostlist_replace_failed (hl, log, sizeof (log));
        hostlist_plan_np (hl, (int)size, 1, 64, (int)(size & 1), &np, &err);
        hostlist_count_state (hl, HOST_ACTIVE, &np);
    }
    hostlist_describe (hl, buf, sizeof (buf));
    hostlist_write (hl, devnull);
    hostlist_destroy (hl);
    free (s);
    return 0;
}
