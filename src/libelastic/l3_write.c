/* l3_write.c - L3 snapshot write: collective parallel HDF5, atomic commit
 *
 * Every rank checks its descriptors, the ranks compare them (one
 * allgather), rank 0 prepares the directory, and all ranks create the
 * temporary file with the mpio driver (collective metadata reads, alignment
 * to the file system's block size), rank 0 reserves its blocks, all write
 * each dataset, flush (MPI_File_sync) and close.  Data and metadata writes
 * are independent unless opts->collective: each rank writes its blocks,
 * contiguous, with no MPI-IO aggregation, because Open MPI's collective
 * MPI-IO (ompio's fcoll) crashes when a peer dies during a write, while
 * independent writes let the survivors see the failure as an error.  Rank 0 then checks
 * that the file reads back, fsyncs, renames it, and applies retention.
 * After every collective step the ranks agree on the outcome (l3_agree), so
 * that a local failure sends every rank down the same cleanup path instead
 * of into mismatched collectives.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "common/clock.h"
#include "l3.h"
#include "l3_bg.h"
#include "l3_agree.h"
#include "l3_dir.h"
#include "l3_format.h"
#include "log.h"

#define MAX_ALIGN (16u << 20)
#define MIN_ALIGN 4096u

static uint64_t name_hash (const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

enum { A_HASH, A_ELEM, A_TYPE, A_OFF, A_COUNT, A_GLOBAL, A_CRC, A_N };
enum { V_HASH, V_SIZE, V_TYPE, V_CRC, V_N };
enum { B_HASH, B_SIZE, B_CRC, B_N };

struct writer {
    MPI_Comm comm;
    int rank, size;
    const struct l3_state *st;
    const struct l3_write_opts *opts;
    int64_t step;
    uint64_t *all; /* every rank's descriptors, `stride` each */
    int stride;
    hid_t fid;
    int defer_crc; /* l3_write_begin: arrays' and blobs' crc32 come later */
    elastic_error_t *err;
};

static const uint64_t *desc_of (const struct writer *w, int rank)
{
    return w->all + (size_t)rank * (size_t)w->stride;
}

static int check_local (const struct l3_write_opts *opts,
                        const struct l3_state *st,
                        int64_t step,
                        elastic_error_t *err)
{
    if (!opts || !opts->dir || !*opts->dir) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "l3_write: no snapshot directory (snapshot_dir is empty)");
    }
    if (!st || st->narrays < 0 || st->nvalues < 0 || st->nblobs < 0 ||
        (st->narrays > 0 && !st->arrays) || (st->nvalues > 0 && !st->values) ||
        (st->nblobs > 0 && !st->blobs)) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "l3_write: invalid state descriptor (NULL or negative counts)");
    }
    if (step < 0) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "l3_write: step %lld is negative (expected >= 0)",
                         (long long)step);
    }
    if (opts->keep < 0) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "l3_write: keep %d is negative (expected >= 0; 0 keeps all)",
                         opts->keep);
    }
    if (opts->run_id && strlen (opts->run_id) >= 255) {
        return errcodef (
            err, ELASTIC_ERR_INVAL, "l3_write: run id is longer than 254 bytes");
    }
    for (int i = 0; i < st->narrays; i++) {
        const struct l3_array *a = &st->arrays[i];
        size_t ts = l3_type_size (a->type);
        if (!l3_name_valid (a->name)) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "array name '%s' is invalid (1..255 bytes, no '/' or control characters)",
                a->name ? a->name : "(null)");
        }
        for (int j = 0; j < i; j++)
            if (!strcmp (st->arrays[j].name, a->name)) {
                return errcodef (
                    err, ELASTIC_ERR_INVAL, "array '%s' is given twice", a->name);
            }
        if (ts == 0) {
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "array '%s': type %d is not an enum l3_type (0..6)",
                             a->name,
                             a->type);
        }
        if (a->elem_size == 0 || a->elem_size % ts != 0) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "array '%s': elem_size %zu is not a positive multiple of %zu (%s)",
                a->name,
                a->elem_size,
                ts,
                l3_type_name (a->type));
        }
        if (a->global_offset > a->global_count ||
            a->local_count > a->global_count - a->global_offset) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "array '%s': block [%llu, +%llu) is outside the global count %llu",
                a->name,
                (unsigned long long)a->global_offset,
                (unsigned long long)a->local_count,
                (unsigned long long)a->global_count);
        }
        if (a->local_count > 0 && !a->data) {
            return errcodef (err, ELASTIC_ERR_INVAL, "array '%s': data is NULL", a->name);
        }
        if (a->global_count > (uint64_t)SIZE_MAX / a->elem_size) {
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "array '%s': %llu elements overflow",
                             a->name,
                             (unsigned long long)a->global_count);
        }
    }
    for (int i = 0; i < st->nvalues; i++) {
        const struct l3_value *v = &st->values[i];
        size_t ts = l3_type_size (v->type);
        if (!l3_name_valid (v->name)) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "value name '%s' is invalid (1..255 bytes, no '/' or control characters)",
                v->name ? v->name : "(null)");
        }
        for (int j = 0; j < i; j++)
            if (!strcmp (st->values[j].name, v->name)) {
                return errcodef (
                    err, ELASTIC_ERR_INVAL, "value '%s' is given twice", v->name);
            }
        if (ts == 0 || v->size % ts != 0) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "value '%s': type %d with size %zu (the size must be a multiple "
                "of the type's)",
                v->name,
                v->type,
                v->size);
        }
        if (v->size > 0 && !v->data) {
            return errcodef (err, ELASTIC_ERR_INVAL, "value '%s': data is NULL", v->name);
        }
    }
    for (int i = 0; i < st->nblobs; i++) {
        const struct l3_blob *b = &st->blobs[i];
        if (!l3_name_valid (b->name)) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "blob name '%s' is invalid (1..255 bytes, no '/' or control characters)",
                b->name ? b->name : "(null)");
        }
        for (int j = 0; j < i; j++)
            if (!strcmp (st->blobs[j].name, b->name)) {
                return errcodef (
                    err, ELASTIC_ERR_INVAL, "blob '%s' is given twice", b->name);
            }
        if (b->size > 0 && !b->data) {
            return errcodef (err, ELASTIC_ERR_INVAL, "blob '%s': data is NULL", b->name);
        }
    }
    return ELASTIC_OK;
}

/* Every rank registered as many arrays, values and blobs as this one: the
 * same answer on every rank. */
