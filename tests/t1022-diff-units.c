/* t1022-diff-units.c - differential snapshots without MPI (diff.c): the
 * extents, which blocks an L1 slot receives, what the buddy is sent, the
 * back-off of an array that keeps changing, and the receiver's fill of its
 * new L2 copy.  The invariant checked after every step: the slot (or the
 * receiver's copy) holds exactly the live bytes. */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libelastic/diff.h"
#include "lib/tap.h"

#define BLOCK 1024
#define NBLK  16
#define BYTES (NBLK * BLOCK - 100) /* a short last block */
#define OFF   8                    /* the array after an 8-byte value */

static char live[BYTES], slot[2][OFF + BYTES];

/* One snapshot of the array into slot k: returns the extents to send. */
static int snap (struct diffstore *d, int k, struct extents *tx, int *diffed)
{
    tx->n = 0;
    return diff_copy_array (d, 0, k, live, BYTES, OFF, BLOCK, slot[k], tx, diffed);
}

static int slot_is_live (int k)
{
    return memcmp (slot[k] + OFF, live, BYTES) == 0;
}

static void touch (int b)
{
    live[b * BLOCK + 3]++;
}

static void check_extents (void)
{
    struct extents e = {0};

    ok (ext_add (&e, 0, 10) == 0 && ext_add (&e, 10, 5) == 0 && e.n == 1 && e.x[1] == 15,
        "adjacent extents merge");
    ok (ext_add (&e, 20, 0) == 0 && e.n == 1, "an empty extent is ignored");
    ok (ext_add (&e, 20, 4) == 0 && e.n == 2 && ext_bytes (&e) == 19,
        "a gap starts a new extent; ext_bytes sums them");
    ext_free (&e);
}

static void check_sender (void)
{
    struct diffstore *d = diff_create (2);
    struct extents tx = {0};
    int diffed = -1;

    if (!diff_available ()) {
        ok (1, "# SKIP built without xxhash");
        diff_destroy (d);
        return;
    }
    for (int i = 0; i < BYTES; i++)
        live[i] = (char)(i * 7);
    memset (slot, 0xee, sizeof (slot));
    is_int (snap (d, 0, &tx, &diffed), 0, "first snapshot into slot 0");
    ok (slot_is_live (0), "slot 0 holds the live bytes");
    ok (diffed == 0 && tx.n == 1 && tx.x[0] == OFF && tx.x[1] == BYTES,
        "with no base the whole array is sent");

    /* nothing changed: slot 1 still gets every block (it held none) */
    is_int (snap (d, 1, &tx, &diffed), 0, "second snapshot into slot 1");
    ok (slot_is_live (1), "slot 1 holds the live bytes");
    ok (diffed == 1 && tx.n == 0, "nothing changed: nothing is sent");

    /* one block changes: only it is sent, and slot 0 gets only it */
    touch (5);
    memset (slot[0] + OFF + 2 * BLOCK, 0x55, 10); /* a block slot 0 must not rewrite */
    is_int (snap (d, 0, &tx, &diffed), 0, "third snapshot into slot 0");
    ok (diffed == 1 && tx.n == 1 && tx.x[0] == OFF + 5 * BLOCK && tx.x[1] == BLOCK,
        "the changed block 5, and only it, is sent");
    ok (memcmp (slot[0] + OFF + 5 * BLOCK, live + 5 * BLOCK, BLOCK) == 0,
        "slot 0 received the changed block");
    ok ((unsigned char)slot[0][OFF + 2 * BLOCK] == 0x55,
        "an unchanged block slot 0 holds already was not copied again");
    memcpy (slot[0] + OFF + 2 * BLOCK, live + 2 * BLOCK, 10);

    /* slot 1 lacks block 5's new content: copied there too, not re-sent */
    is_int (snap (d, 1, &tx, &diffed), 0, "fourth snapshot into slot 1");
    ok (slot_is_live (1) && tx.n == 0, "slot 1 caught up on block 5; nothing sent");

    /* the last, short block */
    touch (NBLK - 1);
    snap (d, 0, &tx, &diffed);
    ok (slot_is_live (0) && tx.n == 1 && tx.x[0] == OFF + (NBLK - 1) * BLOCK &&
            tx.x[1] == BYTES - (NBLK - 1) * BLOCK,
        "the short last block is sent with its own length");

    /* a snapshot that was not committed: the next compares with nothing */
    diff_uncommitted (d);
    snap (d, 1, &tx, &diffed);
    ok (slot_is_live (1) && diffed == 0 && tx.n == 1 && tx.x[1] == BYTES,
        "after an uncommitted snapshot the whole array is sent");

    /* a slot whose bytes were replaced is rewritten in full */
    memset (slot[0], 0, sizeof (slot[0]));
    diff_forget_slot (d, 0);
    snap (d, 0, &tx, &diffed);
    ok (slot_is_live (0) && diffed == 1 && tx.n == 0,
        "a forgotten slot is refilled, nothing re-sent");

    /* every block changes: sent in full, then copied without hashing */
    for (int b = 0; b < NBLK; b++)
        touch (b);
    snap (d, 1, &tx, &diffed);
    ok (slot_is_live (1) && tx.n == 1 && tx.x[1] == BYTES,
        "every block changed: all of it sent");
    touch (3);
    snap (d, 0, &tx, &diffed);
    ok (slot_is_live (0) && diffed == 0 && tx.n == 1 && tx.x[1] == BYTES,
        "back-off: the next snapshot copies and sends everything without hashing");
    snap (d, 1, &tx, &diffed);
    ok (slot_is_live (1) && diffed == 0, "then one that learns the hashes again");
    touch (9);
    snap (d, 0, &tx, &diffed);
    ok (slot_is_live (0) && diffed == 1 && tx.n == 1 && tx.x[0] == OFF + 9 * BLOCK,
        "then differential again: only block 9");
    ext_free (&tx);
    diff_destroy (d);
}

