/* binding.c - placing a node's local ranks on its hardware with hwloc
 *
 * See binding.h for the policies.  binding_plan_create works in three
 * steps on a topology it loads itself: the universe (allowed cpuset and
 * this process's binding) and its units (cores, or PUs when hwloc shows no
 * cores); the ranks spread over the policy's domains and cut into equal
 * blocks of units; the GPUs found in the I/O tree matched to the ranks.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>

#include "binding.h"

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
    char *err;
    size_t errsz;

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

static int errprintf (char *err, size_t errsz, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int errprintf (char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;

    if (err && errsz > 0) {
        va_start (ap, fmt);
        vsnprintf (err, errsz, fmt, ap);
        va_end (ap);
    }
    return -1;
}

void binding_opts_init (struct binding_opts *opts)
{
    memset (opts, 0, sizeof (*opts));
    opts->policy = BINDING_AUTO;
    opts->respect_launcher = 1;
}

static const char *policy_names[] = {
    [BINDING_NONE] = "none",
    [BINDING_CORE] = "core",
    [BINDING_L3] = "l3",
    [BINDING_NUMA] = "numa",
    [BINDING_SOCKET] = "socket",
    [BINDING_AUTO] = "auto",
};

const char *binding_policy_name (enum binding_policy policy)
{
    if ((int)policy < 0 || policy > BINDING_AUTO)
        return "?";
    return policy_names[policy];
}

int binding_parse (const char *flag,
                   const char *value,
                   struct binding_opts *opts,
                   char *err,
                   size_t errsz)
{
    const char *f = flag ? flag : "";

    while (*f == '-')
        f++;
    if (!value)
        value = "";
    if (strcmp (f, "bind") == 0) {
        for (int p = BINDING_NONE; p <= BINDING_AUTO; p++) {
            if (strcmp (value, policy_names[p]) == 0) {
                opts->policy = p;
                opts->exclusive = 0;
                opts->require_gpu = 0;
                opts->respect_launcher = 0;
                return 0;
            }
        }
        return errprintf (err,
                          errsz,
                          "--bind: unknown policy '%s' (accepted: none, core, l3, "
                          "numa, socket, auto)",
                          value);
    }
    if (strcmp (f, "numa-binding") == 0) {
        static const struct {
            const char *name;
            enum binding_policy policy;
            int exclusive;
        } map[] = {
            {"node", BINDING_NUMA, 0},
            {"socket", BINDING_SOCKET, 0},
            {"exclusive", BINDING_CORE, 1},
            {"core-complex", BINDING_L3, 0},
        };
        for (size_t i = 0; i < sizeof (map) / sizeof (map[0]); i++) {
            if (strcmp (value, map[i].name) == 0) {
                opts->policy = map[i].policy;
                opts->exclusive = map[i].exclusive;
                opts->require_gpu = 1;
                opts->respect_launcher = 0;
                return 0;
            }
        }
        return errprintf (err,
                          errsz,
                          "--numa-binding: unknown value '%s' (accepted: node, socket, "
                          "exclusive, core-complex)",
                          value);
    }
    return errprintf (err,
                      errsz,
                      "binding: unknown option '%s' (accepted: --bind, --numa-binding)",
                      flag ? flag : "(null)");
}

/* How the user spelled the policy, for messages. */
static const char *policy_label (const struct binding_opts *opts, char *buf, size_t size)
{
    static const char *numa_names[] = {
        [BINDING_CORE] = "exclusive",
        [BINDING_L3] = "core-complex",
        [BINDING_NUMA] = "node",
        [BINDING_SOCKET] = "socket",
    };

    if (opts->require_gpu && opts->policy >= BINDING_CORE &&
        opts->policy <= BINDING_SOCKET)
        snprintf (buf, size, "--numa-binding=%s", numa_names[opts->policy]);
    else
        snprintf (buf, size, "--bind=%s", binding_policy_name (opts->policy));
    return buf;
}

static void list_snprintf (char *buf, size_t size, hwloc_const_bitmap_t set)
{
    if (hwloc_bitmap_list_snprintf (buf, size, set) < 0 && size > 0)
        buf[0] = '\0';
}

/* Load the topology with its GPUs.  HWLOC_XMLFILE is loaded explicitly:
 * hwloc would silently fall back to this machine when it cannot read it.
 * Components that would initialize GPU runtimes in the supervisor (CUDA
 * creates a context on every GPU, OpenCL loads vendor ICDs, GL opens X
 * displays) are left out; so is "pci" (libpciaccess leaks ~1 KB per load),
 * whose devices the Linux backend reads from sysfs instead.  NVML stays:
 * it names GPUs without creating contexts.  Components that are not
 * installed make set_components fail, which is harmless. */