static int check_counts (struct writer *w)
{
    const struct l3_state *st = w->st;
    int counts[3] = {st->narrays, st->nvalues, st->nblobs}, *all_counts;
    int e, rc = ELASTIC_OK;

    if (!(all_counts = malloc (sizeof (int) * 3 * (size_t)w->size))) {
        rc = errcodef (
            w->err, ELASTIC_ERR_NOMEM, "out of memory gathering the snapshot layout");
    }
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        return rc;
    if ((e = MPI_Allgather (counts, 3, MPI_INT, all_counts, 3, MPI_INT, w->comm)) !=
        MPI_SUCCESS) {
        free (all_counts);
        return l3_mpi_error (e, "MPI_Allgather", w->err);
    }
    /* a difference is seen by every rank, so all return here together */
    for (int r = 0; r < w->size; r++)
        if (memcmp (&all_counts[3 * r], counts, sizeof (counts)) != 0) {
            errprintf (w->err,
                       "ranks registered different state: rank %d has %d arrays, %d "
                       "values, %d blobs; "
                       "rank %d has %d, %d, %d",
                       w->rank,
                       counts[0],
                       counts[1],
                       counts[2],
                       r,
                       all_counts[3 * r],
                       all_counts[3 * r + 1],
                       all_counts[3 * r + 2]);
            free (all_counts);
            return ELASTIC_ERR_INVAL;
        }
    free (all_counts);
    return ELASTIC_OK;
}

/* This rank's descriptor row (w->stride words, see A_*, V_*, B_*); with
 * defer, the crc32 of arrays and blobs is left 0 (the thread of l3_bg.c
 * computes it). */
static void describe (const struct l3_state *st, int defer, uint64_t *p)
{
    for (int i = 0; i < st->narrays; i++, p += A_N) {
        const struct l3_array *a = &st->arrays[i];
        p[A_HASH] = name_hash (a->name);
        p[A_ELEM] = a->elem_size;
        p[A_TYPE] = (uint64_t)a->type;
        p[A_OFF] = a->global_offset;
        p[A_COUNT] = a->local_count;
        p[A_GLOBAL] = a->global_count;
        p[A_CRC] = defer ? 0 : l3_crc32 (0, a->data, a->local_count * a->elem_size);
    }
    for (int i = 0; i < st->nvalues; i++, p += V_N) {
        const struct l3_value *v = &st->values[i];
        p[V_HASH] = name_hash (v->name);
        p[V_SIZE] = v->size;
        p[V_TYPE] = (uint64_t)v->type;
        p[V_CRC] = l3_crc32 (0, v->data, v->size);
    }
    for (int i = 0; i < st->nblobs; i++, p += B_N) {
        const struct l3_blob *b = &st->blobs[i];
        p[B_HASH] = name_hash (b->name);
        p[B_SIZE] = b->size;
        p[B_CRC] = defer ? 0 : l3_crc32 (0, b->data, b->size);
    }
}

/* Array i agrees on every rank (name, element size, type, global count)
 * and the ranks' blocks tile it; table: scratch of 3 * w->size words. */
static int check_array (struct writer *w, int i, uint64_t *table)
{
    const char *name = w->st->arrays[i].name;
    const uint64_t *d0 = desc_of (w, 0);
    int k = A_N * i;

    for (int r = 0; r < w->size; r++) {
        const uint64_t *d = desc_of (w, r) + k;
        if (d[A_HASH] != d0[k + A_HASH]) {
            return errcodef (
                w->err,
                ELASTIC_ERR_INVAL,
                "array %d is '%s' on rank 0 but named differently on rank %d",
                i,
                name,
                r);
        }
        if (d[A_ELEM] != d0[k + A_ELEM] || d[A_TYPE] != d0[k + A_TYPE] ||
            d[A_GLOBAL] != d0[k + A_GLOBAL]) {
            return errcodef (w->err,
                             ELASTIC_ERR_INVAL,
                             "array '%s': rank %d has elem_size %llu, type %d, global "
                             "count %llu; rank 0 has "
                             "%llu, %d, %llu",
                             name,
                             r,
                             (unsigned long long)d[A_ELEM],
                             (int)d[A_TYPE],
                             (unsigned long long)d[A_GLOBAL],
                             (unsigned long long)d0[k + A_ELEM],
                             (int)d0[k + A_TYPE],
                             (unsigned long long)d0[k + A_GLOBAL]);
        }
        table[3 * r] = d[A_OFF];
        table[3 * r + 1] = d[A_COUNT];
        table[3 * r + 2] = d[A_CRC];
    }
    if (!l3_blocks_tile (table, w->size, d0[k + A_GLOBAL])) {
        return errcodef (
            w->err,
            ELASTIC_ERR_INVAL,
            "array '%s': the ranks' blocks overlap or leave gaps in [0, %llu)",
            name,
            (unsigned long long)d0[k + A_GLOBAL]);
    }
    return ELASTIC_OK;
}

/* Value i is the same on every rank (replicated). */
static int check_value (struct writer *w, int i)
{
    const uint64_t *d0 = desc_of (w, 0);
    int k = A_N * w->st->narrays + V_N * i;

    for (int r = 1; r < w->size; r++)
        if (memcmp (desc_of (w, r) + k, d0 + k, sizeof (*d0) * V_N) != 0) {
            return errcodef (w->err,
                             ELASTIC_ERR_INVAL,
                             "value '%s' differs between rank 0 and rank %d (values must "
                             "be replicated)",
                             w->st->values[i].name,
                             r);
        }
    return ELASTIC_OK;
}

/* Blob i has the same name on every rank. */
static int check_blob (struct writer *w, int i)
{
    const struct l3_state *st = w->st;
    const uint64_t *d0 = desc_of (w, 0);
    int k = A_N * st->narrays + V_N * st->nvalues + B_N * i;

    for (int r = 1; r < w->size; r++)
        if (desc_of (w, r)[k + B_HASH] != d0[k + B_HASH]) {
            return errcodef (w->err,
                             ELASTIC_ERR_INVAL,
                             "blob %d is '%s' on rank 0 but named differently on rank %d",
                             i,
                             st->blobs[i].name,
                             r);
        }
    return ELASTIC_OK;
}

/* Gather every rank's descriptors and check that they agree.  The result
 * is the same on every rank (computed from the same gathered data). */
static int gather_check (struct writer *w)
{
    const struct l3_state *st = w->st;
    uint64_t *mine, *table;
    int e, rc;

    if ((rc = check_counts (w)) != ELASTIC_OK)
        return rc;
    w->stride = A_N * st->narrays + V_N * st->nvalues + B_N * st->nblobs + 1;
    mine = calloc ((size_t)w->stride, sizeof (*mine));
    w->all = calloc ((size_t)w->stride * (size_t)w->size, sizeof (*mine));
    if (!mine || !w->all) {
        rc = errcodef (
            w->err, ELASTIC_ERR_NOMEM, "out of memory gathering the snapshot layout");
    }
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK) {
        free (mine);
        return rc;
    }
    describe (st, w->defer_crc, mine);
    e = MPI_Allgather (
        mine, w->stride, MPI_UINT64_T, w->all, w->stride, MPI_UINT64_T, w->comm);
    free (mine);
    if (e != MPI_SUCCESS)
        return l3_mpi_error (e, "MPI_Allgather", w->err);

    if (!(table = malloc (sizeof (*table) * 3 * (size_t)w->size))) {
        return errcodef (
            w->err, ELASTIC_ERR_NOMEM, "out of memory checking the snapshot layout");
    }
    for (int i = 0; i < st->narrays && rc == ELASTIC_OK; i++)
        rc = check_array (w, i, table);
    for (int i = 0; i < st->nvalues && rc == ELASTIC_OK; i++)
        rc = check_value (w, i);
    for (int i = 0; i < st->nblobs && rc == ELASTIC_OK; i++)
        rc = check_blob (w, i);
    free (table);
    return rc;
}

