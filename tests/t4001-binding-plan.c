/* t4001-binding-plan.c - rank placement on machines we do not have
 *
 * Plans are computed on hwloc XML topologies (HWLOC_XMLFILE, not
 * HWLOC_THISSYSTEM, so nothing is bound: these are pure computations):
 * a 2-socket 64-core node with 8 GPUs on two PCI root complexes, the same
 * node inside a 16-core Slurm cgroup with bare PCI GPUs, a 4-NUMA AMD node
 * with L3 core complexes whose GPU numbering is not the NUMA order, and a
 * small GPU-less workstation.  For every policy and 1..8 local ranks, the
 * invariants are checked against an independently loaded copy of the
 * topology: no overlap, balance, containment in one domain, NUMA node,
 * nearest GPU and CUDA_VISIBLE_DEVICES; then exact placements, fallbacks
 * and error messages.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hwloc.h>

#include "binding.h"
#include "lib/tap.h"

static char xmlpath[4096];

static const char *use_xml (const char *name)
{
    const char *srcdir = getenv ("srcdir");

    snprintf (xmlpath, sizeof (xmlpath), "%s/binding/%s", srcdir ? srcdir : ".", name);
    setenv ("HWLOC_XMLFILE", xmlpath, 1);
    return xmlpath;
}

static hwloc_topology_t load_ref (const char *name)
{
    hwloc_topology_t t;

    use_xml (name);
    if (hwloc_topology_init (&t) < 0 ||
        hwloc_topology_set_io_types_filter (t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0 ||
        hwloc_topology_set_xml (t, xmlpath) < 0 || hwloc_topology_load (t) < 0)
        bail_out ("cannot load %s", xmlpath);
    return t;
}

static int
count_type (hwloc_topology_t t, hwloc_const_bitmap_t cpus, hwloc_obj_type_t type)
{
    int n = 0;
    hwloc_obj_t o = NULL;

    while ((o = hwloc_get_next_obj_by_type (t, type, o)))
        n += hwloc_bitmap_intersects (o->cpuset, cpus);
    return n;
}

static int nvidia_gpus (hwloc_topology_t t)
{
    int n = 0;
    hwloc_obj_t o = NULL;

    while ((o = hwloc_get_next_pcidev (t, o)))
        n += o->attr->pcidev.vendor_id == 0x10de &&
             (o->attr->pcidev.class_id == 0x0302 || o->attr->pcidev.class_id == 0x0300);
    return n;
}

/* The cpus of the closest non-I/O ancestor of the GPU at busid. */
static hwloc_const_bitmap_t gpu_near (hwloc_topology_t t, const char *busid)
{
    hwloc_obj_t o = NULL;
    char b[16];

    while ((o = hwloc_get_next_pcidev (t, o))) {
        snprintf (b,
                  sizeof (b),
                  "%04x:%02x:%02x.%01x",
                  o->attr->pcidev.domain,
                  o->attr->pcidev.bus,
                  o->attr->pcidev.dev,
                  o->attr->pcidev.func);
        if (strcmp (b, busid) == 0)
            return hwloc_get_non_io_ancestor_obj (t, o)->cpuset;
    }
    return NULL;
}

/* The bus id of a GPU local to cpus that no other rank took (any local
 * one when GPUs are shared), or NULL: the rank should have had it. */
static const char *free_local_gpu (hwloc_topology_t t,
                                   const struct binding_plan *plan,
                                   int n,
                                   int self,
                                   int shared,
                                   hwloc_const_bitmap_t cpus)
{
    static char b[16];
    hwloc_obj_t o = NULL;

    while ((o = hwloc_get_next_pcidev (t, o))) {
        int taken = 0;
        if (o->attr->pcidev.vendor_id != 0x10de ||
            !hwloc_bitmap_isincluded (cpus, hwloc_get_non_io_ancestor_obj (t, o)->cpuset))
            continue;
        snprintf (b,
                  sizeof (b),
                  "%04x:%02x:%02x.%01x",
                  o->attr->pcidev.domain,
                  o->attr->pcidev.bus,
                  o->attr->pcidev.dev,
                  o->attr->pcidev.func);
        for (int l = 0; l < n && !shared; l++)
            taken |= l != self && strcmp (binding_plan_slot (plan, l)->gpu_busid, b) == 0;
        if (!taken)
            return b;
    }
    return NULL;
}

