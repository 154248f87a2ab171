/* gpu_plan.c - how an NCCL communicator follows a world change (pure)
 *
 * No CUDA, no NCCL, no MPI: the decision and the exclude list every
 * survivor computes from the same agreed membership, so that they pass
 * NCCL identical lists (tests/t1031-nccl-plan.c, and the MPI test t1032
 * with a real SIGKILL).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "gpu.h"

static int index_of (const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return i;
    return -1;
}

enum nccl_plan nccl_plan_decide (
    const int *old, int nold, const int *nw, int nnew, int failure, int *excl, int *nexcl)
{
    int prev = -1, same;

    *nexcl = 0;
    if (nold <= 0 || nnew <= 0)
        return NCCL_NEW; /* none to keep or shrink */
    /* every new member must be an old one, in the old order: NCCL ranks
     * the child in the parent's order without the excluded ranks */
    for (int i = 0; i < nnew; i++) {
        int k = index_of (old, nold, nw[i]);
        if (k < 0 || k <= prev)
            return NCCL_NEW; /* a newcomer (a spare, a grow) or a new order */
        prev = k;
    }
    same = nnew == nold;
    if (same && !failure)
        return NCCL_KEEP;
    /* after a failure even the same members shrink: the parent may have
     * work in flight that waits on a dead peer (revoked, then shrunk with
     * NCCL_SHRINK_ABORT) */
    for (int k = 0; k < nold; k++)
        if (index_of (nw, nnew, old[k]) < 0)
            excl[(*nexcl)++] = k;
    /* the same members after a failure (another communicator's rank died,
     * or the application passed an NCCL error): NCCL 2.28 refuses a
     * shrink that excludes nobody ("invalid argument", seen on an H200
     * with 2.28.9), so the parent is revoked and aborted and a new one
     * made */
    if (*nexcl == 0)
        return NCCL_NEW;
    return NCCL_SHRINK;
}

uint64_t nccl_plan_hash (enum nccl_plan plan, const int *excl, int nexcl)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)plan;

    h = (h ^ (uint64_t)nexcl) * 1099511628211ULL;
    for (int i = 0; i < nexcl; i++)
        h = (h ^ (uint64_t)(uint32_t)excl[i]) * 1099511628211ULL;
    return h;
}

const char *nccl_plan_name (enum nccl_plan plan)
{
    switch (plan) {
        case NCCL_KEEP:
            return "keep";
        case NCCL_SHRINK:
            return "shrink";
        case NCCL_NEW:
            return "new";
    }
    return "?";
}
