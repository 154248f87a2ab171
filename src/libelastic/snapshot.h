/* snapshot.h - L1 (own memory) and L2 (buddy) in-memory snapshots (internal)
 *
 * A snapshot of one working rank is its state serialized as
 *   [values][array 0 block]...[array A-1 block][blob 0]...[blob B-1]
 * (no header: the replicated metadata gives every size).  L1 is a ring of
 * snapshot_buffer_size such buffers; L2 is the buddy's copy, double-buffered.
 * A snapshot is committed only after an agreement that every working rank
 * completed it, so a failure during a snapshot leaves the previous one whole.
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

/* Take a snapshot of the registered state at step, collective over m's
 * working communicator.  Returns ELASTIC_OK (committed everywhere),
 * ELASTIC_ERR_PROC_FAILED (a process failed: the communicators are
 * revoked, the previous snapshot stays committed), or another error (not
 * committed anywhere). */
int snapshot_take (struct elastic_manager *m, int64_t step, elastic_error_t *err);

#endif /* ELASTIC_SNAPSHOT_H */