#define FAIL(...)                                                                        \
    do {                                                                                 \
        if (!bad++)                                                                      \
            diag (__VA_ARGS__);                                                          \
    } while (0)

/* All invariants of one plan; 0 = they hold (first failure diagnosed). */
static int check_plan (hwloc_topology_t ref,
                       const struct binding_plan *plan,
                       const struct binding_opts *o,
                       int n,
                       int shared)
{
    hwloc_bitmap_t cpus[16], nodes = hwloc_bitmap_alloc ();
    hwloc_bitmap_t allowed = hwloc_bitmap_dup (hwloc_topology_get_allowed_cpuset (ref));
    int ngpus = nvidia_gpus (ref), bad = 0, minc = 1 << 30, maxc = 0, used[64] = {0};
    hwloc_obj_type_t domtype = o->policy == BINDING_SOCKET ? HWLOC_OBJ_PACKAGE
                               : o->policy == BINDING_L3   ? HWLOC_OBJ_L3CACHE
                               : o->policy == BINDING_NUMA ? HWLOC_OBJ_NUMANODE
                                                           : HWLOC_OBJ_TYPE_MAX;
    int perdom[64] = {0}, ndom = 0;
    char mems[64];

    hwloc_bitmap_and (allowed, allowed, hwloc_get_root_obj (ref)->cpuset);
    for (int l = 0; l < n; l++) {
        const struct binding_slot *s = binding_plan_slot (plan, l);
        cpus[l] = hwloc_bitmap_alloc ();
        if (!s || s->local_rank != l) {
            FAIL ("slot %d missing", l);
            continue;
        }
        hwloc_bitmap_list_sscanf (cpus[l], s->cpus);
        if (hwloc_bitmap_iszero (cpus[l]))
            FAIL ("rank %d: no cpus ('%s')", l, s->cpus);
        if (!hwloc_bitmap_isincluded (cpus[l], allowed))
            FAIL ("rank %d: cpus %s outside the allowed cpuset", l, s->cpus);
        if (s->ncores != count_type (ref, cpus[l], HWLOC_OBJ_CORE))
            FAIL ("rank %d: ncores %d but cpus %s hold %d cores",
                  l,
                  s->ncores,
                  s->cpus,
                  count_type (ref, cpus[l], HWLOC_OBJ_CORE));
        minc = s->ncores < minc ? s->ncores : minc;
        maxc = s->ncores > maxc ? s->ncores : maxc;
        for (int k = 0; k < l && !shared; k++) {
            if (hwloc_bitmap_intersects (cpus[k], cpus[l]))
                FAIL ("ranks %d and %d overlap: %s / %s",
                      k,
                      l,
                      binding_plan_slot (plan, k)->cpus,
                      s->cpus);
        }
        hwloc_cpuset_to_nodeset (ref, cpus[l], nodes);
        hwloc_bitmap_list_snprintf (mems, sizeof (mems), nodes);
        if (strcmp (mems, s->mems) != 0)
            FAIL ("rank %d: mems '%s', expected '%s'", l, s->mems, mems);
        if (s->numa_node !=
            (hwloc_bitmap_weight (nodes) == 1 ? hwloc_bitmap_first (nodes) : -1))
            FAIL ("rank %d: numa_node %d for nodes %s", l, s->numa_node, mems);
        if (s->membind !=
            (o->policy == BINDING_NUMA || (o->policy == BINDING_AUTO && shared)))
            FAIL ("rank %d: membind %d under --bind=%s",
                  l,
                  s->membind,
                  binding_policy_name (o->policy));
        if (domtype != HWLOC_OBJ_TYPE_MAX) {
            hwloc_obj_t d = NULL;
            int i = 0, in = 0;
            while ((d = hwloc_get_next_obj_by_type (ref, domtype, d)) && i < 64) {
                if (hwloc_bitmap_intersects (d->cpuset, cpus[l])) {
                    in++;
                    perdom[i]++;
                }
                i++;
            }
            ndom = i;
            if (in != 1)
                FAIL ("rank %d: cpus %s meet %d %ss, expected 1",
                      l,
                      s->cpus,
                      in,
                      hwloc_obj_type_string (domtype));
        }
        if (ngpus > 0) {
            hwloc_const_bitmap_t near = gpu_near (ref, s->gpu_busid);
            if (s->gpu < 0 || !near)
                FAIL ("rank %d: no GPU (gpu %d busid '%s')", l, s->gpu, s->gpu_busid);
            else if (!hwloc_bitmap_isincluded (cpus[l], near) &&
                     free_local_gpu (ref, plan, n, l, ngpus < n, cpus[l]))
                FAIL ("rank %d: GPU %d (%s) is not local to cpus %s, GPU at %s is",
                      l,
                      s->gpu,
                      s->gpu_busid,
                      s->cpus,
                      free_local_gpu (ref, plan, n, l, ngpus < n, cpus[l]));
            else if (ngpus >= n && used[s->gpu & 63]++)
                FAIL ("rank %d: GPU %d given twice", l, s->gpu);
            if (o->virtual_local_rank) {
                char want[16];
                snprintf (want, sizeof (want), "%d", s->gpu);
                if (strcmp (s->cuda_visible_devices, want) != 0)
                    FAIL ("rank %d: CUDA_VISIBLE_DEVICES '%s', expected '%s'",
                          l,
                          s->cuda_visible_devices,
                          want);
            } else if (ngpus >= n) {
                /* a permutation of all GPUs, rank L's GPU at position L */
                char copy[1024], *tok, *save = NULL;
                int pos = 0, seen[64] = {0};
                snprintf (copy, sizeof (copy), "%s", s->cuda_visible_devices);
                for (tok = strtok_r (copy, ",", &save); tok;
                     tok = strtok_r (NULL, ",", &save), pos++) {
                    int g = atoi (tok);
                    if (g < 0 || g >= ngpus || seen[g]++)
                        FAIL ("rank %d: CUDA_VISIBLE_DEVICES '%s' is not a permutation",
                              l,
                              s->cuda_visible_devices);
                    if (pos < n && binding_plan_slot (plan, pos)->gpu != g)
                        FAIL ("rank %d: CUDA_VISIBLE_DEVICES '%s': position %d is %d, "
                              "rank %d has GPU %d",
                              l,
                              s->cuda_visible_devices,
                              pos,
                              g,
                              pos,
                              binding_plan_slot (plan, pos)->gpu);
                }
                if (pos != ngpus)
                    FAIL ("rank %d: CUDA_VISIBLE_DEVICES '%s' lists %d of %d GPUs",
                          l,
                          s->cuda_visible_devices,
                          pos,
                          ngpus);
            } else if (s->cuda_visible_devices[0])
                FAIL ("rank %d: GPUs shared but CUDA_VISIBLE_DEVICES='%s'",
                      l,
                      s->cuda_visible_devices);
        } else if (s->gpu != -1 || s->cuda_visible_devices[0])
            FAIL ("rank %d: gpu %d CVD '%s' on a node without GPU",
                  l,
                  s->gpu,
                  s->cuda_visible_devices);
    }
    if (maxc - minc > 1)
        FAIL ("unbalanced: %d to %d cores per rank", minc, maxc);
    if (domtype != HWLOC_OBJ_TYPE_MAX && !shared) {
        int lo = 1 << 30, hi = 0;
        for (int i = 0; i < ndom; i++) {
            lo = perdom[i] < lo ? perdom[i] : lo;
            hi = perdom[i] > hi ? perdom[i] : hi;
        }
        if (hi - lo > 1)
            FAIL ("not spread: %d to %d ranks per %s",
                  lo,
                  hi,
                  hwloc_obj_type_string (domtype));
    }
    for (int l = 0; l < n; l++)
        hwloc_bitmap_free (cpus[l]);
    hwloc_bitmap_free (nodes);
    hwloc_bitmap_free (allowed);
    return bad;
}

