/* binding.h - placing a node's local ranks on its hardware with hwloc
 *
 * A plan divides the inherited cpuset (the launcher's cgroup or affinity)
 * among nlocal ranks by policy, picks each rank's NUMA node and nearest GPU,
 * and is applied in each worker between fork and exec.  Honors HWLOC_XMLFILE,
 * so plans can be computed for topologies this machine does not have.
 * Errors: -1/NULL with one line in err (what, which value/counts, accepted).
 */
#ifndef ELASTIC_EXEC_BINDING_H
#define ELASTIC_EXEC_BINDING_H

#include <stddef.h>

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
    int cpus_per_rank;      /* 0 = as many as divide evenly */
    int oversubscribe;      /* allow more ranks than cores (shared cores) */
    int exclusive;          /* torchrun's "exclusive": ranks never share a core */
    int respect_launcher;   /* 1: an inherited narrower cpuset is already a binding */
    int virtual_local_rank; /* each rank sees its GPU as device 0 */
};

struct binding_slot {
    int local_rank;
    char cpus[512];                 /* OS cpu list, e.g. "0-3,32-35"; "" = unbound */
    int numa_node;                  /* OS index, -1 = unknown or not bound */
    int gpu;                        /* OS/CUDA index of the chosen GPU, -1 = none */
    char cuda_visible_devices[128]; /* value for CUDA_VISIBLE_DEVICES, "" = leave alone */
};

struct binding_plan;

/* Parse --bind (none|core|l3|numa|socket|auto) or torchrun's --numa-binding
 * (node|socket|exclusive|core-complex) into opts->policy/exclusive. */
int binding_parse (const char *flag, const char *value, struct binding_opts *opts, char *err, size_t errsz);

/* Compute the placement of nlocal ranks. */
struct binding_plan *binding_plan_create (const struct binding_opts *opts,
                                          int nlocal,
                                          char *err,
                                          size_t errsz);

/* The placement of one local rank (borrowed; NULL if out of range). */
const struct binding_slot *binding_plan_slot (const struct binding_plan *plan, int local_rank);

/* In the worker, between fork and exec: bind this process (cpus, and memory
 * for NUMA policies) as the plan says; report when the OS refuses. */
int binding_apply (const struct binding_plan *plan, int local_rank, char *err, size_t errsz);

/* One human-readable line: "rank R local L cores C numa N gpu G". */
int binding_format (const struct binding_plan *plan, int local_rank, int rank, char *buf, size_t size);

void binding_plan_destroy (struct binding_plan *plan);

#endif /* ELASTIC_EXEC_BINDING_H */
