/* l3.h - L3 snapshots: one parallel HDF5 file per persisted step (internal)
 *
 * The state registry hands its contents to l3_write as plain descriptors; a
 * restore opens the newest valid committed file and reads any block of any
 * array at the new world size.  All functions taking a communicator are
 * collective over it.  Errors: an ELASTIC_ERR_* code and text in err.
 */
#ifndef ELASTIC_L3_H
#define ELASTIC_L3_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

struct l3_array { /* block-distributed along the first dimension */
    const char *name;
    size_t elem_size;       /* bytes of one element (one row) */
    uint64_t local_count;   /* this rank's elements */
    uint64_t global_offset; /* index of this rank's first element */
    uint64_t global_count;  /* elements over all ranks */
    const void *data;       /* local_count * elem_size bytes */
};

struct l3_value { /* replicated, identical on every rank */
    const char *name;
    size_t size;
    const void *data;
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
    const char *dir;    /* snapshot_dir */
    const char *run_id; /* recorded in the file; restore matches it */
    int keep;           /* retention: newest K committed files (0 = all) */
};

/* Write the snapshot of `step` and commit it atomically. */
int l3_write (MPI_Comm comm,
              const struct l3_write_opts *opts,
              const struct l3_state *st,
              int64_t step,
              elastic_error_t *err);

struct l3_file;

/* Open the newest valid committed snapshot in dir (falling back past damaged
 * ones with a warning naming the file and the fault), or ELASTIC_ERR_NO_SNAPSHOT. */
int l3_open_latest (MPI_Comm comm,
                    const char *dir,
                    const char *run_id,
                    struct l3_file **out,
                    elastic_error_t *err);

/* Open one snapshot file by path. */
int l3_open (MPI_Comm comm, const char *path, struct l3_file **out, elastic_error_t *err);

int64_t l3_step (const struct l3_file *f);
int l3_world_size (const struct l3_file *f);
const char *l3_path (const struct l3_file *f);

/* Element size and global count of an array, or ELASTIC_ERR_NOT_FOUND. */
int l3_array_info (const struct l3_file *f, const char *name, size_t *elem_size, uint64_t *global_count);

/* Collective: each rank reads elements [offset, offset+count) into buf,
 * verifying the checksums of the written blocks it touches. */
int l3_read_array (struct l3_file *f,
                   const char *name,
                   uint64_t offset,
                   uint64_t count,
                   void *buf,
                   elastic_error_t *err);

/* A replicated value (size must match). */
int l3_read_value (struct l3_file *f, const char *name, void *buf, size_t size, elastic_error_t *err);

/* The blob written by old_rank; *buf is malloc'ed, the caller frees it. */
int l3_read_blob (struct l3_file *f,
                  const char *name,
                  int old_rank,
                  void **buf,
                  size_t *size,
                  elastic_error_t *err);

void l3_close (struct l3_file *f);

#endif /* ELASTIC_L3_H */