static void sweep (const char *name)
{
    static const enum binding_policy pol[] = {
        BINDING_CORE, BINDING_NUMA, BINDING_SOCKET, BINDING_L3, BINDING_AUTO};
    hwloc_topology_t ref = load_ref (name);
    int ncores =
        count_type (ref, hwloc_topology_get_allowed_cpuset (ref), HWLOC_OBJ_CORE);
    elastic_error_t err;

    for (size_t p = 0; p < sizeof (pol) / sizeof (pol[0]); p++) {
        for (int virt = 0; virt <= 1; virt++) {
            int failed = 0, total = 0;
            for (int n = 1; n <= 8; n++) {
                struct binding_opts o;
                struct binding_plan *plan;
                int shared = pol[p] == BINDING_AUTO && n > ncores;
                binding_opts_init (&o);
                o.policy = pol[p];
                o.virtual_local_rank = virt;
                plan = binding_plan_create (&o, n, &err);
                total++;
                if (n > ncores && pol[p] != BINDING_AUTO) {
                    char want[64];
                    snprintf (want, sizeof (want), "%d local ranks", n);
                    if (plan || !strstr (err.text, want)) {
                        diag ("%s --bind=%s n=%d: expected an error naming '%s', got %s",
                              name,
                              binding_policy_name (pol[p]),
                              n,
                              want,
                              plan ? "a plan" : err.text);
                        failed++;
                    }
                    binding_plan_destroy (plan);
                    continue;
                }
                if (!plan) {
                    diag ("%s --bind=%s n=%d: %s",
                          name,
                          binding_policy_name (pol[p]),
                          n,
                          err.text);
                    failed++;
                    continue;
                }
                if (check_plan (ref, plan, &o, n, shared)) {
                    diag ("  in %s --bind=%s%s n=%d",
                          name,
                          binding_policy_name (pol[p]),
                          virt ? " --virtual-local-rank" : "",
                          n);
                    failed++;
                }
                if (shared && !strstr (binding_plan_note (plan), "whole NUMA node")) {
                    diag ("%s auto n=%d: no fallback note", name, n);
                    failed++;
                }
                binding_plan_destroy (plan);
            }
            ok (failed == 0,
                "%s: --bind=%s%s, 1..8 ranks: %d of %d plans hold every invariant",
                name,
                binding_policy_name (pol[p]),
                virt ? " --virtual-local-rank" : "",
                total - failed,
                total);
        }
    }
    hwloc_topology_destroy (ref);
}