static int load_topology (struct binding_plan *plan, char *err, size_t errsz)
{
    static const char *skip[] = {"pci", "cuda", "opencl", "gl", "rsmi", "levelzero"};
    const char *xml = getenv ("HWLOC_XMLFILE");

    if (hwloc_topology_init (&plan->topo) < 0) {
        plan->topo = NULL;
        return errprintf (
            err, errsz, "hwloc: cannot initialize a topology: %s", strerror (errno));
    }
    for (size_t i = 0; i < sizeof (skip) / sizeof (skip[0]); i++)
        (void)hwloc_topology_set_components (
            plan->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
    if (hwloc_topology_set_io_types_filter (plan->topo,
                                            HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0)
        return errprintf (
            err, errsz, "hwloc: cannot enable I/O discovery: %s", strerror (errno));
    if (xml && *xml && hwloc_topology_set_xml (plan->topo, xml) < 0)
        return errprintf (err,
                          errsz,
                          "HWLOC_XMLFILE=%s: hwloc cannot read it: %s",
                          xml,
                          strerror (errno));
    if (hwloc_topology_load (plan->topo) < 0)
        return errprintf (err,
                          errsz,
                          "hwloc: cannot load the topology%s%s: %s",
                          xml && *xml ? " from HWLOC_XMLFILE=" : "",
                          xml && *xml ? xml : "",
                          strerror (errno));
    return 0;
}

/* The launcher that says it bound this process, or NULL. */
static const char *launcher_binding (char *buf, size_t size)
{
    const char *s;

    if (getenv ("OMPI_COMM_WORLD_LOCAL_RANK"))
        return "Open MPI's mpirun (OMPI_COMM_WORLD_LOCAL_RANK is set)";
    if (getenv ("MPI_LOCALRANKID"))
        return "MPICH's mpiexec (MPI_LOCALRANKID is set)";
    if ((s = getenv ("SLURM_CPU_BIND_TYPE")) && *s && strncmp (s, "none", 4) != 0) {
        snprintf (buf, size, "srun (SLURM_CPU_BIND_TYPE=%s)", s);
        return buf;
    }
    return NULL;
}

/* The cpus to divide: the allowed cpuset, narrowed by this process's
 * binding when the topology is this machine's.  Sets *narrowed. */
static int find_universe (struct ctx *x, int *narrowed)
{
    hwloc_topology_t topo = x->plan->topo;
    hwloc_bitmap_t allowed = NULL, cur = NULL;
    int rc = -1;

    *narrowed = 0;
    if (!(allowed = hwloc_bitmap_dup (hwloc_topology_get_allowed_cpuset (topo))) ||
        !(cur = hwloc_bitmap_alloc ())) {
        errprintf (x->err, x->errsz, "binding: out of memory");
        goto out;
    }
    hwloc_bitmap_and (allowed, allowed, hwloc_get_root_obj (topo)->cpuset);
    hwloc_bitmap_copy (x->universe, allowed);
    if (hwloc_topology_is_thissystem (topo)) {
        if (hwloc_get_cpubind (topo, cur, 0) < 0) {
            errprintf (x->err,
                       x->errsz,
                       "binding: cannot read this process's cpu binding: %s",
                       strerror (errno));
            goto out;
        }
        hwloc_bitmap_and (x->universe, x->universe, cur);
        *narrowed = !hwloc_bitmap_isequal (x->universe, allowed);
    }
    if (hwloc_bitmap_iszero (x->universe)) {
        char a[256], c[256];
        list_snprintf (a, sizeof (a), allowed);
        list_snprintf (c, sizeof (c), cur);
        errprintf (x->err,
                   x->errsz,
                   "binding: no cpu left to divide: the topology allows cpus %s, this "
                   "process is bound to cpus %s",
                   a,
                   c);
        goto out;
    }
    rc = 0;
out:
    hwloc_bitmap_free (allowed);
    hwloc_bitmap_free (cur);
    return rc;
}

/* Units: the cores (else PUs) that meet the universe. */
static int find_units (struct ctx *x)
{
    hwloc_topology_t topo = x->plan->topo;
    hwloc_obj_type_t type = HWLOC_OBJ_CORE;
    int n;

    if (hwloc_get_nbobjs_by_type (topo, HWLOC_OBJ_CORE) <= 0)
        type = HWLOC_OBJ_PU;
    n = hwloc_get_nbobjs_by_type (topo, type);
    if (n <= 0 || !(x->unit = calloc (n, sizeof (x->unit[0]))) ||
        !(x->unit_cpus = calloc (n, sizeof (x->unit_cpus[0]))))
        return errprintf (x->err,
                          x->errsz,
                          "binding: the topology has no %s objects or "
                          "memory ran out",
                          hwloc_obj_type_string (type));
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type (topo, type, i);
        hwloc_bitmap_t set;

        if (!o || !hwloc_bitmap_intersects (o->cpuset, x->universe))
            continue;
        if (!(set = hwloc_bitmap_alloc ()))
            return errprintf (x->err, x->errsz, "binding: out of memory");
        hwloc_bitmap_and (set, o->cpuset, x->universe);
        x->unit[x->nunits] = o;
        x->unit_cpus[x->nunits++] = set;
    }
    return 0;
}

static int is_under (hwloc_obj_t o, hwloc_obj_t ancestor)
{
    for (; o; o = o->parent) {
        if (o == ancestor)
            return 1;
    }
    return 0;
}

static int units_under (struct ctx *x, hwloc_obj_t obj)
{
    int n = 0;

    for (int i = 0; i < x->nunits; i++)
        n += is_under (x->unit[i], obj);
    return n;
}

static int has_numa_memory (hwloc_obj_t obj)
{
    for (hwloc_obj_t m = obj->memory_first_child; m; m = m->next_sibling) {
        if (m->type == HWLOC_OBJ_NUMANODE || has_numa_memory (m))
            return 1;
    }
    return 0;
}

static int is_domain (struct ctx *x, hwloc_obj_t obj)
{
    switch (x->policy) {
        case BINDING_L3:
            return obj->type == HWLOC_OBJ_L3CACHE;
        case BINDING_SOCKET:
            return obj->type == HWLOC_OBJ_PACKAGE;
        case BINDING_NUMA:
            return has_numa_memory (obj);
        default:
            return obj->parent == NULL; /* core: the whole node */
    }
}

static void collect_domains (struct ctx *x, hwloc_obj_t obj)
{
    int k = units_under (x, obj);

    if (k == 0)
        return;
    if (is_domain (x, obj)) {
        x->dom[x->ndom] = obj;
        x->dom_units[x->ndom++] = k;
        return;
    }
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling)
        collect_domains (x, c);
}

