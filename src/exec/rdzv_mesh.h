/* rdzv_mesh.h - torchrun's elastic rendezvous over the mesh (issue 16)
 *
 * For workers that are not MPI ranks (--wireup none) across nodes:
 * `elastic-exec --nnodes MIN:MAX --node-rank K --rdzv-endpoint HOST:PORT
 * --nproc-per-node P --wireup none train.py` on every node, or under srun
 * (one task per node) without the torchrun flags.  The nodes'
 * elastic-exec form the job's mesh (mesh/mesh.h; meshjob.h gives the map,
 * the addresses and the key); the mesh is the rendezvous, so there is no
 * store on one host to lose:
 *
 *   round      a rendezvous round is a mesh fence: each live member
 *              contributes its worker count and a free port; every member
 *              gets the same list (the live members in member order) and
 *              derives the same group: GROUP_RANK = its place in the list,
 *              ranks numbered in that order, MASTER_ADDR/PORT those of the
 *              first member.  A round with fewer than MIN members fails
 *              the rendezvous on every member alike.
 *   restart    a member that starts a round (its workers failed, it was
 *              told to) broadcasts ROUND n; the others' num_nodes_waiting
 *              turns 1 and their agents stop their workers and join round n
 *              without spending a restart (torchelastic's membership
 *              change).  A member lost to the mesh (its process or node
 *              gone, silent for --node-timeout, cut off) does the same on
 *              every survivor: no worker has to fail or time out first.
 *   closing    a member whose agent gives up (restarts spent, a signal)
 *              broadcasts CLOSE with its reason before it leaves; every
 *              other member's next rendezvous then fails with that reason
 *              (torchelastic's closed rendezvous), so the job ends on
 *              every node instead of going on without the failed one.
 *   exit       the exit barrier broadcasts DONE and waits until every
 *              live member is done or lost (never for a lost one); a done
 *              member takes part in the others' rounds with a "done" blob,
 *              left out of their group.
 *   joins      with torchrun's flags (meshjob.joins), a node that comes
 *              after the start is admitted through the endpoint's server
 *              into the mesh (rdzv_tcp.h, mesh_admit, at most MAX live);
 *              every member logs node_joined, the epoch moves, and the
 *              next round (num_nodes_waiting) takes it in.
 *
 * Split brain: the mesh fences its minority side itself (a member that
 * lost more members by silence than it still sees stops: mesh.h), and a
 * self-fenced member's rendezvous fails; so two groups cannot both train.
 */
#ifndef ELASTIC_EXEC_RDZV_MESH_H
#define ELASTIC_EXEC_RDZV_MESH_H

#include "common/error.h"
#include "elastic/agent.h"

struct meshjob;

struct rdzv_mesh_opts {
    struct meshjob *mj;  /* borrowed: outlives the module */
    int min_nodes;       /* a round needs at least this many members (0:
                            every member of the map) */
    double join_timeout; /* a round waits this long for the others (s;
                            0: 300) */
};

/* The module's operations (elastic_agent_set_rendezvous). */
extern const struct elastic_agent_rdzv rdzv_mesh_ops;

/* Create the mesh over opts->mj (its socket, addresses, key and auth) and
 * start it.  Returns the module's context, or NULL with err. */
void *rdzv_mesh_create (const struct rdzv_mesh_opts *opts, elastic_error_t *err);

#endif /* ELASTIC_EXEC_RDZV_MESH_H */