static void check_receiver (void)
{
    struct diffstore *d = diff_create (2);
    char committed[64], pend[64];
    struct extents rx = {0};

    for (int i = 0; i < 64; i++)
        committed[i] = (char)i;
    memset (pend, 0, sizeof (pend));
    /* the two buffers may differ anywhere: all but rx comes from committed */
    ext_add (&rx, 0, 8);
    ext_add (&rx, 40, 8);
    is_int (diff_fill (d, pend, 64, committed, 64, &rx), 0, "fill with no history");
    ok (memcmp (pend + 8, committed + 8, 32) == 0 &&
            memcmp (pend + 48, committed + 48, 16) == 0 && pend[0] == 0 && pend[40] == 0,
        "every byte outside the received extents comes from the committed copy");
    diff_committed (d, 1);
    /* now they differ only in [0,8) and [40,48): the next fill copies only
     * what of those is not received again */
    memset (committed, 'c', sizeof (committed));
    memset (pend, 'p', sizeof (pend));
    rx.n = 0;
    ext_add (&rx, 0, 4);
    is_int (diff_fill (d, pend, 64, committed, 64, &rx), 0, "fill with history");
    ok (pend[0] == 'p' && pend[4] == 'c' && pend[7] == 'c' && pend[8] == 'p' &&
            pend[40] == 'c' && pend[47] == 'c' && pend[48] == 'p',
        "only the bytes that differed and are not received again are copied");
    diff_uncommitted (d);
    memset (pend, 'p', sizeof (pend));
    diff_fill (d, pend, 32, committed, 64, &rx);
    ok (pend[4] == 'c' && pend[31] == 'c' && pend[32] == 'p',
        "after a world change: everything, up to the new size");
    ext_free (&rx);
    diff_destroy (d);
}

int main (void)
{
    check_extents ();
    check_sender ();
    check_receiver ();
    return done_testing ();
}