static int find_domains (struct ctx *x)
{
    int depth = hwloc_topology_get_depth (x->plan->topo), n = 1;

    for (int d = 0; d < depth; d++)
        n += hwloc_get_nbobjs_by_depth (x->plan->topo, d);

    if (!(x->dom = calloc (n, sizeof (x->dom[0]))) ||
        !(x->dom_units = calloc (n, sizeof (x->dom_units[0]))) ||
        !(x->dom_ranks = calloc (n, sizeof (x->dom_ranks[0]))))
        return errprintf (x->err, x->errsz, "binding: out of memory");
    collect_domains (x, hwloc_get_root_obj (x->plan->topo));
    return 0;
}

/* Split m among n parts in proportion to w, at most cap each, the
 * remainder going to the largest shortfalls (first on ties). */
static int split (int m, int n, const int *w, const int *cap, int *out)
{
    long long total = 0;
    int left = m;

    for (int i = 0; i < n; i++)
        total += w[i];
    if (total <= 0)
        return -1;
    for (int i = 0; i < n; i++) {
        long long share = (long long)m * w[i] / total;
        out[i] = share < cap[i] ? (int)share : cap[i];
        left -= out[i];
    }
    while (left > 0) {
        int best = -1;
        long long bestd = 0;
        for (int i = 0; i < n; i++) {
            long long d = (long long)m * w[i] - (long long)out[i] * total;
            if (out[i] < cap[i] && (best < 0 || d > bestd)) {
                best = i;
                bestd = d;
            }
        }
        if (best < 0)
            return -1;
        out[best]++;
        left--;
    }
    return 0;
}

static int dom_index (struct ctx *x, hwloc_obj_t obj)
{
    for (int i = 0; i < x->ndom; i++) {
        if (x->dom[i] == obj)
            return i;
    }
    return -1;
}

/* Ranks a domain can take: "unlimited" is the largest nlocal, so that
 * sums over domains stay far from overflowing. */
#define UNLIMITED 65536

static int dom_cap (struct ctx *x, int d)
{
    if (x->oversubscribe || x->whole)
        return UNLIMITED;
    if (x->opts->cpus_per_rank > 0)
        return x->dom_units[d] / x->opts->cpus_per_rank;
    return x->dom_units[d];
}

static int count_children (hwloc_obj_t obj)
{
    int n = 0;

    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling)
        n++;
    return n;
}

/* Spread m ranks over the domains below obj (hierarchically). */
static int distribute (struct ctx *x, hwloc_obj_t obj, int m)
{
    int d, n = count_children (obj), i = 0, rc = -1;
    int *w = NULL, *cap = NULL, *share = NULL;

    if (m == 0)
        return 0;
    if ((d = dom_index (x, obj)) >= 0) {
        x->dom_ranks[d] += m;
        return 0;
    }
    if (!(w = calloc (n + 1, sizeof (int))) || !(cap = calloc (n + 1, sizeof (int))) ||
        !(share = calloc (n + 1, sizeof (int))))
        goto out;
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling, i++) {
        for (int j = 0; j < x->ndom; j++) {
            if (is_under (x->dom[j], c)) {
                w[i] += x->dom_units[j];
                cap[i] += dom_cap (x, j);
            }
        }
    }
    if (split (m, n, w, cap, share) < 0)
        goto out;
    i = 0;
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling, i++) {
        if (distribute (x, c, share[i]) < 0)
            goto out;
    }
    rc = 0;
out:
    free (w);
    free (cap);
    free (share);
    return rc;
}

static int emit_chunk (struct ctx *x, const int *list, int start, int len)
{
    struct binding_plan *plan = x->plan;
    int s = x->next++;
    hwloc_bitmap_t set;

    if (s >= plan->nlocal || !(set = hwloc_bitmap_alloc ()))
        return -1;
    for (int i = start; i < start + len; i++)
        hwloc_bitmap_or (set, set, x->unit_cpus[list[i]]);
    plan->cpus[s] = set;
    plan->slots[s].ncores = len;
    return 0;
}

/* Cut m blocks of x->c units inside obj, keeping blocks inside children
 * when they fit there, else spreading them over obj's units in order. */
