/* pmix_fence_hold.c - a PMIx client for a fence that never completes
 *
 * Every rank connects (PMIx_Init) and prints "rank R connected"; every rank
 * but HOLD_RANK (environment, default the last) then enters a fence over
 * the namespace, which cannot complete while HOLD_RANK waits outside it.
 * A stop then kills ranks inside the fence: the state of a preemption
 * that comes between MPI_Init's fences (t5017).
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main (void)
{
    pmix_proc_t me, all;
    pmix_value_t *v = NULL;
    int hold = -1;

    if (PMIx_Init (&me, NULL, 0) != PMIX_SUCCESS)
        return 1;
    if (getenv ("HOLD_RANK"))
        hold = atoi (getenv ("HOLD_RANK"));
    else {
        pmix_proc_t wild;
        PMIX_LOAD_PROCID (&wild, me.nspace, PMIX_RANK_WILDCARD);
        if (PMIx_Get (&wild, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS && v)
            hold = (int)v->data.uint32 - 1;
    }
    printf ("rank %u connected\n", me.rank);
    fflush (stdout);
    if ((int)me.rank == hold)
        for (;;)
            pause ();
    PMIX_LOAD_PROCID (&all, me.nspace, PMIX_RANK_WILDCARD);
    PMIx_Fence (&all, 1, NULL, 0);
    printf ("rank %u: the fence completed\n", me.rank);
    PMIx_Finalize (NULL, 0);
    return 0;
}