static int attr_write (hid_t obj, const char *name, hid_t type, const void *val)
{
    hid_t space, a;
    int rc = -1;

    if ((space = H5Screate (H5S_SCALAR)) < 0)
        return -1;
    if ((a = H5Acreate2 (obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0) {
        if (H5Awrite (a, type, val) >= 0)
            rc = 0;
        H5Aclose (a);
    }
    H5Sclose (space);
    return rc;
}

static int attr_write_string (hid_t obj, const char *name, const char *val)
{
    hid_t type;
    int rc;

    if ((type = H5Tcopy (H5T_C_S1)) < 0)
        return -1;
    H5Tset_size (type, strlen (val) + 1);
    H5Tset_strpad (type, H5T_STR_NULLTERM);
    H5Tset_cset (type, H5T_CSET_UTF8);
    rc = attr_write (obj, name, type, val);
    H5Tclose (type);
    return rc;
}

static hid_t
dataset_create (hid_t loc, const char *name, hid_t type, int ndims, const hsize_t *dims)
{
    hid_t space, dcpl, d = -1;

    if ((space = ndims == 0 ? H5Screate (H5S_SCALAR)
                            : H5Screate_simple (ndims, dims, NULL)) < 0)
        return -1;
    if ((dcpl = H5Pcreate (H5P_DATASET_CREATE)) >= 0) {
        H5Pset_fill_time (dcpl, H5D_FILL_TIME_NEVER); /* no second write of every byte */
        H5Pset_alloc_time (dcpl, H5D_ALLOC_TIME_EARLY);
        d = H5Dcreate2 (loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Pclose (dcpl);
    }
    H5Sclose (space);
    return d;
}

/* Collective: write rows [row, row+n) of a dataset from buf (n may be 0),
 * in pieces: npieces is the same on every rank. */
static int rows_write (hid_t d,
                       hid_t memtype,
                       hid_t dxpl,
                       uint64_t row,
                       uint64_t n,
                       size_t row_bytes,
                       uint64_t npieces,
                       const void *buf)
{
    static const char dummy;
    uint64_t rows_per = L3_PIECE_BYTES / row_bytes ? L3_PIECE_BYTES / row_bytes : 1;
    hid_t fspace = -1, mspace = -1;
    hsize_t dims[2] = {0, 1};
    int ndims, rc = 0;

    if ((fspace = H5Dget_space (d)) < 0)
        return -1;
    ndims = H5Sget_simple_extent_ndims (fspace);
    H5Sget_simple_extent_dims (fspace, dims, NULL);
    if (ndims < 2)
        dims[1] = 1;
    for (uint64_t p = 0; p < npieces && rc == 0; p++) {
        uint64_t first = p * rows_per,
                 k = first < n ? (n - first < rows_per ? n - first : rows_per) : 0;
        hsize_t start[2] = {row + first, 0}, count[2] = {k, dims[1]},
                mcount = k * dims[1];
        const void *src = k ? (const char *)buf + first * row_bytes : &dummy;

        if (k == 0)
            H5Sselect_none (fspace);
        else if (ndims == 0)
            H5Sselect_all (fspace);
        else if (H5Sselect_hyperslab (fspace, H5S_SELECT_SET, start, NULL, count, NULL) <
                 0) {
            rc = -1;
            break;
        }
        if ((mspace = H5Screate_simple (1, mcount ? &mcount : (hsize_t[]){1}, NULL)) <
            0) {
            rc = -1;
            break;
        }
        if (k == 0)
            H5Sselect_none (mspace);
        if (H5Dwrite (d, memtype, mspace, fspace, dxpl, src) < 0)
            rc = -1;
        H5Sclose (mspace);
    }
    hid_t es = rc < 0 ? l3_h5_errsave () : -1;
    H5Sclose (fspace);
    l3_h5_errrestore (es);
    return rc;
}

/* Collective: a [world][3] uint64 table at group/name, written by rank 0.
 * Agreed: the same result on every rank. */
static int table_write (
    struct writer *w, hid_t group, const char *name, const uint64_t *t, hid_t dxpl)
{
    hsize_t dims[2] = {(hsize_t)w->size, 3};
    hid_t d;
    int rc = ELASTIC_OK;

    if ((d = dataset_create (group, name, H5T_NATIVE_UINT64, 2, dims)) < 0 ||
        attr_write_string (d, "columns", "offset,count,crc32") < 0)
        rc = l3_h5fail (w->err, "cannot create table", name);
    if ((rc = l3_agree (w->comm, rc, w->err)) == ELASTIC_OK) {
        if (rows_write (d,
                        H5T_NATIVE_UINT64,
                        dxpl,
                        0,
                        w->rank == 0 ? (uint64_t)w->size : 0,
                        24,
                        1,
                        t) < 0)
            rc = l3_h5fail (w->err, "cannot write table", name);
        rc = l3_agree (w->comm, rc, w->err);
    }
    if (d >= 0)
        H5Dclose (d);
    return rc;
}

/* Collective: create dataset group/name (type, ndims, dims) and write this
 * rank's rows [row, row+n) of row_bytes each from data; npieces is the same
 * on every rank.  attr: an optional scalar attribute (name, type, value).
 * Agreed: the same result on every rank. */
static int dataset_write (struct writer *w,
                          hid_t group,
                          const char *what,
                          const char *name,
                          hid_t type,
                          int ndims,
                          const hsize_t *dims,
                          const char *attr,
                          hid_t attr_type,
                          const void *attr_val,
                          uint64_t row,
                          uint64_t n,
                          size_t row_bytes,
                          uint64_t npieces,
                          const void *data,
                          hid_t dxpl)
{
    char msg[64];
    hid_t d;
    int rc = ELASTIC_OK;

    snprintf (msg, sizeof (msg), "cannot create %s", what);
    if ((d = dataset_create (group, name, type, ndims, dims)) < 0 ||
        (attr && attr_write (d, attr, attr_type, attr_val) < 0))
        rc = l3_h5fail (w->err, msg, name);
    if ((rc = l3_agree (w->comm, rc, w->err)) == ELASTIC_OK &&
        (ndims == 0 || dims[0] > 0)) {
        snprintf (msg, sizeof (msg), "cannot write %s", what);
        if (rows_write (d, type, dxpl, row, n, row_bytes, npieces, data) < 0)
            rc = l3_h5fail (w->err, msg, name);
        rc = l3_agree (w->comm, rc, w->err);
    }
    if (d >= 0)
        H5Dclose (d);
    return rc;
}

/* Collective: create two groups (the second may be NULL).  Agreed. */
static int
groups_create (struct writer *w, const char *n1, hid_t *g1, const char *n2, hid_t *g2)
{
    int rc = ELASTIC_OK;

    *g1 = H5Gcreate2 (w->fid, n1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (n2)
        *g2 = H5Gcreate2 (w->fid, n2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (*g1 < 0 || (n2 && *g2 < 0))
        rc = l3_h5fail (w->err, "cannot create group", *g1 < 0 ? n1 : n2);
    return l3_agree (w->comm, rc, w->err);
}

static int write_arrays (struct writer *w, hid_t dxpl)
{
    const struct l3_state *st = w->st;
    hid_t ga = -1, gc = -1;
    uint64_t *table = malloc (sizeof (*table) * 3 * (size_t)w->size);
    int rc = ELASTIC_OK;

    if (!table) {
        rc = errcodef (w->err, ELASTIC_ERR_NOMEM, "out of memory");
    }
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK ||
        (rc = groups_create (w, "arrays", &ga, "checksums", &gc)) != ELASTIC_OK)
        goto out;
    for (int i = 0; i < st->narrays && rc == ELASTIC_OK; i++) {
        const struct l3_array *a = &st->arrays[i];
        size_t ts = l3_type_size (a->type);
        hsize_t dims[2] = {a->global_count, a->elem_size / ts};
        uint64_t maxbytes = 0, es = a->elem_size;

        for (int r = 0; r < w->size; r++) {
            const uint64_t *dr = desc_of (w, r) + A_N * i;
            if (dr[A_COUNT] * es > maxbytes)
                maxbytes = dr[A_COUNT] * es;
            table[3 * r] = dr[A_OFF];
            table[3 * r + 1] = dr[A_COUNT];
            table[3 * r + 2] = dr[A_CRC];
        }
        rc = dataset_write (w,
                            ga,
                            "array",
                            a->name,
                            l3_type_h5 (a->type),
                            dims[1] == 1 ? 1 : 2,
                            dims,
                            "elem_size",
                            H5T_NATIVE_UINT64,
                            &es,
                            a->global_offset,
                            a->local_count,
                            a->elem_size,
                            l3_pieces_for (maxbytes),
                            a->data,
                            dxpl);
        if (rc == ELASTIC_OK)
            rc = table_write (w, gc, a->name, table, dxpl);
    }
out:
    if (ga >= 0)
        H5Gclose (ga);
    if (gc >= 0)
        H5Gclose (gc);
    free (table);
    return rc;
}

static int write_values (struct writer *w, hid_t dxpl)
{
    const struct l3_state *st = w->st;
    hid_t g = -1;
    int rc;

    if ((rc = groups_create (w, "values", &g, NULL, NULL)) != ELASTIC_OK)
        goto out;
    for (int i = 0; i < st->nvalues && rc == ELASTIC_OK; i++) {
        const struct l3_value *v = &st->values[i];
        size_t ts = l3_type_size (v->type);
        hsize_t n = v->size / ts;
        uint32_t crc = (uint32_t)desc_of (w, 0)[A_N * st->narrays + V_N * i + V_CRC];
        int scalar = v->type != L3_TYPE_BYTES && n == 1;

        rc = dataset_write (w,
                            g,
                            "value",
                            v->name,
                            l3_type_h5 (v->type),
                            scalar ? 0 : 1,
                            &n,
                            "crc32",
                            H5T_NATIVE_UINT32,
                            &crc,
                            0,
                            w->rank == 0 ? n : 0,
                            ts,
                            1,
                            v->data,
                            dxpl);
    }
out:
    if (g >= 0)
        H5Gclose (g);
    return rc;
}

static int write_blobs (struct writer *w, hid_t dxpl)
{
    const struct l3_state *st = w->st;
    hid_t gb = -1, gi = -1;
    uint64_t *table = malloc (sizeof (*table) * 3 * (size_t)w->size);
    int rc = ELASTIC_OK;

    if (!table) {
        rc = errcodef (w->err, ELASTIC_ERR_NOMEM, "out of memory");
    }
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK ||
        (rc = groups_create (w, "blobs", &gb, "blob_index", &gi)) != ELASTIC_OK)
        goto out;
    for (int i = 0; i < st->nblobs && rc == ELASTIC_OK; i++) {
        const struct l3_blob *b = &st->blobs[i];
        int k = A_N * st->narrays + V_N * st->nvalues + B_N * i;
        uint64_t total = 0, maxbytes = 0, mine = 0;

        for (int r = 0; r < w->size; r++) {
            const uint64_t *dr = desc_of (w, r) + k;
            if (r == w->rank)
                mine = total;
            table[3 * r] = total;
            table[3 * r + 1] = dr[B_SIZE];
            table[3 * r + 2] = dr[B_CRC];
            total += dr[B_SIZE];
            if (dr[B_SIZE] > maxbytes)
                maxbytes = dr[B_SIZE];
        }
        hsize_t dims = total;
        rc = dataset_write (w,
                            gb,
                            "blob",
                            b->name,
                            H5T_NATIVE_UINT8,
                            1,
                            &dims,
                            NULL,
                            -1,
                            NULL,
                            mine,
                            b->size,
                            1,
                            l3_pieces_for (maxbytes),
                            b->data,
                            dxpl);
        if (rc == ELASTIC_OK)
            rc = table_write (w, gi, b->name, table, dxpl);
    }
out:
    if (gb >= 0)
        H5Gclose (gb);
    if (gi >= 0)
        H5Gclose (gi);
    free (table);
    return rc;
}

/* Test hook: ELASTIC_TEST_L3_PAUSE=STEP stops every rank writing STEP after
 * its data is in the temporary file and before the commit, until killed. */
static void test_pause (int rank, int64_t step)
{
    const char *s = getenv ("ELASTIC_TEST_L3_PAUSE");

    if (!s || !*s || strtoll (s, NULL, 10) != step)
        return;
    fprintf (stderr,
             "elastic-test: rank %d paused in l3_write before the commit of step %lld\n",
             rank,
             (long long)step);
    fflush (stderr);
    for (;;)
        pause ();
}

struct prep {
    int64_t created_unix;
    uint64_t align;
};

static int prepare_dir (struct writer *w, struct prep *prep)
{
    elastic_error_t why;
    struct stat sb;
    int rc = ELASTIC_OK, e;

    if (w->rank == 0) {
        prep->created_unix = (int64_t)time (NULL);
        if (l3_mkdir_p (w->opts->dir) < 0) {
            rc = errcodef (w->err,
                           ELASTIC_ERR_IO,
                           "cannot create snapshot directory '%s': %s",
                           w->opts->dir,
                           strerror (errno));
        } else if (l3_dir_clean (w->opts->dir, &why) < 0) {
            rc = errcodef (w->err, ELASTIC_ERR_IO, "%s", why.text);
        } else if (stat (w->opts->dir, &sb) == 0 && sb.st_blksize > 0)
            prep->align = (uint64_t)sb.st_blksize;
        else
            prep->align = MIN_ALIGN;
        if (prep->align < MIN_ALIGN)
            prep->align = MIN_ALIGN;
        if (prep->align > MAX_ALIGN)
            prep->align = MAX_ALIGN;
    }
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        return rc;
    if ((e = MPI_Bcast (prep, sizeof (*prep), MPI_BYTE, 0, w->comm)) != MPI_SUCCESS)
        return l3_mpi_error (e, "MPI_Bcast", w->err);
    return ELASTIC_OK;
}

static int write_header (struct writer *w, const struct prep *prep)
{
    char created[40];
    time_t t = (time_t)prep->created_unix;
    struct tm tm;
    int world = w->size, version = L3_FORMAT_VERSION;

    gmtime_r (&t, &tm);
    strftime (created, sizeof (created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (attr_write_string (w->fid, "elastic_format", L3_FORMAT_NAME) < 0 ||
        attr_write (w->fid, "format_version", H5T_NATIVE_INT, &version) < 0 ||
        attr_write (w->fid, "step", H5T_NATIVE_INT64, &w->step) < 0 ||
        attr_write (w->fid, "world_size", H5T_NATIVE_INT, &world) < 0 ||
        attr_write_string (w->fid, "created", created) < 0 ||
        attr_write (w->fid, "created_unix", H5T_NATIVE_INT64, &prep->created_unix) < 0 ||
        attr_write_string (
            w->fid, "library_version", elastic_version (NULL, NULL, NULL)) < 0 ||
        attr_write_string (w->fid, "run_id", w->opts->run_id ? w->opts->run_id : "") < 0)
        return l3_h5fail (w->err, "cannot write the header attributes of", "/");
    return ELASTIC_OK;
}

static void removed_cb (const char *path, const char *reason, void *arg)
{
    el_log (EL_INFO, "removed L3 snapshot %s (%s)", path, reason);
}

/* An upper bound of the file's size: the data, the block tables, and per
 * object (group or dataset) its alignment padding and metadata. */
static uint64_t size_bound (const struct writer *w, uint64_t align)
{
    const struct l3_state *st = w->st;
    uint64_t bytes = 1u << 20, nobj = 5;

    for (int i = 0; i < st->narrays; i++)
        bytes +=
            st->arrays[i].global_count * st->arrays[i].elem_size + 24 * (uint64_t)w->size;
    for (int i = 0; i < st->nvalues; i++)
        bytes += st->values[i].size;
    for (int i = 0; i < st->nblobs; i++) {
        int k = A_N * st->narrays + V_N * st->nvalues + B_N * i;
        for (int r = 0; r < w->size; r++)
            bytes += desc_of (w, r)[k + B_SIZE];
        bytes += 24 * (uint64_t)w->size;
    }
    nobj += 2 * (uint64_t)st->narrays + (uint64_t)st->nvalues + 2 * (uint64_t)st->nblobs;
    return bytes + nobj * (align + (16u << 10));
}

/* Every rank: its file size limit (ulimit -f) must allow the whole file. */
static int check_fsize_limit (struct writer *w, uint64_t bound)
{
    struct rlimit rl;

    if (getrlimit (RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)rl.rlim_cur < bound) {
        return errcodef (
            w->err,
            ELASTIC_ERR_IO,
            "the snapshot of step %lld needs up to %llu bytes, over the file size limit "
            "(ulimit -f) of %llu bytes on rank %d",
            (long long)w->step,
            (unsigned long long)bound,
            (unsigned long long)rl.rlim_cur,
            w->rank);
    }
    return ELASTIC_OK;
}

/* Rank 0, before the file is created: enough free space for the whole
 * file.  The creation itself writes (the superblock), and HDF5 cannot
 * recover from a write that fails on some ranks only: this check keeps a
 * full file system out of it.  The reservation below then holds the space. */
static int check_free_space (struct writer *w, uint64_t bound)
{
    struct statvfs sv;

    if (statvfs (w->opts->dir, &sv) < 0 || (uint64_t)sv.f_bavail * sv.f_frsize >= bound)
        return ELASTIC_OK;
    return errcodef (
        w->err,
        ELASTIC_ERR_IO,
        "cannot reserve %llu bytes for the snapshot of step %lld in '%s': %s "
        "(%llu bytes free)",
        (unsigned long long)bound,
        (long long)w->step,
        w->opts->dir,
        strerror (ENOSPC),
        (unsigned long long)sv.f_bavail * sv.f_frsize);
}

/* Rank 0: reserve the file's blocks before any data is written, so that a
 * full file system fails here, cleanly, and not inside collective writes
 * (Open MPI's ompio reports no error for a failed collective write).
 * FALLOC_FL_KEEP_SIZE leaves the file size to HDF5; where fallocate is not
 * supported, the free space is checked instead. */
static int reserve_space (struct writer *w, const char *tmp, uint64_t bound)
{
    struct statvfs sv;
    int fd, e = 0;

    if ((fd = open (tmp, O_WRONLY | O_CLOEXEC)) < 0) {
        return errcodef (
            w->err, ELASTIC_ERR_IO, "cannot open '%s': %s", tmp, strerror (errno));
    }
#ifdef FALLOC_FL_KEEP_SIZE
    if (fallocate (fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bound) < 0)
        e = errno;
#else
    e = EOPNOTSUPP;
#endif
    close (fd);
    if (e == 0)
        return ELASTIC_OK;
    if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) {
        if (statvfs (w->opts->dir, &sv) < 0 ||
            (uint64_t)sv.f_bavail * sv.f_frsize >= bound)
            return ELASTIC_OK;
        e = ENOSPC;
    }
    return errcodef (
        w->err,
        ELASTIC_ERR_IO,
        "cannot reserve %llu bytes for the snapshot of step %lld in '%s': %s",
        (unsigned long long)bound,
        (long long)w->step,
        w->opts->dir,
        strerror (e));
}

/* After the close: rank 0 checks the file's structure; with opts->verify,
 * every rank also verifies a share of the checksums (serial reads). */
static int check_written (struct writer *w, const char *tmp)
{
    struct l3_catalog *c = NULL;
    elastic_error_t why;
    int kind, rc = ELASTIC_OK;
    hid_t fid;

    if (w->rank != 0 && !w->opts->verify)
        return ELASTIC_OK;
    if ((fid = l3_file_open_serial (tmp, &kind, &why)) < 0 ||
        (kind = l3_catalog_load (fid, &c, &why)) != L3_GOOD) {
        rc = errcodef (w->err,
                       ELASTIC_ERR_IO,
                       "the written file '%s' does not read back: %s",
                       tmp,
                       why.text);
    } else if (w->opts->verify) {
        struct l3_first_fault ff = {.err = &why};
        if (l3_catalog_verify (c, H5P_DEFAULT, w->rank, w->size, l3_first_fault_cb, &ff) >
            0) {
            rc = errcodef (w->err,
                           ELASTIC_ERR_IO,
                           "the written file '%s' fails verification: %s",
                           tmp,
                           why.text);
        }
    }
    l3_catalog_destroy (c);
    if (fid >= 0)
        H5Fclose (fid);
    return rc;
}

static int write_file (struct writer *w, const char *tmp, const struct prep *prep)
{
    hid_t fapl = -1, dxpl = -1;
    int rc = ELASTIC_OK;

    if ((fapl = H5Pcreate (H5P_FILE_ACCESS)) < 0 ||
        H5Pset_fapl_mpio (fapl, w->comm, MPI_INFO_NULL) < 0 ||
        H5Pset_all_coll_metadata_ops (fapl, 1) < 0 ||
        H5Pset_coll_metadata_write (fapl, w->opts->collective ? 1 : 0) < 0 ||
        H5Pset_alignment (fapl, prep->align, prep->align) < 0 ||
        (dxpl = H5Pcreate (H5P_DATASET_XFER)) < 0 ||
        H5Pset_dxpl_mpio (
            dxpl, w->opts->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) < 0)
        rc = l3_h5fail (w->err, "cannot set up parallel HDF5 access for", tmp);
    else if ((w->fid = H5Fcreate (tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0)
        rc = l3_h5fail (w->err, "cannot create", tmp);
    if (fapl >= 0)
        H5Pclose (fapl);
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        goto out;
    if (w->rank == 0)
        rc = reserve_space (w, tmp, size_bound (w, prep->align));
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        goto out;
    rc = write_header (w, prep);
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        goto out;
    if ((rc = write_arrays (w, dxpl)) != ELASTIC_OK ||
        (rc = write_values (w, dxpl)) != ELASTIC_OK ||
        (rc = write_blobs (w, dxpl)) != ELASTIC_OK)
        goto out;
    test_pause (w->rank, w->step);
    if (w->opts->test_hook)
        w->opts->test_hook (w->opts->test_arg);
    if (H5Fflush (w->fid, H5F_SCOPE_GLOBAL) < 0) /* MPI_File_sync on every rank */
        rc = l3_h5fail (w->err, "cannot flush", tmp);
    rc = l3_agree (w->comm, rc, w->err);
out:
    if (dxpl >= 0)
        H5Pclose (dxpl);
    if (w->fid >= 0) {
        int crc = ELASTIC_OK;
        elastic_error_t cerr;
        if (H5Fclose (w->fid) < 0)
            crc = l3_h5fail (&cerr, "cannot close", tmp);
        w->fid = -1;
        crc = l3_agree (w->comm, crc, &cerr);
        if (rc == ELASTIC_OK && crc != ELASTIC_OK) {
            rc = crc;
            *w->err = cerr;
        }
    }
    return rc;
}

/* Collective: the checks and preparations l3_write and l3_write_begin
 * share, up to the temporary's name in tmp. */
static int write_prepare (struct writer *w, struct prep *prep, char *tmp, size_t tmpsize)
{
    char name[64];
    int rc;

    rc = check_local (w->opts, w->st, w->step, w->err);
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        return rc;
    rc = gather_check (w);
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        return rc;
    if ((rc = prepare_dir (w, prep)) != ELASTIC_OK)
        return rc;
    rc = check_fsize_limit (w, size_bound (w, prep->align));
    if (rc == ELASTIC_OK && w->rank == 0)
        rc = check_free_space (w, size_bound (w, prep->align));
    if ((rc = l3_agree (w->comm, rc, w->err)) != ELASTIC_OK)
        return rc;
    l3_snap_name (name, sizeof (name), w->step, 1);
    if (snprintf (tmp, tmpsize, "%s/%s", w->opts->dir, name) >= (int)tmpsize)
        return errcodef (
            w->err, ELASTIC_ERR_INVAL, "snapshot directory name is too long");
    return ELASTIC_OK;
}

/* Collective: after the data is in tmp (rc: the agreed outcome so far),
 * check the file, commit it, update latest, apply retention.  Agreed; on
 * an error the temporary is removed. */
static int commit_file (struct writer *w, const char *tmp, int rc)
{
    const struct l3_write_opts *opts = w->opts;
    char name[64];
    elastic_error_t why;
    double t0 = mono_now (), t_check = 0, t_dir = 0;

    if (rc == ELASTIC_OK) {
        rc = check_written (w, tmp);
        t_check = mono_now () - t0;
        rc = l3_agree (w->comm, rc, w->err);
    }
    if (rc != ELASTIC_OK) {
        if (w->rank == 0)
            (void)unlink (tmp);
        return rc;
    }
    if (w->rank == 0) {
        /* a directory holds one run: never replace another run's file */
        char final[PATH_MAX], owner[256];
        const char *me = opts->run_id ? opts->run_id : "";
        l3_snap_name (name, sizeof (name), w->step, 0);
        snprintf (final, sizeof (final), "%s/%s", opts->dir, name);
        if (l3_file_run_id (final, owner, sizeof (owner)) == 1 &&
            strcmp (owner, me) != 0) {
            rc = errcodef (
                w->err,
                ELASTIC_ERR_EXISTS,
                "'%s' is a snapshot of run '%s', not of this run '%s' (a snapshot "
                "directory holds one run's snapshots)",
                final,
                owner,
                me);
            (void)unlink (tmp);
        }
    }
    if (w->rank == 0 && rc == ELASTIC_OK) {
        double t1 = mono_now ();
        int c = l3_dir_commit (opts->dir, w->step, &why);
        if (c < 0) {
            rc = errcodef (w->err, ELASTIC_ERR_IO, "%s", why.text);
            (void)unlink (tmp);
        } else {
            if (c > 0)
                el_log (EL_WARN, "%s", why.text);
            /* the files retention takes out are unlinked in the background
             * (l3_reaper): every rank waits for this commit */
            struct l3_reaper *r = l3_reaper_create ();
            if (l3_dir_prune (opts->dir,
                              opts->keep,
                              opts->run_id ? opts->run_id : "",
                              w->step,
                              r ? l3_reaper_retire : NULL,
                              removed_cb,
                              r,
                              &why) < 0)
                el_log (EL_WARN, "L3 retention in '%s' failed: %s", opts->dir, why.text);
            l3_reaper_start (r);
        }
        t_dir = mono_now () - t1;
    }
    rc = l3_agree (w->comm, rc, w->err);
    el_log (EL_DEBUG,
            "L3 commit of step %lld: %.1f ms (reading the file back %.1f ms, the "
            "directory %.1f ms, the rest waiting for the other ranks)",
            (long long)w->step,
            (mono_now () - t0) * 1e3,
            t_check * 1e3,
            t_dir * 1e3);
    return rc;
}

static int writer_init (struct writer *w,
                        MPI_Comm comm,
                        const struct l3_write_opts *opts,
                        const struct l3_state *st,
                        int64_t step,
                        elastic_error_t *err)
{
    *w = (struct writer){.comm = comm, .opts = opts, .st = st, .step = step, .fid = -1};
    w->err = err;
    w->err->text[0] = '\0';
    if (MPI_Comm_rank (comm, &w->rank) != MPI_SUCCESS ||
        MPI_Comm_size (comm, &w->size) != MPI_SUCCESS) {
        return errcodef (w->err, ELASTIC_ERR_INVAL, "l3_write: invalid communicator");
    }
    return ELASTIC_OK;
}

int l3_write (MPI_Comm comm,
              const struct l3_write_opts *opts,
              const struct l3_state *st,
              int64_t step,
              elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct writer w;
    struct l3_h5quiet q;
    struct prep prep = {0};
    char tmp[PATH_MAX];
    int rc;

    if ((rc = writer_init (&w, comm, opts, st, step, err ? err : &tmp_err)) != ELASTIC_OK)
        return rc;
    l3_h5quiet_begin (&q);
    if ((rc = write_prepare (&w, &prep, tmp, sizeof (tmp))) == ELASTIC_OK) {
        rc = write_file (&w, tmp, &prep);
        rc = commit_file (&w, tmp, rc);
    }
    free (w.all);
    l3_h5quiet_end (&q);
    return rc;
}

/* The file offsets l3_write_begin's rank 0 finds: per array and per blob,
 * its data and its block table (UNDEF: no storage, 0 elements). */
enum { O_DATA, O_TABLE, O_N };

/* Rank 0: create dataset loc/name with a [world][3] table at tloc/name
 * (offsets, counts, crc32 0: the ranks fill their own crc32 in), and
 * record both offsets in off. */
static int lay_out_one (struct writer *w,
                        hid_t loc,
                        hid_t tloc,
                        const char *name,
                        hid_t type,
                        int ndims,
                        const hsize_t *dims,
                        const char *attr,
                        const void *attr_val,
                        const uint64_t *table,
                        uint64_t *off)
{
    hsize_t tdims[2] = {(hsize_t)w->size, 3};
    hid_t d, t = -1;
    int rc = 0;

    off[O_DATA] = off[O_TABLE] = UINT64_MAX;
    if ((d = dataset_create (loc, name, type, ndims, dims)) < 0 ||
        (attr && attr_write (d, attr, H5T_NATIVE_UINT64, attr_val) < 0) ||
        (t = dataset_create (tloc, name, H5T_NATIVE_UINT64, 2, tdims)) < 0 ||
        attr_write_string (t, "columns", "offset,count,crc32") < 0 ||
        H5Dwrite (t, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, table) < 0)
        rc = -1;
    if (rc == 0) {
        haddr_t a = dims[0] > 0 ? H5Dget_offset (d) : HADDR_UNDEF, b = H5Dget_offset (t);
        if ((dims[0] > 0 && a == HADDR_UNDEF) || b == HADDR_UNDEF)
            rc = -1; /* not contiguous: cannot be written in place */
        off[O_DATA] = a == HADDR_UNDEF ? UINT64_MAX : (uint64_t)a;
        off[O_TABLE] = (uint64_t)b;
    }
    hid_t es = rc < 0 ? l3_h5_errsave () : -1;
    if (d >= 0)
        H5Dclose (d);
    if (t >= 0)
        H5Dclose (t);
    l3_h5_errrestore (es);
    return rc;
}

static int lay_out_arrays (struct writer *w, uint64_t *table, uint64_t *off)
{
    const struct l3_state *st = w->st;
    hid_t ga = -1, gc = -1;
    int rc = ELASTIC_OK;

    ga = H5Gcreate2 (w->fid, "arrays", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    gc = H5Gcreate2 (w->fid, "checksums", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ga < 0 || gc < 0)
        rc = l3_h5fail (w->err, "cannot create group", ga < 0 ? "arrays" : "checksums");
    for (int i = 0; i < st->narrays && rc == ELASTIC_OK; i++) {
        const struct l3_array *a = &st->arrays[i];
        hsize_t dims[2] = {a->global_count, a->elem_size / l3_type_size (a->type)};
        uint64_t es = a->elem_size;

        for (int r = 0; r < w->size; r++) {
            const uint64_t *dr = desc_of (w, r) + A_N * i;
            table[3 * r] = dr[A_OFF];
            table[3 * r + 1] = dr[A_COUNT];
            table[3 * r + 2] = 0;
        }
        if (lay_out_one (w,
                         ga,
                         gc,
                         a->name,
                         l3_type_h5 (a->type),
                         dims[1] == 1 ? 1 : 2,
                         dims,
                         "elem_size",
                         &es,
                         table,
                         off + O_N * i) < 0)
            rc = l3_h5fail (w->err, "cannot lay out array", a->name);
    }
    if (ga >= 0)
        H5Gclose (ga);
    if (gc >= 0)
        H5Gclose (gc);
    return rc;
}

static int lay_out_values (struct writer *w)
{
    const struct l3_state *st = w->st;
    hid_t g;
    int rc = ELASTIC_OK;

    if ((g = H5Gcreate2 (w->fid, "values", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return l3_h5fail (w->err, "cannot create group", "values");
    for (int i = 0; i < st->nvalues && rc == ELASTIC_OK; i++) {
        const struct l3_value *v = &st->values[i];
        hsize_t n = v->size / l3_type_size (v->type);
        uint32_t crc = (uint32_t)desc_of (w, 0)[A_N * st->narrays + V_N * i + V_CRC];
        int scalar = v->type != L3_TYPE_BYTES && n == 1;
        hid_t type = l3_type_h5 (v->type), d;

        if ((d = dataset_create (g, v->name, type, scalar ? 0 : 1, &n)) < 0 ||
            attr_write (d, "crc32", H5T_NATIVE_UINT32, &crc) < 0 ||
            (n > 0 && H5Dwrite (d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v->data) < 0))
            rc = l3_h5fail (w->err, "cannot write value", v->name);
        if (d >= 0)
            H5Dclose (d);
    }
    H5Gclose (g);
    return rc;
}

static int lay_out_blobs (struct writer *w, uint64_t *table, uint64_t *off)
{
    const struct l3_state *st = w->st;
    hid_t gb = -1, gi = -1;
    int rc = ELASTIC_OK;

    gb = H5Gcreate2 (w->fid, "blobs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    gi = H5Gcreate2 (w->fid, "blob_index", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (gb < 0 || gi < 0)
        rc = l3_h5fail (w->err, "cannot create group", gb < 0 ? "blobs" : "blob_index");
    for (int i = 0; i < st->nblobs && rc == ELASTIC_OK; i++) {
        int k = A_N * st->narrays + V_N * st->nvalues + B_N * i;
        uint64_t total = 0;

        for (int r = 0; r < w->size; r++) {
            const uint64_t *dr = desc_of (w, r) + k;
            table[3 * r] = total;
            table[3 * r + 1] = dr[B_SIZE];
            table[3 * r + 2] = 0;
            total += dr[B_SIZE];
        }
        hsize_t dims = total;
        if (lay_out_one (w,
                         gb,
                         gi,
                         st->blobs[i].name,
                         H5T_NATIVE_UINT8,
                         1,
                         &dims,
                         NULL,
                         NULL,
                         table,
                         off + O_N * (st->narrays + i)) < 0)
            rc = l3_h5fail (w->err, "cannot lay out blob", st->blobs[i].name);
    }
    if (gb >= 0)
        H5Gclose (gb);
    if (gi >= 0)
        H5Gclose (gi);
    return rc;
}

/* Rank 0: the whole file but the ranks' data and crc32s, with the serial
 * driver; then every block of it reserved (fallocate over its final size:
 * HDF5 has set the size to the end of the allocated space). */
static int
lay_out (struct writer *w, const char *tmp, const struct prep *prep, uint64_t *off)
{
    uint64_t *table = malloc (sizeof (*table) * 3 * (size_t)w->size);
    hid_t fapl = -1;
    int rc = ELASTIC_OK, fd, e;
    struct stat sb;

    if (!table)
        return errcodef (w->err, ELASTIC_ERR_NOMEM, "out of memory");
    if ((fapl = H5Pcreate (H5P_FILE_ACCESS)) < 0 ||
        H5Pset_alignment (fapl, prep->align, prep->align) < 0)
        rc = l3_h5fail (w->err, "cannot set up HDF5 access for", tmp);
    else if ((w->fid = H5Fcreate (tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0)
        rc = l3_h5fail (w->err, "cannot create", tmp);
    if (fapl >= 0)
        H5Pclose (fapl);
    if (rc == ELASTIC_OK)
        rc = write_header (w, prep);
    if (rc == ELASTIC_OK)
        rc = lay_out_arrays (w, table, off);
    if (rc == ELASTIC_OK)
        rc = lay_out_values (w);
    if (rc == ELASTIC_OK)
        rc = lay_out_blobs (w, table, off);
    free (table);
    if (w->fid >= 0) {
        if (H5Fclose (w->fid) < 0 && rc == ELASTIC_OK)
            rc = l3_h5fail (w->err, "cannot close", tmp);
        w->fid = -1;
    }
    if (rc != ELASTIC_OK)
        return rc;
    if (getenv ("ELASTIC_TEST_L3_NO_RESERVE")) /* tests: a disk filling later */
        return ELASTIC_OK;
    if ((fd = open (tmp, O_WRONLY | O_CLOEXEC)) < 0 || fstat (fd, &sb) < 0) {
        rc = errcodef (
            w->err, ELASTIC_ERR_IO, "cannot open '%s': %s", tmp, strerror (errno));
    } else if ((e = posix_fallocate (fd, 0, sb.st_size)) != 0 && e != EINVAL &&
               e != EOPNOTSUPP) {
        /* EINVAL, EOPNOTSUPP: this file system cannot reserve (the free
         * space was checked before the creation) */
        rc = errcodef (
            w->err,
            ELASTIC_ERR_IO,
            "cannot reserve %llu bytes for the snapshot of step %lld in '%s': %s",
            (unsigned long long)sb.st_size,
            (long long)w->step,
            w->opts->dir,
            strerror (e));
    }
    if (fd >= 0)
        close (fd);
    return rc;
}

/* This rank's extents into b: its array blocks and blobs, at the offsets
 * rank 0 laid out.  -1: out of memory. */
static int plan_extents (struct writer *w, const uint64_t *off, struct l3_bg *b)
{
    const struct l3_state *st = w->st;

    for (int i = 0; i < st->narrays; i++) {
        const struct l3_array *a = &st->arrays[i];
        const uint64_t *o = off + O_N * i;
        uint64_t crc_at = o[O_TABLE] + 8 * (3 * (uint64_t)w->rank + 2);
        size_t len = a->local_count * a->elem_size;
        if (len > 0 &&
            l3_bg_add (
                b, o[O_DATA] + a->global_offset * a->elem_size, a->data, len, crc_at) < 0)
            return -1;
    }
    for (int i = 0; i < st->nblobs; i++) {
        const struct l3_blob *bl = &st->blobs[i];
        const uint64_t *o = off + O_N * (st->narrays + i);
        int k = A_N * st->narrays + V_N * st->nvalues + B_N * i;
        uint64_t mine = 0, crc_at = o[O_TABLE] + 8 * (3 * (uint64_t)w->rank + 2);
        for (int r = 0; r < w->rank; r++)
            mine += desc_of (w, r)[k + B_SIZE];
        if (bl->size > 0 &&
            l3_bg_add (b, o[O_DATA] + mine, bl->data, bl->size, crc_at) < 0)
            return -1;
    }
    return 0;
}

int l3_write_begin (MPI_Comm comm,
                    const struct l3_write_opts *opts,
                    const struct l3_state *st,
                    int64_t step,
                    struct l3_bg **out,
                    elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct writer w;
    struct l3_h5quiet q;
    struct prep prep = {0};
    struct l3_bg *b = NULL;
    uint64_t *off = NULL;
    size_t noff = 0;
    char tmp[PATH_MAX];
    int rc, e;

    *out = NULL;
    if ((rc = writer_init (&w, comm, opts, st, step, err ? err : &tmp_err)) != ELASTIC_OK)
        return rc;
    w.defer_crc = 1;
    l3_h5quiet_begin (&q);
    if ((rc = write_prepare (&w, &prep, tmp, sizeof (tmp))) != ELASTIC_OK)
        goto out;
    noff = (size_t)O_N * (size_t)(st->narrays + st->nblobs) + 1;
    if (!(off = calloc (noff, sizeof (*off))))
        rc = errcodef (w.err, ELASTIC_ERR_NOMEM, "out of memory");
    else if (w.rank == 0)
        rc = lay_out (&w, tmp, &prep, off);
    if ((rc = l3_agree (comm, rc, w.err)) != ELASTIC_OK)
        goto fail;
    if ((e = MPI_Bcast (off, (int)noff, MPI_UINT64_T, 0, comm)) != MPI_SUCCESS) {
        rc = l3_mpi_error (e, "MPI_Bcast", w.err);
        goto out; /* a failure: the ranks may not agree on anything now */
    }
    if (!(b = l3_bg_create (tmp, step)) || plan_extents (&w, off, b) < 0)
        rc = errcodef (w.err, ELASTIC_ERR_NOMEM, "out of memory planning the L3 write");
    if ((rc = l3_agree (comm, rc, w.err)) != ELASTIC_OK)
        goto fail;
    *out = b;
    b = NULL;
    goto out;
fail:
    if (w.rank == 0)
        (void)unlink (tmp);
out:
    l3_bg_destroy (b);
    free (off);
    free (w.all);
    l3_h5quiet_end (&q);
    return rc;
}

int l3_write_commit (MPI_Comm comm,
                     const struct l3_write_opts *opts,
                     int64_t step,
                     int local_rc,
                     elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_state none = {0};
    struct writer w;
    struct l3_h5quiet q;
    char name[64], tmp[PATH_MAX];
    int rc;

    /* not writer_init: err holds this rank's text of local_rc */
    w = (struct writer){.comm = comm, .opts = opts, .st = &none, .step = step, .fid = -1};
    w.err = err ? err : &tmp_err;
    if (!err)
        tmp_err.text[0] = '\0';
    if (MPI_Comm_rank (comm, &w.rank) != MPI_SUCCESS ||
        MPI_Comm_size (comm, &w.size) != MPI_SUCCESS)
        return errcodef (w.err, ELASTIC_ERR_INVAL, "l3_write: invalid communicator");
    l3_snap_name (name, sizeof (name), step, 1);
    snprintf (tmp, sizeof (tmp), "%s/%s", opts->dir, name);
    l3_h5quiet_begin (&q);
    rc = l3_agree (comm, local_rc, w.err);
    if (rc == ELASTIC_ERR_PROC_FAILED || rc == ELASTIC_ERR_MPI) {
        l3_h5quiet_end (&q);
        return rc;
    }
    rc = commit_file (&w, tmp, rc);
    l3_h5quiet_end (&q);
    return rc;
}
