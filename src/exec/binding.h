/* binding.h - placing a node's local ranks on its hardware with hwloc
 *
 * A plan divides the inherited cpuset (the launcher's cgroup or affinity)
 * among nlocal ranks by policy, picks each rank's NUMA node and nearest GPU,
 * and is applied in each worker between fork and exec.  Honors HWLOC_XMLFILE,
 * so plans can be computed for topologies this machine does not have.
 * Errors: -1/NULL with one line in err (what, which value/counts, accepted).
 *
 * Placement.  The universe is the topology's allowed cpuset (a Slurm or
 * container cgroup) intersected with this process's binding (taskset,
 * srun --cpu-bind, mpirun --bind-to).  Ranks are spread over the policy's
 * domains (packages, NUMA nodes, L3 caches; the whole node for core) in
 * proportion to their cores, hierarchically (package, then NUMA, then L3),
 * and each rank gets the same number of whole cores (with all their allowed
 * hardware threads) inside its domain, never straddling a domain when an
 * even split allows it.  Local rank order follows the topology: ranks 0..k-1
 * on the first package, and so on.  Ranks never share a core unless
 * opts->oversubscribe (or the documented auto fallback below).
 *
 *   core    cpus_per_rank cores each, or all cores divided evenly
 *           (floor(cores / nlocal); the remainder stays idle).
 *   numa    one NUMA node per rank when nlocal <= nodes (the whole node),
 *           else nodes shared out evenly; memory is bound to the node
 *           (MPOL_BIND, as numactl --membind: strict, no spill-over).
 *   l3      as numa, over L3 caches (AMD core complexes); no memory binding.
 *   socket  as numa, over packages; no memory binding.
 *   auto    core when nlocal <= cores; else (fallback, reported in the plan's
 *           note) every rank gets its whole NUMA node's cpus and memory,
 *           several ranks per node sharing its cores.
 *   none    no CPU binding; GPUs are still picked (rank L gets GPU L mod n).
 *
 * torchrun's --numa-binding spellings map onto these: node = numa,
 * socket = socket, exclusive = core (ranks never share a core, even with
 * oversubscribe), core-complex = l3.  They also require one GPU per local
 * rank, as torchrun does: no GPU, or fewer GPUs than ranks, is an error.
 *
 * Launcher binding.  When this process's binding is narrower than the
 * allowed cpuset and a launcher says it bound us (OMPI_COMM_WORLD_LOCAL_RANK:
 * Open MPI's mpirun; MPI_LOCALRANKID: MPICH/Hydra; SLURM_CPU_BIND_TYPE other
 * than none: srun --cpu-bind) and opts->respect_launcher is set, the plan
 * keeps that binding: every slot reports it with kept = 1 and binding_apply
 * changes nothing.  binding_parse() clears respect_launcher: an explicit
 * --bind/--numa-binding is a request to bind inside the launcher's cpuset.
 *
 * GPUs.  NVIDIA GPUs are found in hwloc's I/O objects: CUDA OS devices
 * ("cudaN"), NVML OS devices ("nvmlN"), else PCI devices of vendor 0x10de and
 * class 0x0302/0x0300 (Debian's hwloc has no CUDA/NVML plugin).  A GPU's
 * index is its CUDA index when every GPU has a "cudaN" device and
 * CUDA_VISIBLE_DEVICES is unset, else its NVML index, else its position in
 * PCI bus order; the last two equal CUDA's numbering when
 * CUDA_DEVICE_ORDER=PCI_BUS_ID (elastic-exec should set it when unset).  An
 * inherited CUDA_VISIBLE_DEVICES (Slurm's gres) limits the GPUs to those it
 * names (indexes, or GPU- UUID prefixes matched against NVML's); entries
 * hwloc cannot match disable GPU selection (noted, variable left alone).
 * Each rank gets the GPU whose locality (its PCI root's package or NUMA
 * node) contains the rank's cpus, the most local first, each GPU once while
 * there are enough, then the least loaded.  cuda_visible_devices is:
 *   - with virtual_local_rank: the rank's GPU alone, so it is device 0;
 *   - else, when every rank has its own GPU: the same permuted list for all
 *     ranks, rank L's GPU in position L, so device LOCAL_RANK is the
 *     nearest GPU and all GPUs stay visible (peer access, NCCL);
 *   - else (GPUs shared, policy none, no GPU): "" = leave the variable alone.
 * Binding only computes these values: setting CUDA_VISIBLE_DEVICES, and
 * LOCAL_RANK=0 under virtual_local_rank as torchrun does, is elastic-exec's
 * job when it builds each worker's environment.
 *
 * Cost.  binding_plan_create loads the topology (with I/O devices) once per
 * plan and the plan owns it, since binding_apply runs in forked children;
 * destroy frees everything (checked with ASan/LSan).  Recompute the plan for
 * every (re)start or world-size change: ~3 ms for the 64-core 8-GPU XML
 * topology, ~13 ms on a 2-cpu VM (sysfs PCI discovery dominates).  The
 * CUDA, OpenCL and GL hwloc components are not loaded: they would create
 * GPU contexts or open displays in the supervisor.  Reloading each time
 * (rather than caching) picks up a changed cgroup or affinity.
 *
 * Environment read by binding_plan_create: HWLOC_XMLFILE (an unreadable
 * file is an error, not a silent fall-back to this machine),
 * HWLOC_THISSYSTEM, CUDA_VISIBLE_DEVICES, OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_CPU_BIND_TYPE.
 */