static struct binding_plan *plan_for (const char *xml,
                                      enum binding_policy policy,
                                      int n,
                                      int cpr,
                                      int virt,
                                      elastic_error_t *err)
{
    struct binding_opts o;

    use_xml (xml);
    binding_opts_init (&o);
    o.policy = policy;
    o.cpus_per_rank = cpr;
    o.virtual_local_rank = virt;
    return binding_plan_create (&o, n, err);
}

#define SLOT(p, l) (binding_plan_slot ((p), (l)))

static void exact (void)
{
    struct binding_plan *p;
    elastic_error_t err;
    char line[1024];

    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 8, 0, 0, &err);
    ok (p != NULL, "2s64c-8gpu core x8: plan (%s)", p ? "ok" : err.text);
    if (p) {
        binding_format (p, 3, 19, line, sizeof (line));
        is_str (line,
                "rank 19 local 3 cpus 24-31,88-95 (8 cores) numa 0 gpu 3 (0000:20:00.0)",
                "binding_format: rank, local rank, cpus, cores, NUMA node, GPU");
        is_str (SLOT (p, 7)->cpus, "56-63,120-127", "rank 7: last 8 cores of socket 1");
        is_str (SLOT (p, 0)->cuda_visible_devices,
                "0,1,2,3,4,5,6,7",
                "CUDA_VISIBLE_DEVICES: identity when GPU order is topology order");
        is_int (binding_format (p, 8, 8, line, sizeof (line)),
                -1,
                "format: rank 8 is out of range");
        is_int (binding_format (p, 0, 0, line, 10), -1, "format: truncation is reported");
        binding_plan_destroy (p);
    }

    p = plan_for ("2s64c-8gpu.xml", BINDING_NUMA, 2, 0, 0, &err);
    ok (p && strcmp (SLOT (p, 1)->cpus, "32-63,96-127") == 0 && SLOT (p, 1)->membind &&
            strcmp (SLOT (p, 1)->mems, "1") == 0 && SLOT (p, 1)->gpu == 4,
        "2s64c-8gpu numa x2: rank 1 = socket 1, memory bound to node 1, GPU 4");
    if (p)
        is_str (SLOT (p, 0)->cuda_visible_devices,
                "0,4,1,2,3,5,6,7",
                "numa x2: device LOCAL_RANK is the rank's nearest GPU");
    binding_plan_destroy (p);

    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 4, 4, 0, &err);
    ok (p && strcmp (SLOT (p, 0)->cpus, "0-3,64-67") == 0 &&
            strcmp (SLOT (p, 1)->cpus, "16-19,80-83") == 0 &&
            strcmp (SLOT (p, 2)->cpus, "32-35,96-99") == 0,
        "--cpus-per-rank 4 x4: 4 cores each, 2 per socket, spread inside it (%s)",
        p ? SLOT (p, 1)->cpus : err.text);
    binding_plan_destroy (p);

    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 3, 0, 0, &err);
    ok (p && SLOT (p, 0)->ncores == 21 && SLOT (p, 2)->ncores == 21,
        "core x3 on 64 cores: 21 cores each, the remainder idle");
    binding_plan_destroy (p);

    p = plan_for ("amd-4numa-l3.xml", BINDING_NUMA, 4, 0, 0, &err);
    ok (p && SLOT (p, 0)->gpu == 3 && SLOT (p, 1)->gpu == 2 && SLOT (p, 2)->gpu == 1 &&
            SLOT (p, 3)->gpu == 0,
        "amd-4numa numa x4: GPUs by locality, not by number (3,2,1,0)");
    if (p) {
        is_str (SLOT (p, 0)->cuda_visible_devices,
                "3,2,1,0",
                "amd numa x4: CUDA_VISIBLE_DEVICES");
        is_str (SLOT (p, 2)->cpus, "16-23,48-55", "amd numa x4: rank 2 = NUMA node 2");
    }
    binding_plan_destroy (p);

    p = plan_for ("amd-4numa-l3.xml", BINDING_L3, 4, 0, 1, &err);
    ok (p && strcmp (SLOT (p, 1)->cpus, "8-11,40-43") == 0 &&
            strcmp (SLOT (p, 1)->cuda_visible_devices, "2") == 0 &&
            SLOT (p, 1)->membind == 0,
        "amd l3 x4 --virtual-local-rank: one core complex per NUMA node, own GPU "
        "alone, no memory binding");
    binding_plan_destroy (p);

    p = plan_for ("2s64c-8gpu-slurm16.xml", BINDING_CORE, 8, 0, 0, &err);
    ok (p && strcmp (SLOT (p, 4)->cpus, "32-33,96-97") == 0 && SLOT (p, 4)->gpu == 4 &&
            strcmp (SLOT (p, 4)->gpu_busid, "0000:9a:00.0") == 0,
        "slurm16 (cgroup, bare PCI GPUs) core x8: 2 cores each inside the cgroup, "
        "GPUs found by PCI class (rank 4: %s gpu %d)",
        p ? SLOT (p, 4)->cpus : err.text,
        p ? SLOT (p, 4)->gpu : -9);
    binding_plan_destroy (p);

    p = plan_for ("small-1s4c.xml", BINDING_NONE, 2, 0, 0, &err);
    ok (p && SLOT (p, 1)->cpus[0] == '\0' && SLOT (p, 1)->gpu == -1 &&
            SLOT (p, 1)->cuda_visible_devices[0] == '\0',
        "--bind=none: unbound, no GPU, CUDA_VISIBLE_DEVICES left alone");
    binding_plan_destroy (p);

    p = plan_for ("2s64c-8gpu.xml", BINDING_NONE, 2, 0, 1, &err);
    ok (p && SLOT (p, 1)->gpu == 1 &&
            strcmp (SLOT (p, 1)->cuda_visible_devices, "1") == 0,
        "--bind=none --virtual-local-rank: rank L gets GPU L as its device 0");
    binding_plan_destroy (p);
}

