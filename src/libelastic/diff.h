/* diff.h - differential snapshots: the blocks of an array that changed (internal)
 *
 * An array snapshotted differentially is cut into blocks of diff_block_kib;
 * each snapshot hashes every block (XXH3, 128 bits) and compares it with its
 * hash at the last committed snapshot.  The sender side (this rank's live
 * arrays and its L1 ring) gives every block content a content id, new at each
 * change, and remembers which content id each L1 slot holds: a block is
 * copied into a slot only when the slot does not hold its current content.
 * The bytes to send to the L2 buddy are a list of extents (byte ranges of the
 * serialized snapshot): the values, the blobs and the arrays in full, of a
 * differential array only its changed blocks.  The receiver side keeps where
 * its two L2 buffers differ (the extents last received), so that it fills the
 * new copy with what was not sent from its committed copy.
 *
 * Whatever is not proven identical is copied: a new layout, a slot whose
 * bytes were replaced (a restore), a snapshot that was not committed, a world
 * change (snapshot.c) all make the next one full.
 */
#ifndef ELASTIC_DIFF_H
#define ELASTIC_DIFF_H

#include <stddef.h>
#include <stdint.h>

/* Byte ranges [off, off + len) of a serialized snapshot: ascending, disjoint,
 * adjacent ones merged.  x holds n pairs (off, len). */
struct extents {
    uint64_t *x;
    int n, cap;
};

void ext_free (struct extents *e);

/* Append [off, off + len) (off at or after the end of the last range; len 0
 * is ignored).  Returns 0, or -1 when memory runs out. */
int ext_add (struct extents *e, uint64_t off, uint64_t len);

/* The total bytes of e. */
uint64_t ext_bytes (const struct extents *e);

struct diffstore;

/* Differential state for arrays of a snapshot ring of nslots L1 slots.
 * Returns NULL when memory runs out. */
struct diffstore *diff_create (int nslots);
void diff_destroy (struct diffstore *d);

/* 1 if this build can snapshot differentially (xxhash). */
int diff_available (void);

/* Copy array a's bytes (live data src, bytes long, at offset off of the
 * serialized snapshot) into L1 slot k (slot: the slot's first byte), in
 * blocks of block bytes, copying only the blocks the slot does not hold
 * already, and append to tx what the L2 buddy must receive of it (the
 * changed blocks).  *diffed is set to 1 if tx may leave out blocks of it
 * (there was a base to compare with), else 0.  Returns 0, or -1 when
 * memory runs out (then nothing was copied: copy it in full). */
int diff_copy_array (struct diffstore *d,
                     int a,
                     int k,
                     const void *src,
                     size_t bytes,
                     size_t off,
                     size_t block,
                     char *slot,
                     struct extents *tx,
                     int *diffed);

/* Forget array a (no longer differential): the next time it is, it starts
 * over. */
void diff_forget_array (struct diffstore *d, int a);

/* L1 slot k's bytes were replaced (a restore staged into it). */
void diff_forget_slot (struct diffstore *d, int k);

/* The snapshot in progress was not committed, or the world changed: the
 * next one compares with nothing (a full snapshot), and the receiver's two
 * L2 buffers may differ anywhere. */
void diff_uncommitted (struct diffstore *d);

/* The receiver side, before a differential receive into pend (pend_size
 * bytes) of the extents rx: copy from the committed copy (committed,
 * committed_size bytes) every byte that rx leaves out and in which the two
 * buffers may differ.  rx is kept (diff_committed).  Returns 0, or -1 when
 * memory runs out. */
int diff_fill (struct diffstore *d,
               char *pend,
               size_t pend_size,
               const char *committed,
               size_t committed_size,
               const struct extents *rx);

/* The snapshot committed: the receiver's new committed L2 copy differs from
 * its other buffer only within the extents received (rx_diff: the receive
 * was differential, with the rx of diff_fill), or anywhere. */
void diff_committed (struct diffstore *d, int rx_diff);

/* Counters of the sender since diff_create (for the debug log and the
 * benchmark): bytes hashed, bytes copied to L1, bytes skipped. */
void diff_stats (const struct diffstore *d,
                 uint64_t *hashed,
                 uint64_t *copied,
                 uint64_t *skipped);

#endif /* ELASTIC_DIFF_H */
