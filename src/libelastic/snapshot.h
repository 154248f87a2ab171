/* snapshot.h - L1 (own memory) and L2 (buddy) in-memory snapshots (internal)
 *
 * A snapshot of one working rank is its state serialized as
 *   [values][array 0 block]...[array A-1 block][blob 0]...[blob B-1]
 * (no header: the replicated metadata gives every size).  L1 is a ring of
 * snapshot_buffer_size such buffers; L2 is the buddy's copy, double-buffered.
 * A snapshot is committed only after an agreement that every working rank
 * completed it, so a failure during a snapshot leaves the previous one whole.
 *
 * Differential arrays (diff.h, elastic_array_set_diff): the L1 slot gets
 * only the blocks it does not hold already, and when the buddy holds this
 * rank's committed copy of the same world and layout, the L2 exchange is a
 * list of extents and one message of the changed bytes; the receiver
 * fills the rest of its new copy from its committed one.  Both copies are
 * always complete.  After a world change, a restore or an uncommitted
 * snapshot the next one is full.
 */
#ifndef ELASTIC_SNAPSHOT_H
#define ELASTIC_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <elastic.h>

struct elastic_manager;
struct registry;

/* Metadata of a committed snapshot, identical on every rank. */
struct snapmeta {
    int64_t step;     /* -1: none */
    int n;            /* working ranks ("old ranks") */
    int na, nb;       /* arrays, blobs */
    int *holder;      /* [n] original rank holding old rank j's L1 */
    int *buddy;       /* [n] original rank holding its L2 copy (-1: none) */
    uint64_t *counts; /* [n * na] array elements */
    uint64_t *blobsz; /* [n * nb] blob bytes */
    uint64_t *bytes;  /* [n] serialized size */
};

struct snapmeta *snapmeta_create (int n, int na, int nb);
void snapmeta_destroy (struct snapmeta *sm);

/* Old rank j's row of sm: its array counts, its blob sizes and its
 * serialized bytes (sm->na + sm->nb + 1 words, the columns of struct
 * reg_item's col, then the bytes), out of or into sm. */
void snapmeta_row_get (const struct snapmeta *sm, int j, uint64_t *row);
void snapmeta_row_set (struct snapmeta *sm, int j, const uint64_t *row);

/* Byte offset of array a / blob b inside old rank j's serialized buffer. */
uint64_t snapmeta_array_offset (const struct snapmeta *sm,
                                const struct registry *reg,
                                int j,
                                int a);
uint64_t snapmeta_blob_offset (const struct snapmeta *sm,
                               const struct registry *reg,
                               int j,
                               int b);

struct snapstore;

struct snapstore *snapstore_create (int nslots);
void snapstore_destroy (struct snapstore *s);

/* The committed metadata (step -1 if none); never NULL. */
struct snapmeta *snapstore_meta (struct snapstore *s);

/* Replace the committed metadata (after a state transfer to a spare). */
void snapstore_set_meta (struct snapstore *s, struct snapmeta *sm);

/* Where this rank holds old rank j's serialized committed snapshot (its own
 * L1, or the L2 copy it keeps for j), or NULL. */
const void *snapstore_source (struct snapstore *s, int me, int j);

/* Start a snapshot of step (collective over m's working communicator):
 * the L1 copy and the sizes now, the L2 exchange posted and left in flight
 * so that it overlaps the application's next step; snapshot_complete
 * finishes and commits it.  Until then the previous snapshot stays
 * committed, and a failure meanwhile recovers from it.  Completes any
 * snapshot in flight first.  Returns as snapshot_take (ELASTIC_OK: in
 * flight or committed). */
int snapshot_begin (struct elastic_manager *m, int64_t step, elastic_error_t *err);

/* Complete the snapshot in flight, if any (collective over the working
 * ranks): wait for its L2 exchange, agree, commit.  Returns as
 * snapshot_take; ELASTIC_OK when none is in flight. */
int snapshot_complete (struct elastic_manager *m, elastic_error_t *err);

/* 1 if periodic snapshots overlap their L2 exchange with the next step
 * (snapshot_begin), 0 with ELASTIC_SNAPSHOT_OVERLAP=0 (synchronous, for
 * comparisons).  Never fails. */
int snapshot_overlap (void);

/* The step of the snapshot in flight, or -1. */
int64_t snapshot_in_flight (struct snapstore *s);

/* Drop the snapshot in flight, never committed (a process failed: the
 * working communicator is revoked so that its requests complete).
 * Collective-free; no-op when none is in flight. */
void snapshot_discard (struct elastic_manager *m);

/* The next L1 slot, reserved for size bytes, to receive old rank j's whole
 * serialized committed snapshot into during a restore (for snapshot_adopt);
 * the next snapshot_take overwrites it.  Returns NULL if memory runs out. */
void *snapstore_stage (struct snapstore *s, int j, size_t size);

/* After a world change that kept the snapshot's layout: make the restored
 * state the committed snapshot of its step without copying it again (each
 * rank's L1 is its own, or the one it staged; L2 copies move only where a
 * buddy changed), collective over m's working communicator.  Returns
 * ELASTIC_OK, ELASTIC_ERR_PROC_FAILED (as snapshot_take), or
 * ELASTIC_ERR_STATE on every rank when some rank cannot adopt (an array not
 * restored in place, values or blobs changed by the handler): then take a
 * snapshot instead. */
int snapshot_adopt (struct elastic_manager *m, elastic_error_t *err);

/* Take a snapshot of the registered state at step, collective over m's
 * working communicator (completing one in flight first).  Returns ELASTIC_OK (committed
 * everywhere), ELASTIC_ERR_PROC_FAILED (a process failed: the communicators are revoked,
 * the previous snapshot stays committed), or another error (not committed anywhere). */
int snapshot_take (struct elastic_manager *m, int64_t step, elastic_error_t *err);

#endif /* ELASTIC_SNAPSHOT_H */
