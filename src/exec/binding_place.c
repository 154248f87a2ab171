/* binding_place.c - dividing the cpus to divide among a node's local ranks
 *
 * The universe (the topology's allowed cpuset narrowed by this process's
 * binding) is cut into units (cores, or PUs when hwloc shows no cores);
 * the ranks are spread over the policy's domains in proportion to their
 * units, hierarchically, and each gets an equal block of whole units
 * inside its domain (binding.h has the policies).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>

#include "binding_impl.h"

/* The cpus to divide: the allowed cpuset, narrowed by this process's
 * binding when the topology is this machine's.  Sets *narrowed. */
int bind_find_universe (struct ctx *x, int *narrowed)
{
    hwloc_topology_t topo = x->plan->topo;
    hwloc_bitmap_t allowed = NULL, cur = NULL;
    int rc = -1;

    *narrowed = 0;
    if (!(allowed = hwloc_bitmap_dup (hwloc_topology_get_allowed_cpuset (topo))) ||
        !(cur = hwloc_bitmap_alloc ())) {
        errprintf (x->err, "binding: out of memory");
        goto out;
    }
    hwloc_bitmap_and (allowed, allowed, hwloc_get_root_obj (topo)->cpuset);
    hwloc_bitmap_copy (x->universe, allowed);
    if (hwloc_topology_is_thissystem (topo)) {
        if (hwloc_get_cpubind (topo, cur, 0) < 0) {
            errprintf (x->err,
                       "binding: cannot read this process's cpu binding: %s",
                       strerror (errno));
            goto out;
        }
        hwloc_bitmap_and (x->universe, x->universe, cur);
        *narrowed = !hwloc_bitmap_isequal (x->universe, allowed);
    }
    if (hwloc_bitmap_iszero (x->universe)) {
        char a[256], c[256];
        bind_list_snprintf (a, sizeof (a), allowed);
        bind_list_snprintf (c, sizeof (c), cur);
        errprintf (x->err,
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
int bind_find_units (struct ctx *x)
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
                          "binding: the topology has no %s objects or "
                          "memory ran out",
                          hwloc_obj_type_string (type));
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type (topo, type, i);
        hwloc_bitmap_t set;

        if (!o || !hwloc_bitmap_intersects (o->cpuset, x->universe))
            continue;
        if (!(set = hwloc_bitmap_alloc ()))
            return errprintf (x->err, "binding: out of memory");
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
        return errprintf (x->err, "binding: out of memory");
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
int bind_place_ranks (struct ctx *x, int narrowed)
{
    const struct binding_opts *o = x->opts;
    int n = x->plan->nlocal, cap = 0, cpr = o->cpus_per_rank;
    char label[64], ucpus[256];

    bind_policy_label (o, label, sizeof (label));
    bind_list_snprintf (ucpus, sizeof (ucpus), x->universe);
    if (find_domains (x) < 0)
        return -1;
    if (x->ndom == 0)
        return errprintf (x->err,
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
        return errprintf (x->err, "binding: cannot spread %d ranks", n);
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
            return errprintf (x->err, "binding: out of memory");
    }
    if (x->next != n)
        return errprintf (
            x->err, "binding: placed %d of %d ranks (internal error)", x->next, n);
    return 0;
}

int bind_fill_slots (struct ctx *x, int membind)
{
    struct binding_plan *plan = x->plan;

    for (int l = 0; l < plan->nlocal; l++) {
        struct binding_slot *s = &plan->slots[l];
        hwloc_bitmap_t nodes;

        if (!plan->cpus[l])
            continue;
        if (!(nodes = hwloc_bitmap_alloc ()))
            return errprintf (x->err, "binding: out of memory");
        hwloc_cpuset_to_nodeset (plan->topo, plan->cpus[l], nodes);
        if (hwloc_bitmap_list_snprintf (s->cpus, sizeof (s->cpus), plan->cpus[l]) >=
                (int)sizeof (s->cpus) ||
            hwloc_bitmap_list_snprintf (s->mems, sizeof (s->mems), nodes) >=
                (int)sizeof (s->mems)) {
            hwloc_bitmap_free (nodes);
            return errprintf (
                x->err, "binding: the cpu list of local rank %d is too long", l);
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