#ifndef ELASTIC_EXEC_BINDING_H
#define ELASTIC_EXEC_BINDING_H

#include <stddef.h>

#include "common/error.h"

enum binding_policy {
    BINDING_NONE,   /* no binding */
    BINDING_CORE,   /* cpus_per_rank cores each */
    BINDING_L3,     /* spread over L3 caches (AMD core complexes) */
    BINDING_NUMA,   /* spread over NUMA nodes, memory bound too */
    BINDING_SOCKET, /* spread over packages */
    BINDING_AUTO    /* core when ranks <= cores, else numa */
};

struct binding_opts {
    enum binding_policy policy;
    int cpus_per_rank;      /* cores per rank; 0 = as many as divide evenly */
    int oversubscribe;      /* allow more ranks than cores (shared cores) */
    int exclusive;          /* torchrun's "exclusive": ranks never share a core */
    int respect_launcher;   /* 1: an inherited narrower cpuset is already a binding */
    int virtual_local_rank; /* each rank sees its GPU as device 0 */
    int require_gpu;        /* torchrun's --numa-binding: one GPU per rank or error */
};

struct binding_slot {
    int local_rank;
    char cpus[512];     /* OS cpu list, e.g. "0-3,32-35"; "" = unbound */
    int ncores;         /* cores in cpus (0 = unbound) */
    int kept;           /* cpus is the launcher's binding, left alone */
    char mems[64];      /* OS NUMA nodes local to cpus, e.g. "0" */
    int numa_node;      /* OS index, -1 = unknown, several or not bound */
    int membind;        /* binding_apply binds memory to mems */
    int gpu;            /* OS/CUDA index of the chosen GPU, -1 = none */
    char gpu_busid[16]; /* its PCI bus id, "" = unknown */
    char
        cuda_visible_devices[1024]; /* value for CUDA_VISIBLE_DEVICES, "" = leave alone */
};

struct binding_plan;

/* Set the defaults: policy auto, respect_launcher 1, the rest 0. */
void binding_opts_init (struct binding_opts *opts);

/* Parse --bind (none|core|l3|numa|socket|auto) or torchrun's --numa-binding
 * (node|socket|exclusive|core-complex) into opts->policy/exclusive/
 * require_gpu, and clear respect_launcher.  -1 + err on an unknown value. */
int binding_parse (const char *flag,
                   const char *value,
                   struct binding_opts *opts,
                   elastic_error_t *err);

/* The name --bind accepts for policy ("core", ...). */
const char *binding_policy_name (enum binding_policy policy);

/* Compute the placement of nlocal ranks.  NULL + err when the topology
 * cannot be loaded or the request does not fit (counts named). */
struct binding_plan *
binding_plan_create (const struct binding_opts *opts, int nlocal, elastic_error_t *err);

/* The placement of one local rank (borrowed; NULL if out of range). */
const struct binding_slot *binding_plan_slot (const struct binding_plan *plan,
                                              int local_rank);

/* One line on a fallback the plan took or a launcher binding it kept
 * (borrowed; "" when there is nothing to say).  Log it once. */
const char *binding_plan_note (const struct binding_plan *plan);

/* 1 if the plan's topology is this machine's, so that binding_apply can
 * bind by it; 0 for another machine's (HWLOC_XMLFILE without
 * HWLOC_THISSYSTEM=1), whose plans are only for printing. */
int binding_plan_is_this_system (const struct binding_plan *plan);

/* In the worker, between fork and exec: bind this process (cpus, and memory
 * for NUMA policies) as the plan says; report when the OS refuses.  The
 * child must be single-threaded (it is after fork).  -1 + err when the
 * OS refuses, naming the rank, cpus or nodes and errno's text. */
int binding_apply (const struct binding_plan *plan, int local_rank, elastic_error_t *err);

/* One human-readable line, e.g.
 * "rank 3 local 3 cpus 24-31,88-95 (8 cores) numa 0 gpu 3 (0000:20:00.0)".
 * Returns its length, or -1 when local_rank is out of range or it did
 * not fit in size. */
int binding_format (
    const struct binding_plan *plan, int local_rank, int rank, char *buf, size_t size);

/* Free the plan and its topology (NULL-safe, preserves errno). */
void binding_plan_destroy (struct binding_plan *plan);

#endif /* ELASTIC_EXEC_BINDING_H */