static int place (struct ctx *x, hwloc_obj_t obj, int m)
{
    int n = 0, i = 0, rc = -1, sumcap = 0;
    int *w = NULL, *cap = NULL, *share = NULL, *list = NULL;
    hwloc_obj_t only = NULL;

    if (m == 0)
        return 0;
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling) {
        if (units_under (x, c) > 0) {
            n++;
            only = c;
        }
    }
    if (n == 1)
        return place (x, only, m);
    if (!(w = calloc (count_children (obj) + 1, sizeof (int))) ||
        !(cap = calloc (count_children (obj) + 1, sizeof (int))) ||
        !(share = calloc (count_children (obj) + 1, sizeof (int))) ||
        !(list = calloc (x->nunits + 1, sizeof (int))))
        goto out;
    if (n >= 2 && !x->whole) {
        for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling, i++) {
            w[i] = units_under (x, c);
            cap[i] = w[i] / x->c;
            sumcap += cap[i];
        }
        if (sumcap < m && x->oversubscribe) {
            /* shared cores: spread the excess over the children too */
            for (int k = 0; k < i; k++)
                cap[k] = w[k] > 0 ? UNLIMITED : 0;
            sumcap = m;
        }
        if (sumcap >= m) {
            if (split (m, i, w, cap, share) < 0)
                goto out;
            i = 0;
            for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling, i++) {
                if (place (x, c, share[i]) < 0)
                    goto out;
            }
            rc = 0;
            goto out;
        }
    }
    n = 0;
    for (int u = 0; u < x->nunits; u++) {
        if (is_under (x->unit[u], obj))
            list[n++] = u;
    }
    for (int j = 0; j < m; j++) {
        int len = x->whole || x->c > n ? n : x->c;
        int start = (int)((long long)j * n / m);
        if (start + len > n)
            start = n - len;
        if (emit_chunk (x, list, start, len) < 0)
            goto out;
    }
    rc = 0;
out:
    free (w);
    free (cap);
    free (share);
    free (list);
    return rc;
}

static const char *domain_word (enum binding_policy policy)
{
    switch (policy) {
        case BINDING_L3:
            return "L3 caches";
        case BINDING_NUMA:
            return "NUMA nodes";
        case BINDING_SOCKET:
            return "packages";
        default:
            return "nodes";
    }
}

/* Spread the ranks and cut their cpus. */
static int place_ranks (struct ctx *x, int narrowed)
{
    const struct binding_opts *o = x->opts;
    int n = x->plan->nlocal, cap = 0, cpr = o->cpus_per_rank;
    char label[64], ucpus[256];

    policy_label (o, label, sizeof (label));
    list_snprintf (ucpus, sizeof (ucpus), x->universe);
    if (find_domains (x) < 0)
        return -1;
    if (x->ndom == 0)
        return errprintf (x->err,
                          x->errsz,
                          "%s: hwloc shows no %s in the cpuset to divide (cpus %s); use "
                          "--bind=core or --bind=numa",
                          label,
                          domain_word (x->policy),
                          ucpus);
    for (int d = 0; d < x->ndom; d++)
        cap += dom_cap (x, d);
    if (cap < n) {
        const char *why = narrowed ? ", narrowed by this process's binding" : "";
        if (x->policy == BINDING_CORE && cpr <= 0)
            return errprintf (x->err,
                              x->errsz,
                              "%s: %d local ranks need %d cores but the cpuset to divide "
                              "has %d (cpus %s%s); %s",
                              label,
                              n,
                              n,
                              x->nunits,
                              ucpus,
                              why,
                              o->exclusive ? "exclusive binding never shares a core: use "
                                             "fewer ranks"
                                           : "use fewer ranks, --oversubscribe or "
                                             "--bind=auto");
        return errprintf (
            x->err,
            x->errsz,
            "%s: %d local ranks%s do not fit: only %d fit in the %d %s of the "
            "cpuset to divide (cpus %s%s, %d cores); %s",
            label,
            n,
            cpr > 0 ? " of --cpus-per-rank cores each" : "",
            cap,
            x->ndom,
            x->policy == BINDING_CORE ? "node" : domain_word (x->policy),
            ucpus,
            why,
            x->nunits,
            o->exclusive ? "use fewer ranks or fewer cores per rank"
                         : "use fewer ranks, fewer cores per rank or "
                           "--oversubscribe");
    }
    if (distribute (x, hwloc_get_root_obj (x->plan->topo), n) < 0)
        return errprintf (x->err, x->errsz, "binding: cannot spread %d ranks", n);
    if (cpr > 0)
        x->c = cpr;
    else {
        x->c = INT_MAX;
        for (int d = 0; d < x->ndom; d++) {
            if (x->dom_ranks[d] > 0 && x->dom_units[d] / x->dom_ranks[d] < x->c)
                x->c = x->dom_units[d] / x->dom_ranks[d];
        }
        if (x->c < 1)
            x->c = 1;
    }
    for (int d = 0; d < x->ndom; d++) {
        if (place (x, x->dom[d], x->dom_ranks[d]) < 0)
            return errprintf (x->err, x->errsz, "binding: out of memory");
    }
    if (x->next != n)
        return errprintf (x->err,
                          x->errsz,
                          "binding: placed %d of %d ranks (internal error)",
                          x->next,
                          n);
    return 0;
}

static int gpu_add (struct ctx *x, hwloc_obj_t pci, hwloc_obj_t osdev)
{
    struct gpu *g;

    for (int i = 0; i < x->ngpus; i++) {
        if ((pci && x->gpu[i].pci == pci) || (!pci && x->gpu[i].osdev == osdev))
            return i;
    }
    if (!(g = realloc (x->gpu, (x->ngpus + 1) * sizeof (*g))))
        return -1;
    x->gpu = g;
    g = &x->gpu[x->ngpus];
    memset (g, 0, sizeof (*g));
    g->pci = pci;
    g->osdev = osdev;
    g->cuda = g->nvml = -1;
    if (pci)
        snprintf (g->busid,
                  sizeof (g->busid),
                  "%04x:%02x:%02x.%01x",
                  (unsigned)pci->attr->pcidev.domain,
                  (unsigned)pci->attr->pcidev.bus,
                  (unsigned)pci->attr->pcidev.dev,
                  (unsigned)pci->attr->pcidev.func);
    return x->ngpus++;
}

