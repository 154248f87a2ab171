/* l3.h - L3 snapshots: one parallel HDF5 file per persisted step (internal)
 *
 * The state registry hands its contents to l3_write as plain descriptors; a
 * restore opens the newest valid committed file and reads any block of any
 * array at the new world size.  Functions taking a communicator are
 * collective over it, and so are l3_read_array and l3_close.  Errors: an
 * ELASTIC_ERR_* code and text in err (err may be NULL); collective calls
 * return the same code and text on every rank.
 *
 * Fault tolerance: HDF5 file access is not fault tolerant under ULFM.  l3
 * never keeps a communicator beyond one call, except an open l3_file, which
 * is bound to the communicator it was opened on.  After a failure and a
 * repair, close every l3_file and pass the repaired communicator.
 *
 * The file layout is described in doc/man/elastic-snapshot.1 (FILE FORMAT).
 */
#ifndef ELASTIC_L3_H
#define ELASTIC_L3_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

#include "l3_format.h" /* enum l3_type */

/* Element types: enum l3_type (l3_format.h). */

struct l3_array { /* block-distributed along the first dimension */
    const char *name;
    size_t elem_size;       /* bytes of one element (one row) */
    uint64_t local_count;   /* this rank's elements */
    uint64_t global_offset; /* index of this rank's first element */
    uint64_t global_count;  /* elements over all ranks */
    const void *data;       /* local_count * elem_size bytes */
    int type;               /* enum l3_type (0: bytes) */
};

struct l3_value { /* replicated, identical on every rank */
    const char *name;
    size_t size;
    const void *data;
    int type; /* enum l3_type (0: bytes) */
};

struct l3_blob { /* opaque per-rank bytes, any size per rank */
    const char *name;
    size_t size;
    const void *data;
};

struct l3_state {
    const struct l3_array *arrays;
    int narrays;
    const struct l3_value *values;
    int nvalues;
    const struct l3_blob *blobs;
    int nblobs;
};

struct l3_write_opts {
    const char *dir;    /* snapshot_dir (created if missing) */
    const char *run_id; /* recorded in the file; restore matches it (NULL: "") */
    int keep;           /* retention: newest K committed files (0 = all) */
    int verify;         /* before the commit, re-read every block and check its
                           checksum (each rank a share); else only the file's
                           structure is checked (by rank 0) */
    int collective;     /* collective MPI-IO data and metadata writes (0:
                           independent; they survive a peer's death, see
                           l3_write.c) */
    void (*test_hook) (void *arg); /* called on every rank after its data is in
                                      the temporary file, before the flush and
                                      the commit (NULL: none; for tests) */
    void *test_arg;
};

/* Write the snapshot of `step` under a temporary name, and commit it
 * atomically (rename) once every rank has written and the file is synced;
 * then update dir/latest, remove stale temporaries, this run's snapshots
 * of later steps (an abandoned timeline) and all but the newest opts->keep.
 * Names, counts, element sizes and the block layout must agree across
 * ranks, and blocks must tile [0, global_count): else ELASTIC_ERR_INVAL and
 * nothing is written.  The file's blocks are reserved before any data is
 * written, so a full file system (or ulimit -f) fails early and cleanly.
 * ELASTIC_ERR_IO: the write failed (older snapshots are untouched and the
 * temporary is removed).  ELASTIC_ERR_EXISTS: dir holds another run's
 * snapshot of the same step (it is left alone).  ELASTIC_ERR_PROC_FAILED: an MPI call
 * reported a process failure (ULFM); the other ranks may not return. */
int l3_write (MPI_Comm comm,
              const struct l3_write_opts *opts,
              const struct l3_state *st,
              int64_t step,
              elastic_error_t *err);

struct l3_file;

/* Open the newest valid committed snapshot of run_id in dir (NULL run_id:
 * any run), verifying every block's checksum; a damaged one is skipped
 * with a one-line warning (rank 0, stderr) naming the file and the fault.
 * ELASTIC_ERR_NO_SNAPSHOT: none is valid (err says why). */
int l3_open_latest (MPI_Comm comm,
                    const char *dir,
                    const char *run_id,
                    struct l3_file **out,
                    elastic_error_t *err);

