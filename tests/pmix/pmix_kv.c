/* pmix_kv.c - a PMIx client that reads keys of ranks on other nodes
 *
 * Every rank puts "kv.dmodex" = 1000 + rank, commits and fences WITHOUT
 * collecting data, then gets its next rank's key: for a rank of another
 * node PMIx asks the host's direct_modex (the mesh transport fetches it
 * from the server hosting that rank).  Then it puts "kv.collect" =
 * 2000 + rank, fences collecting data (the fence hands every node's blob
 * to every server) and gets the key of the rank half the job away.
 * Prints "kv: rank R ok dmodex=P collect=Q" or "kv: rank R FAIL ...";
 * exit 0 on success.
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>

static int put_fence (const pmix_proc_t *me, const char *key, int value, int collect)
{
    pmix_value_t v;
    pmix_proc_t all;
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    PMIX_VALUE_LOAD (&v, &value, PMIX_INT);
    if ((rc = PMIx_Put (PMIX_GLOBAL, key, &v)) != PMIX_SUCCESS ||
        (rc = PMIx_Commit ()) != PMIX_SUCCESS)
        return rc;
    PMIX_LOAD_PROCID (&all, me->nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD (&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    return PMIx_Fence (&all, 1, collect ? &info : NULL, collect ? 1 : 0);
}

static int get_int (const pmix_proc_t *me, int rank, const char *key, int *out)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    pmix_status_t rc;

    PMIX_LOAD_PROCID (&p, me->nspace, (pmix_rank_t)rank);
    if ((rc = PMIx_Get (&p, key, NULL, 0, &v)) != PMIX_SUCCESS)
        return rc;
    *out = v->type == PMIX_INT ? v->data.integer : -1;
    PMIX_VALUE_RELEASE (v);
    return PMIX_SUCCESS;
}

int main (void)
{
    pmix_proc_t me, wild;
    pmix_value_t *v = NULL;
    int size, a = -1, b = -1, pa, pb, rc;

    if ((rc = PMIx_Init (&me, NULL, 0)) != PMIX_SUCCESS) {
        printf ("kv: FAIL PMIx_Init: %s\n", PMIx_Error_string (rc));
        return 1;
    }
    PMIX_LOAD_PROCID (&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get (&wild, PMIX_JOB_SIZE, NULL, 0, &v) != PMIX_SUCCESS) {
        printf ("kv: rank %u FAIL no job size\n", me.rank);
        return 1;
    }
    size = (int)v->data.uint32;
    PMIX_VALUE_RELEASE (v);
    pa = ((int)me.rank + 1) % size;
    pb = ((int)me.rank + size / 2) % size;
    if ((rc = put_fence (&me, "kv.dmodex", 1000 + (int)me.rank, 0)) != PMIX_SUCCESS ||
        (rc = get_int (&me, pa, "kv.dmodex", &a)) != PMIX_SUCCESS ||
        (rc = put_fence (&me, "kv.collect", 2000 + (int)me.rank, 1)) != PMIX_SUCCESS ||
        (rc = get_int (&me, pb, "kv.collect", &b)) != PMIX_SUCCESS) {
        printf ("kv: rank %u FAIL %s\n", me.rank, PMIx_Error_string (rc));
        PMIx_Finalize (NULL, 0);
        return 1;
    }
    if (a != 1000 + pa || b != 2000 + pb) {
        printf ("kv: rank %u FAIL dmodex %d=%d collect %d=%d\n", me.rank, pa, a, pb, b);
        PMIx_Finalize (NULL, 0);
        return 1;
    }
    printf ("kv: rank %u ok dmodex=%d collect=%d\n", me.rank, pa, pb);
    fflush (stdout);
    PMIx_Finalize (NULL, 0);
    return 0;
}