static int pci_order (const void *a, const void *b)
{
    const struct gpu *x = a, *y = b;
    const struct hwloc_pcidev_attr_s *p, *q;

    if (!x->pci || !y->pci)
        return (x->pci == NULL) - (y->pci == NULL);
    p = &x->pci->attr->pcidev;
    q = &y->pci->attr->pcidev;
    if (p->domain != q->domain)
        return p->domain < q->domain ? -1 : 1;
    if (p->bus != q->bus)
        return p->bus < q->bus ? -1 : 1;
    if (p->dev != q->dev)
        return p->dev < q->dev ? -1 : 1;
    return (int)p->func - (int)q->func;
}

static int index_order (const void *a, const void *b)
{
    const struct gpu *x = a, *y = b;

    return x->index - y->index;
}

/* NVIDIA GPUs from the I/O tree, numbered as CUDA_VISIBLE_DEVICES counts. */
static int find_gpus (struct ctx *x, int cvd_set)
{
    hwloc_topology_t topo = x->plan->topo;
    hwloc_obj_t o = NULL;
    int all_cuda = 1, all_nvml = 1, n;

    while ((o = hwloc_get_next_osdev (topo, o))) {
        int cuda = -1, nvml = -1, i;
        hwloc_obj_t pci =
            o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE ? o->parent : NULL;
        if (!o->name)
            continue;
        if (sscanf (o->name, "cuda%d%n", &cuda, &n) != 1 || o->name[n] != '\0')
            cuda = -1;
        if (sscanf (o->name, "nvml%d%n", &nvml, &n) != 1 || o->name[n] != '\0')
            nvml = -1;
        if (cuda < 0 && nvml < 0)
            continue;
        if ((i = gpu_add (x, pci, o)) < 0)
            return errprintf (x->err, x->errsz, "binding: out of memory");
        if (!x->gpu[i].osdev)
            x->gpu[i].osdev = o;
        if (cuda >= 0)
            x->gpu[i].cuda = cuda;
        if (nvml >= 0) {
            x->gpu[i].nvml = nvml;
            x->gpu[i].uuid = hwloc_obj_get_info_by_name (o, "NVIDIAUUID");
        }
    }
    o = NULL;
    while ((o = hwloc_get_next_pcidev (topo, o))) {
        unsigned cls = o->attr->pcidev.class_id;
        if (o->attr->pcidev.vendor_id == 0x10de && (cls == 0x0302 || cls == 0x0300) &&
            gpu_add (x, o, NULL) < 0)
            return errprintf (x->err, x->errsz, "binding: out of memory");
    }
    if (x->ngpus == 0)
        return 0;
    qsort (x->gpu, x->ngpus, sizeof (x->gpu[0]), pci_order);
    for (int i = 0; i < x->ngpus; i++) {
        struct gpu *g = &x->gpu[i];
        hwloc_obj_t anc =
            hwloc_get_non_io_ancestor_obj (topo, g->pci ? g->pci : g->osdev);
        g->near = anc ? anc->cpuset : hwloc_get_root_obj (topo)->cpuset;
        all_cuda &= g->cuda >= 0;
        all_nvml &= g->nvml >= 0;
    }
    for (int i = 0; i < x->ngpus; i++) {
        struct gpu *g = &x->gpu[i];
        g->index = all_cuda && !cvd_set ? g->cuda : all_nvml ? g->nvml : i;
        snprintf (g->token, sizeof (g->token), "%d", g->index);
    }
    qsort (x->gpu, x->ngpus, sizeof (x->gpu[0]), index_order);
    return 0;
}

/* Which GPUs the inherited CUDA_VISIBLE_DEVICES leaves us; 1 = all of
 * them matched, 0 = some entry names nothing hwloc found (noted). */
static int filter_visible (struct ctx *x, const char *cvd)
{
    char *copy, *tok, *save = NULL;
    int ok = 1;

    if (!(x->visible = calloc (x->ngpus + 1, sizeof (int))))
        return errprintf (x->err, x->errsz, "binding: out of memory");
    if (!cvd) {
        for (int i = 0; i < x->ngpus; i++)
            x->visible[x->nvisible++] = i;
        return 1;
    }
    if (!(copy = strdup (cvd)))
        return errprintf (x->err, x->errsz, "binding: out of memory");
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        int match = -1, number;
        char *end;
        long v;

        while (*tok == ' ')
            tok++;
        errno = 0;
        v = strtol (tok, &end, 10);
        number = *tok && *end == '\0' && errno == 0;
        for (int i = 0; i < x->ngpus && match < 0; i++) {
            const char *uuid = x->gpu[i].uuid;
            if (number ? x->gpu[i].index == v
                       : uuid && strncmp (tok, "GPU-", 4) == 0 &&
                             strncmp (uuid, tok, strlen (tok)) == 0)
                match = i;
        }
        for (int k = 0; k < x->nvisible && match >= 0; k++) {
            if (x->visible[k] == match)
                match = -1; /* listed twice */
        }
        if (match < 0) {
            snprintf (x->plan->note,
                      sizeof (x->plan->note),
                      "CUDA_VISIBLE_DEVICES=%s: entry '%s' names no GPU hwloc found (%d "
                      "found) or repeats one; GPUs not assigned, the variable is left "
                      "alone",
                      cvd,
                      tok,
                      x->ngpus);
            ok = 0;
            break;
        }
        x->visible[x->nvisible++] = match;
        snprintf (x->gpu[match].token, sizeof (x->gpu[match].token), "%s", tok);
    }
    free (copy);
    if (!ok)
        x->nvisible = 0;
    return ok;
}