static void fallbacks_and_errors (void)
{
    struct binding_opts o;
    struct binding_plan *p;
    elastic_error_t err;

    use_xml ("small-1s4c.xml");
    binding_opts_init (&o);
    o.policy = BINDING_CORE;
    o.oversubscribe = 1;
    p = binding_plan_create (&o, 8, &err);
    ok (p && strcmp (SLOT (p, 0)->cpus, "0,4") == 0 &&
            strcmp (SLOT (p, 1)->cpus, "0,4") == 0 &&
            strcmp (SLOT (p, 7)->cpus, "3,7") == 0,
        "core --oversubscribe x8 on 4 cores: two ranks per core, evenly");
    binding_plan_destroy (p);

    o.exclusive = 1; /* torchrun's exclusive ignores --oversubscribe */
    p = binding_plan_create (&o, 5, &err);
    ok (!p && strstr (err.text, "5 local ranks need 5 cores") &&
            strstr (err.text, "has 4") && strstr (err.text, "never shares"),
        "exclusive x5 on 4 cores: error naming both counts (%s)",
        err.text);
    binding_plan_destroy (p);

    binding_opts_init (&o);
    binding_parse ("--numa-binding", "node", &o, &err);
    p = binding_plan_create (&o, 2, &err);
    ok (!p && strstr (err.text, "--numa-binding=node") &&
            strstr (err.text, "0 NVIDIA GPUs") && strstr (err.text, "2 local ranks") &&
            strstr (err.text, "--bind=numa"),
        "--numa-binding on a node without GPU: clear error (%s)",
        err.text);

    use_xml ("amd-4numa-l3.xml");
    p = binding_plan_create (&o, 8, &err);
    ok (!p && strstr (err.text, "8 local ranks but 4 GPUs"),
        "--numa-binding x8 with 4 GPUs: error naming the counts (%s)",
        err.text);
    p = binding_plan_create (&o, 4, &err);
    ok (p && SLOT (p, 0)->gpu == 3 && SLOT (p, 0)->membind,
        "--numa-binding=node x4 with 4 GPUs: numa placement, nearest GPU");
    binding_plan_destroy (p);

    binding_opts_init (&o);
    o.policy = BINDING_NUMA;
    o.cpus_per_rank = 3;
    p = binding_plan_create (&o, 12, &err);
    ok (!p && strstr (err.text, "12 local ranks") && strstr (err.text, "only 8 fit") &&
            strstr (err.text, "4 NUMA nodes"),
        "numa --cpus-per-rank 3 x12 on 4 x 8 cores: error naming what fits (%s)",
        err.text);

    use_xml ("fake-2numa-2cpu.xml");
    o.policy = BINDING_L3;
    o.cpus_per_rank = 0;
    p = binding_plan_create (&o, 1, &err);
    ok (!p && strstr (err.text, "no L3 caches"),
        "--bind=l3 without L3 objects: error (%s)",
        err.text);

    setenv ("HWLOC_XMLFILE", "/nonexistent/topology.xml", 1);
    binding_opts_init (&o);
    p = binding_plan_create (&o, 1, &err);
    ok (!p && strstr (err.text, "HWLOC_XMLFILE=/nonexistent/topology.xml"),
        "unreadable HWLOC_XMLFILE is an error, not this machine (%s)",
        err.text);

    use_xml ("small-1s4c.xml");
    o.policy = BINDING_NONE;
    o.cpus_per_rank = 2;
    p = binding_plan_create (&o, 1, &err);
    ok (!p && strstr (err.text, "--cpus-per-rank=2"),
        "--cpus-per-rank with none: error (%s)",
        err.text);
    binding_opts_init (&o);
    p = binding_plan_create (&o, 0, &err);
    ok (!p && strstr (err.text, "0 local ranks"), "0 local ranks: error (%s)", err.text);

    o.policy = BINDING_CORE;
    p = binding_plan_create (&o, 2, &err);
    ok (p && binding_apply (p, 0, &err) < 0 && strstr (err.text, "not this machine"),
        "binding_apply refuses a topology that is not this machine's (%s)",
        err.text);
    ok (p && binding_apply (p, 5, &err) < 0 && strstr (err.text, "local rank 5"),
        "binding_apply: out-of-range rank (%s)",
        err.text);
    ok (p && binding_plan_slot (p, 2) == NULL && binding_plan_slot (p, -1) == NULL,
        "binding_plan_slot: out of range is NULL");
    binding_plan_destroy (p);
}

