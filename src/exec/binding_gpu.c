/* binding_gpu.c - a node's NVIDIA GPUs, matched to its local ranks
 *
 * GPUs come from hwloc's I/O objects (CUDA or NVML OS devices, else NVIDIA
 * PCI devices), numbered as CUDA_VISIBLE_DEVICES counts them, limited to
 * those an inherited CUDA_VISIBLE_DEVICES names; each rank gets the most
 * local one, each GPU once while there are enough (binding.h: GPUs).
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
int bind_find_gpus (struct ctx *x, int cvd_set)
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
            return errprintf (x->err, "binding: out of memory");
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
            return errprintf (x->err, "binding: out of memory");
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
int bind_filter_visible (struct ctx *x, const char *cvd)
{
    char *copy, *tok, *save = NULL;
    int ok = 1;

    if (!(x->visible = calloc (x->ngpus + 1, sizeof (int))))
        return errprintf (x->err, "binding: out of memory");
    if (!cvd) {
        for (int i = 0; i < x->ngpus; i++)
            x->visible[x->nvisible++] = i;
        return 1;
    }
    if (!(copy = strdup (cvd)))
        return errprintf (x->err, "binding: out of memory");
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
int bind_assign_gpus (struct ctx *x, int bound)
{
    struct binding_plan *plan = x->plan;
    int n = plan->nlocal, distinct = x->nvisible >= n;
    hwloc_bitmap_t tmp = hwloc_bitmap_alloc ();
    char list[sizeof (plan->slots[0].cuda_visible_devices)] = "";
    size_t len = 0;

    if (!tmp)
        return errprintf (x->err, "binding: out of memory");
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
                      "binding: CUDA_VISIBLE_DEVICES for %d GPUs does not fit in %zu "
                      "characters",
                      x->nvisible,
                      sizeof (list) - 1);
}
