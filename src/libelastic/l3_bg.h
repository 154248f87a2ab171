/* l3_bg.h - the background half of an L3 write: plain POSIX, no MPI (internal)
 *
 * l3_write_begin (collective) lays the snapshot's file out and reserves its
 * blocks; what is left for each rank is to copy its own bytes (its array
 * blocks and blobs) from memory that stays unchanged (the committed L1
 * copy) to fixed offsets of the temporary file, to put the crc32 of each in
 * its slot of the checksum tables, and to fdatasync.  A struct l3_bg is that
 * list of extents and the thread that writes it: it calls no MPI and no
 * HDF5 function, so the application's MPI thread level (MPI_THREAD_SINGLE
 * with MPI_Init) and a non-thread-safe HDF5 are both fine.
 * l3_write_commit (collective) then agrees on every rank's outcome and
 * commits the file as l3_write does.
 *
 * Phases, in order: L3_BG_WRITING (the source memory is being read),
 * L3_BG_FLUSHING (the source is released: it may change), L3_BG_DONE.
 */
#ifndef ELASTIC_L3_BG_H
#define ELASTIC_L3_BG_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

#include "l3.h"

enum l3_bg_phase { L3_BG_IDLE, L3_BG_WRITING, L3_BG_FLUSHING, L3_BG_DONE };

struct l3_bg;

/* A background write of the temporary file path (of step); NULL if memory
 * runs out. */
struct l3_bg *l3_bg_create (const char *path, int64_t step);

/* Add an extent: len bytes from src at file offset off, and the crc32 of
 * those bytes as a native uint64 at file offset crc_off.  -1: out of
 * memory. */
int l3_bg_add (
    struct l3_bg *b, uint64_t off, const void *src, size_t len, uint64_t crc_off);

/* Called in the thread after the data is in the file, before the
 * fdatasync (tests: ELASTIC_TEST_KILL's persist hook). */
void l3_bg_set_hook (struct l3_bg *b, void (*hook) (void *), void *arg);

/* Start the thread (all signals blocked in it).  If no thread can be
 * created, warn and write here and now (the phase is then L3_BG_DONE). */
void l3_bg_start (struct l3_bg *b);

/* The current phase (no wait). */
enum l3_bg_phase l3_bg_phase (struct l3_bg *b);

/* Wait until the phase is at least p. */
void l3_bg_wait (struct l3_bg *b, enum l3_bg_phase p);

/* After L3_BG_DONE: ELASTIC_OK, or ELASTIC_ERR_IO with the text in err.
 * bytes: the data bytes written. */
int l3_bg_result (struct l3_bg *b, uint64_t *bytes, elastic_error_t *err);

/* Of the data bytes written, those written with O_DIRECT. */
uint64_t l3_bg_direct (struct l3_bg *b);

/* Seconds from the start to the release of the source and to the end. */
void l3_bg_times (struct l3_bg *b, double *t_release, double *t_done);

/* Stop early: the thread stops between pieces (or leaves a test hold),
 * never reads the source again after this returns, and b is freed (by the
 * thread itself if its fdatasync is still under way: an abandoned file's
 * flush is never waited for).  NULL-safe.  The temporary file is left to
 * the next write's cleanup (l3_dir_clean). */
void l3_bg_abandon (struct l3_bg *b);

/* Wait for the end, join and free (NULL-safe). */
void l3_bg_destroy (struct l3_bg *b);

/* Retention without the wait: unlink(2) of a 16 MiB file took 5.7 ms here
 * (ext4 with online discard), on rank 0 while every rank waited for the
 * commit.  l3_reaper_retire (an l3_unlink_f for l3_dir_prune, arg the
 * reaper) renames a committed snapshot to its temporary name - out of the
 * directory's committed set at once - and queues it; l3_reaper_start
 * unlinks the queue in a thread of its own (waiting first for the previous
 * one) and takes ownership of r; l3_reaper_wait joins the last one.  A
 * file whose unlink a process exit interrupts is a temporary that the next
 * write's l3_dir_clean removes.  Called from the rank's MPI thread only. */
struct l3_reaper;
struct l3_reaper *l3_reaper_create (void);
int l3_reaper_retire (const char *path, void *reaper);
void l3_reaper_start (struct l3_reaper *r);
void l3_reaper_wait (void);

/* Collective over comm: l3_write up to the point where only the ranks' own
 * bytes are left to write: check and compare the descriptors (the crc32 of
 * values now, of arrays and blobs later, in the thread), prepare the
 * directory, and rank 0 creates the temporary file with HDF5's serial
 * driver (every object, the headers, the values, the block tables) and
 * reserves all its blocks.  On ELASTIC_OK *out is this rank's write (not
 * started; the state's data pointers must stay valid and unchanged until
 * the phase L3_BG_FLUSHING).  Errors as l3_write's, on every rank; the
 * temporary is removed. */
int l3_write_begin (MPI_Comm comm,
                    const struct l3_write_opts *opts,
                    const struct l3_state *st,
                    int64_t step,
                    struct l3_bg **out,
                    elastic_error_t *err);

/* Collective over comm (the ranks of l3_write_begin): agree on every rank's
 * local_rc (its l3_bg_result, text in err), then as l3_write: check the
 * file, commit it atomically, update latest and apply retention.  Errors
 * as l3_write's; on any, the temporary is removed. */
int l3_write_commit (MPI_Comm comm,
                     const struct l3_write_opts *opts,
                     int64_t step,
                     int local_rc,
                     elastic_error_t *err);

#endif /* ELASTIC_L3_BG_H */
