/* binding_topo.c - the topology of a binding plan: loading it, binding by it
 *
 * binding_plan_create loads the topology once per plan (the plan owns it);
 * binding_apply binds a worker by it between fork and exec, which only
 * this machine's topology allows (binding.h: Cost, and HWLOC_XMLFILE).
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

/* Load the topology with its GPUs.  HWLOC_XMLFILE is loaded explicitly:
 * hwloc would silently fall back to this machine when it cannot read it.
 * Components that would initialize GPU runtimes in the supervisor (CUDA
 * creates a context on every GPU, OpenCL loads vendor ICDs, GL opens X
 * displays) are left out; so is "pci" (libpciaccess leaks ~1 KB per load),
 * whose devices the Linux backend reads from sysfs instead.  NVML stays:
 * it names GPUs without creating contexts.  Components that are not
 * installed make set_components fail, which is harmless. */
int bind_load_topology (struct binding_plan *plan, elastic_error_t *err)
{
    static const char *skip[] = {"pci", "cuda", "opencl", "gl", "rsmi", "levelzero"};
    const char *xml = getenv ("HWLOC_XMLFILE");

    if (hwloc_topology_init (&plan->topo) < 0) {
        plan->topo = NULL;
        return errprintf (
            err, "hwloc: cannot initialize a topology: %s", strerror (errno));
    }
    for (size_t i = 0; i < sizeof (skip) / sizeof (skip[0]); i++)
        (void)hwloc_topology_set_components (
            plan->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
    if (hwloc_topology_set_io_types_filter (plan->topo,
                                            HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0)
        return errprintf (
            err, "hwloc: cannot enable I/O discovery: %s", strerror (errno));
    if (xml && *xml && hwloc_topology_set_xml (plan->topo, xml) < 0)
        return errprintf (
            err, "HWLOC_XMLFILE=%s: hwloc cannot read it: %s", xml, strerror (errno));
    if (hwloc_topology_load (plan->topo) < 0)
        return errprintf (err,
                          "hwloc: cannot load the topology%s%s: %s",
                          xml && *xml ? " from HWLOC_XMLFILE=" : "",
                          xml && *xml ? xml : "",
                          strerror (errno));
    return 0;
}

int binding_plan_is_this_system (const struct binding_plan *plan)
{
    return plan && plan->topo && hwloc_topology_is_thissystem (plan->topo);
}

int binding_apply (const struct binding_plan *plan, int local_rank, elastic_error_t *err)
{
    const struct binding_slot *s = binding_plan_slot (plan, local_rank);
    const char *xml;

    if (!s) {
        errno = EINVAL;
        return errprintf (err,
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
            "binding: the OS refused to bind the memory of local rank %d to "
            "NUMA node %s: %s (its cpus %s are bound)",
            local_rank,
            s->mems,
            strerror (errno),
            s->cpus);
    return 0;
}
