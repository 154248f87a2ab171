/* pmix_jobinfo.h - what a namespace tells Open MPI about its job
 *
 * The info array for PMIx_server_register_nspace of a job whose ranks all
 * run on this node: job-level sizes and maps (PMIX_JOB_SIZE, PMIX_UNIV_SIZE,
 * PMIX_NODE_MAP, PMIX_PROC_MAP, PMIX_NUM_NODES, PMIX_LOCAL_PEERS, the
 * session directories, PMIX_NODE_OVERSUBSCRIBED), an app array, a node
 * array, and one PMIX_PROC_INFO_ARRAY per rank (PMIX_RANK first, local and
 * node ranks, the rank's session directory).  A multi-node layout would add
 * one node array per node and global maps; the shape is the same.
 */
#ifndef ELASTIC_EXEC_PMIX_JOBINFO_H
#define ELASTIC_EXEC_PMIX_JOBINFO_H

#include <stddef.h>

#include <elastic.h>
#include <pmix.h>
#include <pmix_server.h>

struct jobinfo_params {
    const char *nspace;
    int nranks;
    const char *hostname;
    const char *tmpdir; /* PMIX_TMPDIR: the server's directory */
    const char *nsdir;  /* PMIX_NSDIR; rank r's PMIX_PROCDIR is nsdir/r */
    const char *wdir;   /* PMIX_WDIR */
    int oversubscribed;
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