static void inherited_cuda_visible_devices (void)
{
    struct binding_plan *p;
    elastic_error_t err;

    setenv ("CUDA_VISIBLE_DEVICES", "6,7,4,5", 1);
    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 2, 0, 0, &err);
    ok (p && SLOT (p, 0)->gpu == 6 && SLOT (p, 1)->gpu == 7 &&
            strcmp (SLOT (p, 0)->cuda_visible_devices, "6,7,4,5") == 0,
        "inherited CUDA_VISIBLE_DEVICES=6,7,4,5: only those GPUs, in its order when "
        "equally near (%d %d '%s')",
        p ? SLOT (p, 0)->gpu : -9,
        p ? SLOT (p, 1)->gpu : -9,
        p ? SLOT (p, 0)->cuda_visible_devices : err.text);
    binding_plan_destroy (p);

    setenv ("CUDA_VISIBLE_DEVICES", "GPU-1c7d4a1e-56c2-3b4f-9d8e-0000005a0006", 1);
    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 1, 0, 1, &err);
    ok (p && SLOT (p, 0)->gpu == 6 &&
            strcmp (SLOT (p, 0)->cuda_visible_devices,
                    "GPU-1c7d4a1e-56c2-3b4f-9d8e-0000005a0006") == 0,
        "inherited UUID: matched against NVML, passed on as the UUID");
    binding_plan_destroy (p);

    setenv ("CUDA_VISIBLE_DEVICES", "MIG-4f3c2b1a-0000-1111-2222-333344445555", 1);
    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 2, 0, 1, &err);
    ok (p && SLOT (p, 0)->gpu == -1 && SLOT (p, 0)->cuda_visible_devices[0] == '\0' &&
            strstr (binding_plan_note (p), "names no GPU"),
        "unmatched inherited entry: no GPU chosen, variable left alone, noted (%s)",
        p ? binding_plan_note (p) : err.text);
    binding_plan_destroy (p);

    setenv ("CUDA_VISIBLE_DEVICES", "", 1);
    p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 2, 0, 0, &err);
    ok (p && SLOT (p, 0)->gpu == -1, "CUDA_VISIBLE_DEVICES='' hides every GPU");
    binding_plan_destroy (p);
    unsetenv ("CUDA_VISIBLE_DEVICES");
}