/* Give each rank its nearest GPU and compute CUDA_VISIBLE_DEVICES. */
static int assign_gpus (struct ctx *x, int bound)
{
    struct binding_plan *plan = x->plan;
    int n = plan->nlocal, distinct = x->nvisible >= n;
    hwloc_bitmap_t tmp = hwloc_bitmap_alloc ();
    char list[sizeof (plan->slots[0].cuda_visible_devices)] = "";
    size_t len = 0;

    if (!tmp)
        return errprintf (x->err, x->errsz, "binding: out of memory");
    for (int l = 0; l < n; l++) {
        hwloc_const_bitmap_t rc = plan->cpus[l] ? plan->cpus[l] : x->universe;
        int best = -1, bcover = 0, binter = 0, bnear = 0;

        for (int k = 0; k < x->nvisible; k++) {
            struct gpu *g = &x->gpu[x->visible[k]];
            int cover, inter, nearw;
            if (distinct && g->load > 0)
                continue;
            cover = hwloc_bitmap_isincluded (rc, g->near);
            hwloc_bitmap_and (tmp, rc, g->near);
            inter = hwloc_bitmap_weight (tmp);
            nearw = hwloc_bitmap_weight (g->near);
            if (best < 0 || cover > bcover || (cover == bcover && inter > binter) ||
                (cover == bcover && inter == binter && nearw < bnear) ||
                (cover == bcover && inter == binter && nearw == bnear &&
                 g->load < x->gpu[best].load)) {
                best = x->visible[k];
                bcover = cover;
                binter = inter;
                bnear = nearw;
            }
        }
        if (best < 0)
            continue;
        x->gpu[best].load++;
        plan->slots[l].gpu = x->gpu[best].index;
        snprintf (plan->slots[l].gpu_busid,
                  sizeof (plan->slots[l].gpu_busid),
                  "%s",
                  x->gpu[best].busid);
        if (x->opts->virtual_local_rank &&
            snprintf (plan->slots[l].cuda_visible_devices,
                      sizeof (plan->slots[l].cuda_visible_devices),
                      "%s",
                      x->gpu[best].token) >=
                (int)sizeof (plan->slots[l].cuda_visible_devices))
            goto toolong;
    }
    hwloc_bitmap_free (tmp);
    if (x->opts->virtual_local_rank || !distinct || !bound || x->nvisible == 0)
        return 0;
    /* rank L's GPU at position L, then the unused ones */
    for (int pass = 0; pass < 2; pass++) {
        int m = pass == 0 ? n : x->nvisible;
        for (int i = 0; i < m; i++) {
            const char *tok = NULL;
            if (pass == 0) {
                for (int k = 0; k < x->nvisible; k++) {
                    if (x->gpu[x->visible[k]].index == plan->slots[i].gpu)
                        tok = x->gpu[x->visible[k]].token;
                }
            } else if (x->gpu[x->visible[i]].load == 0)
                tok = x->gpu[x->visible[i]].token;
            if (!tok)
                continue;
            len += snprintf (list + len,
                             len < sizeof (list) ? sizeof (list) - len : 0,
                             "%s%s",
                             len ? "," : "",
                             tok);
            if (len >= sizeof (list))
                goto toolong;
        }
    }
    for (int l = 0; l < n; l++)
        memcpy (plan->slots[l].cuda_visible_devices, list, sizeof (list));
    return 0;
toolong:
    hwloc_bitmap_free (tmp);
    return errprintf (x->err,
                      x->errsz,
                      "binding: CUDA_VISIBLE_DEVICES for %d GPUs does not fit in %zu "
                      "characters",
                      x->nvisible,
                      sizeof (list) - 1);
}

static int fill_slots (struct ctx *x, int membind)
{
    struct binding_plan *plan = x->plan;

    for (int l = 0; l < plan->nlocal; l++) {
        struct binding_slot *s = &plan->slots[l];
        hwloc_bitmap_t nodes;

        if (!plan->cpus[l])
            continue;
        if (!(nodes = hwloc_bitmap_alloc ()))
            return errprintf (x->err, x->errsz, "binding: out of memory");
        hwloc_cpuset_to_nodeset (plan->topo, plan->cpus[l], nodes);
        if (hwloc_bitmap_list_snprintf (s->cpus, sizeof (s->cpus), plan->cpus[l]) >=
                (int)sizeof (s->cpus) ||
            hwloc_bitmap_list_snprintf (s->mems, sizeof (s->mems), nodes) >=
                (int)sizeof (s->mems)) {
            hwloc_bitmap_free (nodes);
            return errprintf (x->err,
                              x->errsz,
                              "binding: the cpu list of local rank %d is too long",
                              l);
        }
        s->numa_node = hwloc_bitmap_weight (nodes) == 1 ? hwloc_bitmap_first (nodes) : -1;
        if (membind && !s->kept && !hwloc_bitmap_iszero (nodes)) {
            s->membind = 1;
            plan->mems[l] = nodes;
        } else
            hwloc_bitmap_free (nodes);
    }
    return 0;
}