/* Open one snapshot file by path and verify every block's checksum.
 * ELASTIC_ERR_NO_SNAPSHOT: not an elastic snapshot; ELASTIC_ERR_CORRUPT:
 * damaged; ELASTIC_ERR_IO: cannot be read. */
int l3_open (MPI_Comm comm, const char *path, struct l3_file **out, elastic_error_t *err);

/* Called by l3_restore and l3_restore_latest on every rank with the open
 * file: read what the caller needs (l3_read_array, l3_read_value) and
 * return ELASTIC_OK, or an error with text in err; ELASTIC_ERR_CORRUPT (a
 * checksum found bad while reading) rejects the file. */
typedef int (*l3_read_f) (struct l3_file *f, void *arg, elastic_error_t *err);

/* Collective: l3_open_latest in one pass over the data.  Open the newest
 * committed snapshot checking its structure only, call read (NULL: none),
 * whose reads verify every block they cover, then verify every block,
 * value and blob not verified yet (l3_verify_rest).  A file found damaged
 * at any stage is skipped as by l3_open_latest and read is called again
 * for the older file: on ELASTIC_OK what the last call of read obtained
 * is the returned file's, every checksum of which has been verified.  An
 * error of read other than ELASTIC_ERR_CORRUPT is returned as it is (the
 * file closed).  *nrejected (NULL: not wanted) is set to the number of
 * files rejected as damaged on the way (the same on every rank). */
int l3_restore_latest (MPI_Comm comm,
                       const char *dir,
                       const char *run_id,
                       l3_read_f read,
                       void *arg,
                       struct l3_file **out,
                       int *nrejected,
                       elastic_error_t *err);

/* Collective: l3_open of one file in one pass (as l3_restore_latest, with
 * no older file to fall back to). */
int l3_restore (MPI_Comm comm,
                const char *path,
                l3_read_f read,
                void *arg,
                struct l3_file **out,
                elastic_error_t *err);

/* Collective: verify every block, value and blob of f that no rank has
 * verified yet (by the open, a read, or an earlier call).
 * ELASTIC_ERR_CORRUPT: one is damaged (err names it). */
int l3_verify_rest (struct l3_file *f, elastic_error_t *err);

/* Attributes of an open snapshot (never fail; strings are borrowed). */
int64_t l3_step (const struct l3_file *f);
int l3_world_size (const struct l3_file *f);
const char *l3_path (const struct l3_file *f);
const char *l3_run_id (const struct l3_file *f);

/* Element size and global count of an array, or ELASTIC_ERR_NOT_FOUND. */
int l3_array_info (const struct l3_file *f,
                   const char *name,
                   size_t *elem_size,
                   uint64_t *global_count);

/* Collective: each rank reads elements [offset, offset+count) into buf
 * (count * elem_size bytes) and every written block that the ranks' ranges
 * cover is verified as it arrives (a block split between ranks by
 * combining the crc32s of its pieces).  ELASTIC_ERR_NOT_FOUND,
 * ELASTIC_ERR_INVAL (range), ELASTIC_ERR_CORRUPT (a block's checksum). */
int l3_read_array (struct l3_file *f,
                   const char *name,
                   uint64_t offset,
                   uint64_t count,
                   void *buf,
                   elastic_error_t *err);

/* Size of a replicated value, or ELASTIC_ERR_NOT_FOUND. */
int l3_value_info (const struct l3_file *f, const char *name, size_t *size);

/* Read a replicated value (not collective); size must match, else
 * ELASTIC_ERR_INVAL. */
int l3_read_value (
    struct l3_file *f, const char *name, void *buf, size_t size, elastic_error_t *err);

/* Read the blob written by old_rank (not collective); *buf is malloc'ed
 * (non-NULL even for 0 bytes), the caller frees it.  ELASTIC_ERR_NOT_FOUND:
 * no such blob or old rank. */
int l3_read_blob (struct l3_file *f,
                  const char *name,
                  int old_rank,
                  void **buf,
                  size_t *size,
                  elastic_error_t *err);

/* Collective: close the file and free f (NULL-safe). */
void l3_close (struct l3_file *f);

#endif /* ELASTIC_L3_H */