static void parse (void)
{
    struct binding_opts o;
    elastic_error_t err;
    static const struct {
        const char *flag, *value;
        enum binding_policy policy;
        int exclusive, gpu;
    } good[] = {
        {"--bind", "none", BINDING_NONE, 0, 0},
        {"--bind", "core", BINDING_CORE, 0, 0},
        {"--bind", "l3", BINDING_L3, 0, 0},
        {"--bind", "numa", BINDING_NUMA, 0, 0},
        {"--bind", "socket", BINDING_SOCKET, 0, 0},
        {"--bind", "auto", BINDING_AUTO, 0, 0},
        {"--numa-binding", "node", BINDING_NUMA, 0, 1},
        {"--numa-binding", "socket", BINDING_SOCKET, 0, 1},
        {"--numa-binding", "exclusive", BINDING_CORE, 1, 1},
        {"--numa-binding", "core-complex", BINDING_L3, 0, 1},
    };
    int bad = 0;

    for (size_t i = 0; i < sizeof (good) / sizeof (good[0]); i++) {
        binding_opts_init (&o);
        if (binding_parse (good[i].flag, good[i].value, &o, &err) < 0 ||
            o.policy != good[i].policy || o.exclusive != good[i].exclusive ||
            o.require_gpu != good[i].gpu || o.respect_launcher != 0) {
            diag ("%s=%s parsed wrong", good[i].flag, good[i].value);
            bad++;
        }
    }
    ok (bad == 0, "binding_parse: every --bind and --numa-binding value");
    ok (binding_parse ("--bind", "cores", &o, &err) < 0 && strstr (err.text, "'cores'") &&
            strstr (err.text, "none, core, l3, numa, socket, auto"),
        "--bind=cores: error names the value and the accepted ones (%s)",
        err.text);
    ok (binding_parse ("--numa-binding", "numa", &o, &err) < 0 &&
            strstr (err.text, "node, socket, exclusive, core-complex"),
        "--numa-binding=numa: error lists the accepted values (%s)",
        err.text);
    binding_opts_init (&o);
    ok (o.policy == BINDING_AUTO && o.respect_launcher == 1,
        "binding_opts_init: auto, launcher binding respected");
}

/* Recomputing a plan is what every restart does: time it. */
static void cost (void)
{
    struct timespec a, b;
    elastic_error_t err;
    int n = 20, good = 0;

    clock_gettime (CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        struct binding_plan *p = plan_for ("2s64c-8gpu.xml", BINDING_CORE, 8, 0, 0, &err);
        good += p && SLOT (p, 7)->gpu == 7;
        binding_plan_destroy (p);
    }
    clock_gettime (CLOCK_MONOTONIC, &b);
    ok (good == n, "%d plan create/destroy cycles give the same plan", n);
    diag ("plan for 8 ranks on the 64-core 8-GPU node: %.2f ms each",
          ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6) / n);
}

int main (void)
{
    unsetenv ("HWLOC_THISSYSTEM");
    unsetenv ("CUDA_VISIBLE_DEVICES");
    unsetenv ("OMPI_COMM_WORLD_LOCAL_RANK");
    sweep ("2s64c-8gpu.xml");
    sweep ("2s64c-8gpu-slurm16.xml");
    sweep ("amd-4numa-l3.xml");
    sweep ("small-1s4c.xml");
    exact ();
    fallbacks_and_errors ();
    inherited_cuda_visible_devices ();
    parse ();
    cost ();
    return done_testing ();
}
