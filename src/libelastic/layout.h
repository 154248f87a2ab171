/* layout.h - block layouts and buddy maps: pure arithmetic (internal)
 *
 * A layout of one array over n ranks is its per-rank element counts; rank j
 * holds the global elements from the sum of counts[0..j-1] on.  Counts are
 * read with a stride so that a table of several arrays (counts[j * stride +
 * a]) can be used in place.
 */
#ifndef ELASTIC_LAYOUT_H
#define ELASTIC_LAYOUT_H

#include <stdint.h>

/* Split global elements as evenly as possible over n ranks (the first
 * global % n ranks get one more), into counts[j * stride]. */
void layout_even (uint64_t global, int n, uint64_t *counts, int stride);

/* Sum of counts[j * stride] for j < n. */
uint64_t layout_sum (const uint64_t *counts, int n, int stride);

/* Call fn for every non-empty intersection of the blocks of an old layout
 * (n_old ranks) and a new one (n_new ranks) of the same global count, in
 * increasing global order: old rank j, new rank k, global range [lo, hi),
 * and the start of each block (old_start, new_start). */
typedef void (*layout_overlap_f) (int j,
                                  int k,
                                  uint64_t lo,
                                  uint64_t hi,
                                  uint64_t old_start,
                                  uint64_t new_start,
                                  void *arg);
void layout_overlaps (const uint64_t *old_counts,
                      int n_old,
                      const uint64_t *new_counts,
                      int n_new,
                      int stride,
                      layout_overlap_f fn,
                      void *arg);

/* The L2 buddy of every rank, given node[j] (any id; equal ids share a
 * node): a permutation in one cycle in which consecutive ranks sit on
 * different nodes wherever the node sizes allow (ranks taken round-robin
 * over the nodes).  On one node, buddy[j] = (j + 1) % n.  n == 1: buddy -1.
 * Returns -1 if memory runs out. */
int layout_buddies (int n, const int *node, int *buddy);

#endif /* ELASTIC_LAYOUT_H */