static void ctx_free (struct ctx *x)
{
    for (int i = 0; i < x->nunits; i++)
        hwloc_bitmap_free (x->unit_cpus[i]);
    free (x->unit);
    free (x->unit_cpus);
    free (x->dom);
    free (x->dom_units);
    free (x->dom_ranks);
    free (x->gpu);
    free (x->visible);
    hwloc_bitmap_free (x->universe);
}

struct binding_plan *
binding_plan_create (const struct binding_opts *opts, int nlocal, char *err, size_t errsz)
{
    struct binding_plan *plan = NULL;
    struct ctx x = {.opts = opts, .err = err, .errsz = errsz};
    const char *launcher, *cvd = getenv ("CUDA_VISIBLE_DEVICES");
    char lbuf[128], label[64], ucpus[256];
    int narrowed = 0, kept = 0, gpus_ok;

    if (err && errsz)
        err[0] = '\0';
    if (!opts || nlocal < 1 || nlocal > UNLIMITED) {
        errprintf (
            err, errsz, "binding: %d local ranks (accepted: 1..%d)", nlocal, UNLIMITED);
        errno = EINVAL;
        return NULL;
    }
    policy_label (opts, label, sizeof (label));
    if ((int)opts->policy < BINDING_NONE || opts->policy > BINDING_AUTO) {
        errprintf (err, errsz, "binding: unknown policy %d", (int)opts->policy);
        errno = EINVAL;
        return NULL;
    }
    if (opts->cpus_per_rank < 0 ||
        (opts->cpus_per_rank > 0 && opts->policy == BINDING_NONE)) {
        errprintf (err,
                   errsz,
                   "--cpus-per-rank=%d: %s (accepted: a positive number of cores with a "
                   "binding policy other than none)",
                   opts->cpus_per_rank,
                   opts->cpus_per_rank < 0 ? "negative" : "--bind=none binds nothing");
        errno = EINVAL;
        return NULL;
    }
    if (!(plan = calloc (1, sizeof (*plan))) || !(x.universe = hwloc_bitmap_alloc ()))
        goto nomem;
    x.plan = plan;
    plan->nlocal = nlocal;
    if (!(plan->slots = calloc (nlocal, sizeof (plan->slots[0]))) ||
        !(plan->cpus = calloc (nlocal, sizeof (plan->cpus[0]))) ||
        !(plan->mems = calloc (nlocal, sizeof (plan->mems[0]))))
        goto nomem;
    for (int l = 0; l < nlocal; l++) {
        plan->slots[l].local_rank = l;
        plan->slots[l].numa_node = -1;
        plan->slots[l].gpu = -1;
    }
    if (load_topology (plan, err, errsz) < 0 || find_universe (&x, &narrowed) < 0 ||
        find_units (&x) < 0)
        goto error;
    list_snprintf (ucpus, sizeof (ucpus), x.universe);

    x.policy = opts->policy;
    x.oversubscribe = opts->oversubscribe && !opts->exclusive;
    launcher = launcher_binding (lbuf, sizeof (lbuf));
    if (narrowed && launcher && opts->respect_launcher && x.policy != BINDING_NONE) {
        kept = 1;
        snprintf (plan->note,
                  sizeof (plan->note),
                  "kept the binding of %s: cpus %s (pass --bind to divide them among "
                  "the %d local ranks)",
                  launcher,
                  ucpus,
                  nlocal);
        for (int l = 0; l < nlocal; l++) {
            plan->slots[l].kept = 1;
            plan->slots[l].ncores = x.nunits;
            if (!(plan->cpus[l] = hwloc_bitmap_dup (x.universe)))
                goto nomem;
        }
    } else if (x.policy != BINDING_NONE) {
        if (x.policy == BINDING_AUTO) {
            int c = opts->cpus_per_rank > 0 ? opts->cpus_per_rank : 1;
            x.policy = BINDING_CORE;
            if ((long long)nlocal * c > x.nunits && !opts->oversubscribe) {
                x.policy = BINDING_NUMA;
                x.whole = 1;
                snprintf (plan->note,
                          sizeof (plan->note),
                          "--bind=auto: %d local ranks%s need more than the %d cores of "
                          "cpus %s: each rank is bound to its whole NUMA node, sharing "
                          "its cores",
                          nlocal,
                          opts->cpus_per_rank > 0 ? " of --cpus-per-rank cores" : "",
                          x.nunits,
                          ucpus);
            }
        }
        if (place_ranks (&x, narrowed) < 0)
            goto error;
    }
    if (fill_slots (&x, x.policy == BINDING_NUMA) < 0)
        goto error;

    if (find_gpus (&x, cvd != NULL) < 0 || (gpus_ok = filter_visible (&x, cvd)) < 0)
        goto error;
    if (opts->require_gpu && x.nvisible < nlocal) {
        if (x.nvisible == 0)
            errprintf (err,
                       errsz,
                       "%s places each rank by its GPU, but there is no GPU for %d local "
                       "ranks (hwloc found %d NVIDIA GPUs%s%s); use --bind=%s on nodes "
                       "without GPUs",
                       label,
                       nlocal,
                       x.ngpus,
                       cvd ? ", CUDA_VISIBLE_DEVICES=" : "",
                       cvd ? cvd : "",
                       binding_policy_name (opts->policy));
        else
            errprintf (err,
                       errsz,
                       "%s needs one GPU per local rank: %d local ranks but %d GPUs%s%s",
                       label,
                       nlocal,
                       x.nvisible,
                       cvd ? " in CUDA_VISIBLE_DEVICES=" : "",
                       cvd ? cvd : "");
        goto error;
    }
    if (assign_gpus (&x, x.policy != BINDING_NONE && !kept) < 0)
        goto error;
    if (gpus_ok && x.nvisible > 0 && x.nvisible < nlocal && !opts->virtual_local_rank &&
        x.policy != BINDING_NONE && !plan->note[0])
        snprintf (plan->note,
                  sizeof (plan->note),
                  "%d local ranks share %d GPUs: CUDA_VISIBLE_DEVICES is left alone, "
                  "each rank's nearest GPU is in its binding line",
                  nlocal,
                  x.nvisible);
    ctx_free (&x);
    return plan;
nomem:
    errprintf (err, errsz, "binding: out of memory");
    errno = ENOMEM;
error:
    if (errno == 0)
        errno = EINVAL;
    ctx_free (&x);
    binding_plan_destroy (plan);
    return NULL;
}

