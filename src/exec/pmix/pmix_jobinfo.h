/* pmix_jobinfo.h - what a namespace tells Open MPI about its job
 *
 * The info array for PMIx_server_register_nspace of a job whose ranks all
 * run on this node: job-level sizes and maps (PMIX_JOB_SIZE, PMIX_UNIV_SIZE,
 * PMIX_NODE_MAP, PMIX_PROC_MAP, PMIX_NUM_NODES, PMIX_LOCAL_PEERS, the
 * session directories, PMIX_NODE_OVERSUBSCRIBED), an app array, a node
 * array, and one PMIX_PROC_INFO_ARRAY per rank (PMIX_RANK first, local and
 * node ranks, the rank's session directory).
 *
 * A job of several nodes (a job map of more than one node, exec/jobmap.h)
 * is registered as PRRTE does (src/prted/pmix/pmix_server_register_fns.c),
 * with the same job, node and process maps on every node's server:
 * PMIX_NODE_MAP and PMIX_PROC_MAP over all nodes (PMIx_generate_regex /
 * PMIx_generate_ppn), PMIX_NUM_NODES, one PMIX_NODE_INFO_ARRAY per node
 * (PMIX_NODEID, PMIX_HOSTNAME, PMIX_LOCAL_PEERS, PMIX_LOCAL_SIZE,
 * PMIX_NODE_SIZE, PMIX_LOCALLDR) and one PMIX_PROC_INFO_ARRAY per rank of
 * the job, local or not (PMIX_RANK first, PMIX_LOCAL_RANK, PMIX_NODE_RANK,
 * PMIX_NODEID, PMIX_HOSTNAME, global and app ranks).  What only this node
 * knows is added for this node alone: the job-level PMIX_LOCAL_PEERS and
 * PMIX_LOCAL_SIZE, the oversubscription flag, PMIX_TMPDIR in its node
 * array and the local ranks' PMIX_PROCDIR.  A one-node map gives exactly
 * the one-node array above.
 */
#ifndef ELASTIC_EXEC_PMIX_JOBINFO_H
#define ELASTIC_EXEC_PMIX_JOBINFO_H

#include <stddef.h>

#include <elastic.h>
#include <pmix.h>
#include <pmix_server.h>

struct jobmap;

struct jobinfo_params {
    const char *nspace;
    int nranks;               /* the job's ranks (the map's world size) */
    const char *hostname;     /* one node: this host's name (else the map's) */
    const struct jobmap *map; /* NULL or one node: every rank on this node;
                                 else every node named, this server on
                                 map->node_id */
    const char *tmpdir;       /* PMIX_TMPDIR: the server's directory */
    const char *nsdir;        /* PMIX_NSDIR; rank r's PMIX_PROCDIR is nsdir/r */
    const char *wdir;         /* PMIX_WDIR */
    int oversubscribed;
    const pmix_proc_t *parent; /* spawned by this process (PMIX_SPAWNED,
                                  PMIX_PARENT_ID); NULL: not spawned */
    /* one node (no map, or a one-node map) only: the node's PMIX_NODEID
     * (0 alone; a namespace spawned into a mesh: the node it runs on, as
     * numbered in the parents' map) and whether its ranks are another
     * node's (remote: registered here so that this node's ranks can reach
     * them, as PRRTE's daemons register every job; no local peers, session
     * directories or oversubscription then) */
    int node_id;
    int remote;
};

/* Build the array into *info / *ninfo (free with jobinfo_free).  Returns -1
 * + err if PMIx refuses a value or memory runs out. */
int jobinfo_build (const struct jobinfo_params *p,
                   pmix_info_t **info,
                   size_t *ninfo,
                   elastic_error_t *err);

/* Free an array from jobinfo_build (NULL-safe). */
void jobinfo_free (pmix_info_t *info, size_t ninfo);

#endif /* ELASTIC_EXEC_PMIX_JOBINFO_H */
