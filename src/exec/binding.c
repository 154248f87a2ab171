/* binding.c - placing a node's local ranks on its hardware with hwloc
 *
 * See binding.h for the policies.  binding_plan_create works in three
 * steps on a topology it loads itself (binding_topo.c): the universe
 * (allowed cpuset and this process's binding) and its units (cores, or PUs
 * when hwloc shows no cores); the ranks spread over the policy's domains
 * and cut into equal blocks of units (binding_place.c); the GPUs found in
 * the I/O tree matched to the ranks (binding_gpu.c).  This file has the
 * options, the phases in order, and the plan's accessors.
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
                   elastic_error_t *err)
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
                          "--numa-binding: unknown value '%s' (accepted: node, socket, "
                          "exclusive, core-complex)",
                          value);
    }
    return errprintf (err,
                      "binding: unknown option '%s' (accepted: --bind, --numa-binding)",
                      flag ? flag : "(null)");
}

/* How the user spelled the policy, for messages. */
const char *bind_policy_label (const struct binding_opts *opts, char *buf, size_t size)
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

void bind_list_snprintf (char *buf, size_t size, hwloc_const_bitmap_t set)
{
    if (hwloc_bitmap_list_snprintf (buf, size, set) < 0 && size > 0)
        buf[0] = '\0';
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

/* The options make sense: nlocal in range, a known policy, cpus_per_rank
 * only with a policy.  Returns 0, or -1 with err and errno EINVAL. */
static int check_opts (const struct binding_opts *opts, int nlocal, elastic_error_t *err)
{
    errno = EINVAL;
    if (!opts || nlocal < 1 || nlocal > UNLIMITED)
        return errprintf (
            err, "binding: %d local ranks (accepted: 1..%d)", nlocal, UNLIMITED);
    if ((int)opts->policy < BINDING_NONE || opts->policy > BINDING_AUTO)
        return errprintf (err, "binding: unknown policy %d", (int)opts->policy);
    if (opts->cpus_per_rank < 0 ||
        (opts->cpus_per_rank > 0 && opts->policy == BINDING_NONE))
        return errprintf (err,
                          "--cpus-per-rank=%d: %s (accepted: a positive number of cores "
                          "with a binding policy other than none)",
                          opts->cpus_per_rank,
                          opts->cpus_per_rank < 0 ? "negative"
                                                  : "--bind=none binds nothing");
    return 0;
}

/* An empty plan of nlocal slots (unbound, no NUMA node, no GPU), or NULL. */
static struct binding_plan *plan_alloc (int nlocal)
{
    struct binding_plan *plan;

    if (!(plan = calloc (1, sizeof (*plan))))
        return NULL;
    plan->nlocal = nlocal;
    if (!(plan->slots = calloc (nlocal, sizeof (plan->slots[0]))) ||
        !(plan->cpus = calloc (nlocal, sizeof (plan->cpus[0]))) ||
        !(plan->mems = calloc (nlocal, sizeof (plan->mems[0])))) {
        binding_plan_destroy (plan);
        return NULL;
    }
    for (int l = 0; l < nlocal; l++) {
        plan->slots[l].local_rank = l;
        plan->slots[l].numa_node = -1;
        plan->slots[l].gpu = -1;
    }
    return plan;
}

/* Every slot keeps the launcher's binding (the whole universe), noted.
 * Returns 0, or -1 when memory runs out. */
static int keep_launcher_binding (struct ctx *x, const char *launcher, const char *ucpus)
{
    struct binding_plan *plan = x->plan;

    snprintf (plan->note,
              sizeof (plan->note),
              "kept the binding of %s: cpus %s (pass --bind to divide them among "
              "the %d local ranks)",
              launcher,
              ucpus,
              plan->nlocal);
    for (int l = 0; l < plan->nlocal; l++) {
        plan->slots[l].kept = 1;
        plan->slots[l].ncores = x->nunits;
        if (!(plan->cpus[l] = hwloc_bitmap_dup (x->universe)))
            return -1;
    }
    return 0;
}

/* --bind=auto: core when the ranks fit the cores, else each rank gets its
 * whole NUMA node (noted). */
static void resolve_auto (struct ctx *x, const char *ucpus)
{
    const struct binding_opts *opts = x->opts;
    int nlocal = x->plan->nlocal, c = opts->cpus_per_rank > 0 ? opts->cpus_per_rank : 1;

    x->policy = BINDING_CORE;
    if ((long long)nlocal * c > x->nunits && !opts->oversubscribe) {
        x->policy = BINDING_NUMA;
        x->whole = 1;
        snprintf (x->plan->note,
                  sizeof (x->plan->note),
                  "--bind=auto: %d local ranks%s need more than the %d cores of "
                  "cpus %s: each rank is bound to its whole NUMA node, sharing "
                  "its cores",
                  nlocal,
                  opts->cpus_per_rank > 0 ? " of --cpus-per-rank cores" : "",
                  x->nunits,
                  ucpus);
    }
}

/* The GPUs: found in the I/O tree, limited by CUDA_VISIBLE_DEVICES, one
 * per rank for --numa-binding, each rank's nearest (kept: the ranks keep
 * the launcher's binding).  Returns 0, or -1 with x->err. */
static int choose_gpus (struct ctx *x, int kept)
{
    const struct binding_opts *opts = x->opts;
    const char *cvd = getenv ("CUDA_VISIBLE_DEVICES");
    int nlocal = x->plan->nlocal, gpus_ok;
    char label[64];

    bind_policy_label (opts, label, sizeof (label));
    if (bind_find_gpus (x, cvd != NULL) < 0 ||
        (gpus_ok = bind_filter_visible (x, cvd)) < 0)
        return -1;
    if (opts->require_gpu && x->nvisible < nlocal) {
        if (x->nvisible == 0)
            return errprintf (x->err,
                              "%s places each rank by its GPU, but there is no GPU for "
                              "%d local ranks (hwloc found %d NVIDIA GPUs%s%s); use "
                              "--bind=%s on nodes without GPUs",
                              label,
                              nlocal,
                              x->ngpus,
                              cvd ? ", CUDA_VISIBLE_DEVICES=" : "",
                              cvd ? cvd : "",
                              binding_policy_name (opts->policy));
        return errprintf (
            x->err,
            "%s needs one GPU per local rank: %d local ranks but %d GPUs%s%s",
            label,
            nlocal,
            x->nvisible,
            cvd ? " in CUDA_VISIBLE_DEVICES=" : "",
            cvd ? cvd : "");
    }
    if (bind_assign_gpus (x, x->policy != BINDING_NONE && !kept) < 0)
        return -1;
    if (gpus_ok && x->nvisible > 0 && x->nvisible < nlocal && !opts->virtual_local_rank &&
        x->policy != BINDING_NONE && !x->plan->note[0])
        snprintf (x->plan->note,
                  sizeof (x->plan->note),
                  "%d local ranks share %d GPUs: CUDA_VISIBLE_DEVICES is left alone, "
                  "each rank's nearest GPU is in its binding line",
                  nlocal,
                  x->nvisible);
    return 0;
}

struct binding_plan *
binding_plan_create (const struct binding_opts *opts, int nlocal, elastic_error_t *err)
{
    struct binding_plan *plan = NULL;
    struct ctx x = {.opts = opts, .err = err};
    const char *launcher;
    char lbuf[128], ucpus[256];
    int narrowed = 0, kept = 0;

    if (err)
        err->text[0] = '\0';
    if (check_opts (opts, nlocal, err) < 0)
        return NULL;
    if (!(plan = plan_alloc (nlocal)) || !(x.universe = hwloc_bitmap_alloc ()))
        goto nomem;
    x.plan = plan;
    if (bind_load_topology (plan, err) < 0 || bind_find_universe (&x, &narrowed) < 0 ||
        bind_find_units (&x) < 0)
        goto error;
    bind_list_snprintf (ucpus, sizeof (ucpus), x.universe);

    x.policy = opts->policy;
    x.oversubscribe = opts->oversubscribe && !opts->exclusive;
    launcher = launcher_binding (lbuf, sizeof (lbuf));
    if (narrowed && launcher && opts->respect_launcher && x.policy != BINDING_NONE) {
        kept = 1;
        if (keep_launcher_binding (&x, launcher, ucpus) < 0)
            goto nomem;
    } else if (x.policy != BINDING_NONE) {
        if (x.policy == BINDING_AUTO)
            resolve_auto (&x, ucpus);
        if (bind_place_ranks (&x, narrowed) < 0)
            goto error;
    }
    if (bind_fill_slots (&x, x.policy == BINDING_NUMA) < 0 || choose_gpus (&x, kept) < 0)
        goto error;
    ctx_free (&x);
    return plan;
nomem:
    errprintf (err, "binding: out of memory");
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