const struct binding_slot *binding_plan_slot (const struct binding_plan *plan,
                                              int local_rank)
{
    if (!plan || local_rank < 0 || local_rank >= plan->nlocal)
        return NULL;
    return &plan->slots[local_rank];
}

const char *binding_plan_note (const struct binding_plan *plan)
{
    return plan ? plan->note : "";
}

int binding_plan_is_this_system (const struct binding_plan *plan)
{
    return plan && plan->topo && hwloc_topology_is_thissystem (plan->topo);
}

int binding_apply (const struct binding_plan *plan,
                   int local_rank,
                   char *err,
                   size_t errsz)
{
    const struct binding_slot *s = binding_plan_slot (plan, local_rank);
    const char *xml;

    if (!s) {
        errno = EINVAL;
        return errprintf (err,
                          errsz,
                          "binding: local rank %d is not in the plan (0..%d)",
                          local_rank,
                          plan ? plan->nlocal - 1 : -1);
    }
    if (s->kept || !plan->cpus[local_rank])
        return 0;
    if (!hwloc_topology_is_thissystem (plan->topo)) {
        xml = getenv ("HWLOC_XMLFILE");
        errno = EINVAL;
        return errprintf (
            err,
            errsz,
            "binding: cannot bind local rank %d: the topology is not this "
            "machine's (HWLOC_XMLFILE=%s; set HWLOC_THISSYSTEM=1 to bind by "
            "it anyway)",
            local_rank,
            xml ? xml : "");
    }
    /* after fork the child is single-threaded: bind the thread, which
     * is the process, without walking /proc/self/task */
    if (hwloc_set_cpubind (plan->topo, plan->cpus[local_rank], HWLOC_CPUBIND_THREAD) < 0)
        return errprintf (err,
                          errsz,
                          "binding: the OS refused to bind local rank %d to cpus %s: %s",
                          local_rank,
                          s->cpus,
                          strerror (errno));
    if (plan->mems[local_rank] &&
        hwloc_set_membind (plan->topo,
                           plan->mems[local_rank],
                           HWLOC_MEMBIND_BIND,
                           HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_STRICT |
                               HWLOC_MEMBIND_BYNODESET) < 0)
        return errprintf (
            err,
            errsz,
            "binding: the OS refused to bind the memory of local rank %d to "
            "NUMA node %s: %s (its cpus %s are bound)",
            local_rank,
            s->mems,
            strerror (errno),
            s->cpus);
    return 0;
}

int binding_format (
    const struct binding_plan *plan, int local_rank, int rank, char *buf, size_t size)
{
    const struct binding_slot *s = binding_plan_slot (plan, local_rank);
    char cpus[600], numa[96], gpu[64];
    int n;

    if (!s || !buf)
        return -1;
    if (s->cpus[0] == '\0')
        snprintf (cpus, sizeof (cpus), "unbound");
    else if (s->kept)
        snprintf (cpus, sizeof (cpus), "%s (launcher's binding)", s->cpus);
    else
        snprintf (cpus,
                  sizeof (cpus),
                  "%s (%d %s)",
                  s->cpus,
                  s->ncores,
                  s->ncores == 1 ? "core" : "cores");
    if (s->mems[0] == '\0')
        snprintf (numa, sizeof (numa), "-");
    else
        snprintf (
            numa, sizeof (numa), "%s%s", s->mems, s->membind ? " (memory bound)" : "");
    if (s->gpu < 0)
        snprintf (gpu, sizeof (gpu), "none");
    else if (s->gpu_busid[0])
        snprintf (gpu, sizeof (gpu), "%d (%s)", s->gpu, s->gpu_busid);
    else
        snprintf (gpu, sizeof (gpu), "%d", s->gpu);
    n = snprintf (buf,
                  size,
                  "rank %d local %d cpus %s numa %s gpu %s",
                  rank,
                  local_rank,
                  cpus,
                  numa,
                  gpu);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

void binding_plan_destroy (struct binding_plan *plan)
{
    int saved = errno;

    if (plan) {
        for (int l = 0; plan->cpus && l < plan->nlocal; l++)
            hwloc_bitmap_free (plan->cpus[l]);
        for (int l = 0; plan->mems && l < plan->nlocal; l++)
            hwloc_bitmap_free (plan->mems[l]);
        free (plan->cpus);
        free (plan->mems);
        free (plan->slots);
        if (plan->topo)
            hwloc_topology_destroy (plan->topo);
        free (plan);
    }
    errno = saved;
}
