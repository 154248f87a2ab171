/* tree.h - the mesh's k-ary tree over the live members (pure functions)
 *
 * The members 0..n-1 sit in a fixed radix-k tree: the parent of member i
 * is (i - 1) / k.  Over a live set the tree is repaired the way PRRTE's
 * routed_radix does it, by "next living": a live member's parent is its
 * nearest live ancestor.  A live member none of whose ancestors lives (the
 * children of a lost root, say) hangs under the root, which is the lowest
 * live member: no member is special, losing member 0 is repaired like any
 * other.  The tree depends only on (n, k, live set), so every member that
 * knows the same live set computes the same tree without talking, and a
 * loss changes only the edges around the lost member.
 *
 * Parents always have a lower id than their children (an ancestor, or the
 * lowest live member), which is why connections go from child to parent.
 */
#ifndef ELASTIC_EXEC_MESH_TREE_H
#define ELASTIC_EXEC_MESH_TREE_H

#include <stddef.h>
#include <stdint.h>

#define MESH_NONE UINT32_MAX

/* The lowest live member, or MESH_NONE if none lives.  live[i] != 0 means
 * member i lives. */
uint32_t tree_root (uint32_t n, const uint8_t *live);

/* The parent of live member i, MESH_NONE for the root (or a dead i). */
uint32_t tree_parent (uint32_t n, uint32_t k, const uint8_t *live, uint32_t i);

/* Fill parent[0..n-1] for every member (MESH_NONE for the root and the
 * dead).  O(n log_k n). */
void tree_parents (uint32_t n, uint32_t k, const uint8_t *live, uint32_t *parent);

/* The children of i from a parent[] array, in increasing order, into
 * out[0..max-1].  Returns how many there are (may exceed max). */
size_t
tree_children (uint32_t n, const uint32_t *parent, uint32_t i, uint32_t *out, size_t max);

/* 1 if member m is in the subtree rooted at i (m == i included). */
int tree_in_subtree (uint32_t n, const uint32_t *parent, uint32_t i, uint32_t m);

/* The neighbour of `from` on the way to `to`: a child of from whose subtree
 * holds to, else from's parent.  MESH_NONE if from == to, or there is no
 * way (dead members). */
uint32_t tree_next_hop (uint32_t n, const uint32_t *parent, uint32_t from, uint32_t to);

/* The depth of the tree (edges from the root to the deepest live member). */
uint32_t tree_depth (uint32_t n, const uint32_t *parent);

/* The partition rule (mesh.c's self-fencing): is this member, which sees
 * live[], on the minority side?  suspect[i]: i was lost to silence (it may
 * live on the other side); left[i]: i said bye (it was on this side), both
 * in the last two node timeouts.  A loss proved by a closed connection is in
 * neither.  1 when the suspects outnumber this side (live + left), or tie
 * and the lowest of all of them is a suspect; else 0. */
int tree_minority (uint32_t n,
                   const uint8_t *live,
                   const uint8_t *suspect,
                   const uint8_t *left);

/* The rendezvous's majority rule (rdzv_mesh.c; as torchft's Lighthouse
 * quorum): may the members in now[] form a group after the group prev[]
 * (n entries each, nonzero = in)?  gone[i]: member i's end was seen (its
 * connection closed or was refused, or it said bye; a partition closes no
 * connection, it silences), so it is on no side.  1 when now holds more
 * than half of prev's members that are not gone, or exactly half and the
 * lowest of them, or prev has none; else 0.  Two sides of a partition of
 * prev are disjoint, so they never both form a group. */
int tree_quorum (uint32_t n,
                 const uint8_t *prev,
                 const uint8_t *now,
                 const uint8_t *gone);

#endif /* ELASTIC_EXEC_MESH_TREE_H */
