/* binding_impl.h - what the parts of the binding planner share (binding*.c)
 *
 * binding.c makes a plan from its options in phases over one working
 * state (struct ctx): binding_topo.c loads the topology (and binds by it
 * in the worker), binding_place.c divides the cpus among the ranks,
 * binding_gpu.c finds the GPUs and gives each rank its nearest.  Every
 * function fills x->err (errprintf) and returns -1 on failure.
 */
#ifndef ELASTIC_EXEC_BINDING_IMPL_H
#define ELASTIC_EXEC_BINDING_IMPL_H

#include <stddef.h>
#include <hwloc.h>

#include "binding.h"
#include "common/error.h"

struct gpu {
    hwloc_obj_t pci;   /* its PCI device, NULL when hwloc shows only an OS device */
    hwloc_obj_t osdev; /* its first CUDA/NVML OS device, NULL for a bare PCI device */
    int cuda;          /* N of "cudaN", -1 = none */
    int nvml;          /* N of "nvmlN", -1 = none */
    const char *uuid;  /* NVML's "GPU-..." UUID, NULL = unknown */
    int index;         /* the number CUDA_VISIBLE_DEVICES uses */
    char token[64];    /* what CUDA_VISIBLE_DEVICES says for it */
    char busid[16];
    hwloc_const_cpuset_t near; /* cpus of its closest non-I/O ancestor */
    int load;                  /* ranks given this GPU */
};

struct binding_plan {
    hwloc_topology_t topo;
    int nlocal;
    struct binding_slot *slots;
    hwloc_bitmap_t *cpus; /* per slot, NULL = unbound or kept */
    hwloc_bitmap_t *mems; /* per slot, NULL = no memory binding */
    char note[512];
};

/* Working state of one binding_plan_create call. */
struct ctx {
    struct binding_plan *plan;
    const struct binding_opts *opts;
    enum binding_policy policy; /* effective: auto resolved */
    int oversubscribe;
    int whole; /* each rank gets its whole domain (auto fallback) */
    hwloc_bitmap_t universe;
    elastic_error_t *err;

    hwloc_obj_t *unit; /* cores (or PUs) meeting the universe, in topology order */
    hwloc_bitmap_t *unit_cpus; /* their cpus inside the universe */
    int nunits;

    hwloc_obj_t *dom; /* the policy's domains, in topology order */
    int *dom_units;   /* units in each */
    int *dom_ranks;   /* ranks placed in each */
    int ndom;
    int c;    /* units per rank */
    int next; /* next slot to fill */

    struct gpu *gpu;
    int ngpus;
    int *visible; /* indexes into gpu[], CUDA_VISIBLE_DEVICES order */
    int nvisible;
};

/* Ranks a domain can take: "unlimited" is the largest nlocal, so that
 * sums over domains stay far from overflowing. */
#define UNLIMITED 65536

/* How the user spelled the policy ("--bind=core", "--numa-binding=node"),
 * for messages; returns buf. */
const char *bind_policy_label (const struct binding_opts *opts, char *buf, size_t size);

/* set as an OS list ("0-3,8"), "" when it does not fit. */
void bind_list_snprintf (char *buf, size_t size, hwloc_const_bitmap_t set);

/* binding_topo.c: load plan->topo with its GPUs (HWLOC_XMLFILE honored). */
int bind_load_topology (struct binding_plan *plan, elastic_error_t *err);

/* binding_place.c: the universe (sets *narrowed when this process's
 * binding narrows the allowed cpuset), its units, the ranks spread over
 * the policy's domains and cut into blocks (x->policy resolved), and the
 * slots' cpu and NUMA lists (membind: bind memory to the nodes). */
int bind_find_universe (struct ctx *x, int *narrowed);
int bind_find_units (struct ctx *x);
int bind_place_ranks (struct ctx *x, int narrowed);
int bind_fill_slots (struct ctx *x, int membind);

/* binding_gpu.c: the NVIDIA GPUs of the I/O tree (cvd_set: an inherited
 * CUDA_VISIBLE_DEVICES exists), those cvd leaves us (1: all entries
 * matched, 0: some did not, noted), and each rank's nearest one with
 * CUDA_VISIBLE_DEVICES (bound: the ranks have cpus of their own). */
int bind_find_gpus (struct ctx *x, int cvd_set);
int bind_filter_visible (struct ctx *x, const char *cvd);
int bind_assign_gpus (struct ctx *x, int bound);

#endif /* ELASTIC_EXEC_BINDING_IMPL_H */
