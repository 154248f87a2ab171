/* ompi_view.c - what an Open MPI 5 rank's MPI_Init learns of its peers
 *
 * Linked with the PMIx client library Open MPI links (its bundled one), it
 * reads what Open MPI 5.0.7's ompi_rte_init and ompi_proc_init read before
 * the first fence, in their order and as they read it (PMIX_OPTIONAL: from
 * the job data the server registered, never by asking another node):
 * the rank's hostname, local and node rank, the job and universe sizes,
 * the number of nodes, the local size, PMIX_LOCAL_PEERS of the wildcard
 * rank (the peers MPI_Init treats as on its node: shared memory), and for
 * each of them PMIX_LOCALITY_STRING (absent: "shares the node").  No fence
 * and no MPI_Init: the fence across nodes is the mesh's.  Prints
 * "key=value" lines for t5000; exits 0 when PMIx_Init worked.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

static pmix_proc_t me;

/* PMIx_Get with PMIX_OPTIONAL (Open MPI's OPAL_MODEX_RECV_VALUE_OPTIONAL). */
static pmix_value_t *get (pmix_rank_t rank, const char *key)
{
    pmix_proc_t p;
    pmix_info_t opt;
    pmix_value_t *v = NULL;
    bool yes = true;

    PMIX_LOAD_PROCID (&p, me.nspace, rank);
    PMIX_INFO_LOAD (&opt, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    if (PMIx_Get (&p, key, &opt, 1, &v) != PMIX_SUCCESS)
        v = NULL;
    PMIX_INFO_DESTRUCT (&opt);
    return v;
}

static void show (const char *what, pmix_rank_t rank, const char *key)
{
    pmix_value_t *v = get (rank, key);

    if (!v)
        printf ("%s=absent\n", what);
    else if (v->type == PMIX_STRING)
        printf ("%s=%s\n", what, v->data.string ? v->data.string : "(null)");
    else if (v->type == PMIX_UINT32)
        printf ("%s=%u\n", what, v->data.uint32);
    else if (v->type == PMIX_UINT16)
        printf ("%s=%u\n", what, (unsigned)v->data.uint16);
    else
        printf ("%s=type%d\n", what, (int)v->type);
    if (v)
        PMIX_VALUE_RELEASE (v);
}

int main (void)
{
    pmix_value_t *v;
    char *peers, *save = NULL, *tok;
    int n = 0;

    if (PMIx_Init (&me, NULL, 0) != PMIX_SUCCESS) {
        printf ("ompi_view: PMIx_Init failed\n");
        return 1;
    }
    show ("hostname", me.rank, PMIX_HOSTNAME);
    show ("local_rank", me.rank, PMIX_LOCAL_RANK);
    show ("node_rank", me.rank, PMIX_NODE_RANK);
    show ("job_size", PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    show ("univ_size", PMIX_RANK_WILDCARD, PMIX_UNIV_SIZE);
    show ("num_nodes", PMIX_RANK_WILDCARD, PMIX_NUM_NODES);
    show ("local_size", PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
    show ("rank2_hostname", 2, PMIX_HOSTNAME);
    v = get (PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS);
    if (v && v->type == PMIX_STRING && v->data.string) {
        peers = strdup (v->data.string);
        printf ("local_peers=%s\n", peers);
        for (tok = strtok_r (peers, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
            pmix_rank_t r = (pmix_rank_t)strtoul (tok, NULL, 10);
            pmix_value_t *loc;
            n++;
            if (r == me.rank)
                continue;
            /* Open MPI: a peer without a locality string shares the node */
            loc = get (r, PMIX_LOCALITY_STRING);
            printf ("peer %u: %s\n", (unsigned)r, loc ? "locality string" : "on node");
            if (loc)
                PMIX_VALUE_RELEASE (loc);
        }
        printf ("num_local_peers=%d\n", n - 1);
        free (peers);
    } else
        printf ("local_peers=absent\n");
    if (v)
        PMIX_VALUE_RELEASE (v);
    fflush (stdout);
    PMIx_Finalize (NULL, 0);
    return 0;
}
