/* layout.c - block layouts and buddy maps: pure arithmetic */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdlib.h>

#include "layout.h"

void layout_even (uint64_t global, int n, uint64_t *counts, int stride)
{
    for (int j = 0; j < n; j++)
        counts[(size_t)j * stride] = global / n + ((uint64_t)j < global % n ? 1 : 0);
}

uint64_t layout_sum (const uint64_t *counts, int n, int stride)
{
    uint64_t s = 0;
    for (int j = 0; j < n; j++)
        s += counts[(size_t)j * stride];
    return s;
}

void layout_overlaps (const uint64_t *old_counts,
                      int n_old,
                      const uint64_t *new_counts,
                      int n_new,
                      int stride,
                      layout_overlap_f fn,
                      void *arg)
{
    int j = 0, k = 0;
    uint64_t oo = 0, no = 0;

    while (j < n_old && k < n_new) {
        uint64_t oe = oo + old_counts[(size_t)j * stride];
        uint64_t ne = no + new_counts[(size_t)k * stride];
        uint64_t lo = oo > no ? oo : no;
        uint64_t hi = oe < ne ? oe : ne;
        if (hi > lo)
            fn (j, k, lo, hi, oo, no, arg);
        if (oe < ne) {
            j++;
            oo = oe;
        } else if (ne < oe) {
            k++;
            no = ne;
        } else {
            j++;
            k++;
            oo = oe;
            no = ne;
        }
    }
}

static int cmp_int (const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

int layout_buddies (int n, const int *node, int *buddy)
{
    int *ids = NULL, *order = NULL, nn = 0, pos = 0;

    if (n == 1) {
        buddy[0] = -1;
        return 0;
    }
    if (!(ids = malloc (n * sizeof (int))) || !(order = malloc (n * sizeof (int))))
        goto error;
    /* distinct node ids, sorted */
    for (int j = 0; j < n; j++)
        ids[j] = node[j];
    qsort (ids, n, sizeof (int), cmp_int);
    for (int j = 0; j < n; j++)
        if (nn == 0 || ids[nn - 1] != ids[j])
            ids[nn++] = ids[j];
    /* round-robin over the nodes: the i-th rank of each node in turn */
    for (int round = 0; pos < n; round++) {
        for (int d = 0; d < nn; d++) {
            int seen = 0;
            for (int j = 0; j < n; j++) {
                if (node[j] != ids[d])
                    continue;
                if (seen++ == round) {
                    order[pos++] = j;
                    break;
                }
            }
        }
    }
    for (int i = 0; i < n; i++)
        buddy[order[i]] = order[(i + 1) % n];
    free (ids);
    free (order);
    return 0;
error:
    free (ids);
    free (order);
    return -1;
}
