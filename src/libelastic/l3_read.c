/* l3_read.c - L3 snapshot restore: find, open, verify, read (resharded)
 *
 * Rank 0 lists the directory and checks each candidate serially (never
 * trusting a foreign or damaged file to a collective open); then all ranks
 * open it with the mpio driver and load the catalog with collective
 * metadata reads.  A rank then reads any range of any array by hyperslab
 * (the call is collective, the transfers independent: straight into the
 * caller's buffer), and every block the ranks' ranges cover is verified as
 * it arrives: a rank checks the blocks wholly inside its range, and the
 * crc32s of the pieces of a block split between ranks are gathered and
 * combined.  l3_open verifies every item up front (each rank a share);
 * l3_restore verifies in one pass instead: the structure at the open, the
 * blocks while they are read, and whatever was not read afterwards.
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
#include <unistd.h>

#include <hdf5.h>

#include "l3.h"
#include "l3_agree.h"
#include "l3_dir.h"
#include "l3_format.h"
#include "log.h"

struct l3_file {
    hid_t fid;
    MPI_Comm comm;
    struct l3_catalog *cat;
    char *path;
    unsigned char *done; /* per item (l3_item_*): verified good */
    long ndone;
};

static void file_free (struct l3_file *f)
{
    if (!f)
        return;
    l3_catalog_destroy (f->cat);
    free (f->done);
    if (f->fid >= 0)
        H5Fclose (f->fid);
    if (f->comm != MPI_COMM_NULL)
        MPI_Comm_free (&f->comm);
    free (f->path);
    free (f);
}

/* Result of a candidate that belongs to another run (not an error). */
#define OTHER_RUN (-1)

/* Collective: open path and verify its structure, and unless defer, every
 * item's checksum.  want_step >= 0: the step the file name says.  run_id
 * NULL: any run. */
static int open_one (MPI_Comm comm,
                     const char *path,
                     const char *run_id,
                     int64_t want_step,
                     int defer,
                     struct l3_file **out,
                     elastic_error_t *err)
{
    struct l3_file *f = NULL;
    hid_t fapl = -1;
    int rank, size, rc = ELASTIC_OK, e;
    elastic_error_t why;

    MPI_Comm_rank (comm, &rank);
    MPI_Comm_size (comm, &size);
    if (rank == 0) {
        /* the structure first, in a child process that HDF5 may crash
         * (l3_probe): a damaged file is then skipped, not fatal */
        struct l3_header hdr;
        int kind = l3_probe (path, &hdr, &why);
        if (kind == L3_GOOD) {
            if (run_id && strcmp (run_id, hdr.run_id) != 0) {
                errprintf (err,
                           "%s: snapshot of run '%s', not of '%s'",
                           path,
                           hdr.run_id,
                           run_id);
                rc = OTHER_RUN;
            } else if (want_step >= 0 && hdr.step != want_step) {
                rc = errcodef (err,
                               ELASTIC_ERR_CORRUPT,
                               "its step attribute (%lld) does not match its name",
                               (long long)hdr.step);
            }
        } else {
            errprintf (err, "%s", why.text);
            rc = kind == L3_FOREIGN   ? ELASTIC_ERR_NO_SNAPSHOT
                 : kind == L3_DAMAGED ? ELASTIC_ERR_CORRUPT
                                      : ELASTIC_ERR_IO;
        }
    }
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        return rc;

    if (!(f = calloc (1, sizeof (*f))) || !(f->path = strdup (path))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
    } else {
        f->fid = -1;
        f->comm = MPI_COMM_NULL;
        if ((e = MPI_Comm_dup (comm, &f->comm)) != MPI_SUCCESS) {
            f->comm = MPI_COMM_NULL;
            rc = l3_mpi_error (e, "MPI_Comm_dup", err);
        }
    }
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        goto error;
    if ((fapl = H5Pcreate (H5P_FILE_ACCESS)) < 0 ||
        H5Pset_fapl_mpio (fapl, comm, MPI_INFO_NULL) < 0 ||
        H5Pset_all_coll_metadata_ops (fapl, 1) < 0)
        rc = l3_h5fail (err, "cannot set up parallel HDF5 access for", path);
    else if ((f->fid = H5Fopen (path, H5F_ACC_RDONLY, fapl)) < 0) {
        char h5[200];
        l3_h5_errtext (h5, sizeof (h5));
        rc = errcodef (err, ELASTIC_ERR_CORRUPT, "%s", h5);
    }
    if (fapl >= 0)
        H5Pclose (fapl);
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        goto error;
    if (l3_catalog_load (f->fid, &f->cat, &why) != L3_GOOD) {
        rc = errcodef (err, ELASTIC_ERR_CORRUPT, "%s", why.text);
    } else {
        f->ndone = l3_catalog_nitems (f->cat);
        if (!(f->done = calloc (f->ndone > 0 ? f->ndone : 1, 1))) {
            rc = errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
        }
    }
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        goto error;
    if (!defer) {
        struct l3_first_fault ff = {.err = &why};
        if (l3_catalog_verify_rest (
                f->cat, H5P_DEFAULT, rank, size, f->done, l3_first_fault_cb, &ff) > 0) {
            rc = errcodef (err, ELASTIC_ERR_CORRUPT, "%s", why.text);
        }
        if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
            goto error;
    }
    *out = f;
    return ELASTIC_OK;
error:
    /* every rank is here together (after an agree), so closing is safe */
    file_free (f);
    return rc;
}

/* Collective: the rest of a one-pass restore of the open file f: call read
 * (if any), then verify what it did not read.  On an error other than a
 * process failure f is closed; *out is f on success. */
static int read_rest (struct l3_file *f,
                      l3_read_f read,
                      void *arg,
                      struct l3_file **out,
                      elastic_error_t *err)
{
    int rc = read ? read (f, arg, err) : ELASTIC_OK;

    /* the same outcome everywhere, whatever read returned on each rank */
    if ((rc = l3_agree (f->comm, rc, err)) == ELASTIC_OK)
        rc = l3_verify_rest (f, err);
    if (rc == ELASTIC_OK) {
        *out = f;
        return rc;
    }
    if (rc != ELASTIC_ERR_PROC_FAILED)
        l3_close (f); /* a failed process could not take part: leave it */
    return rc;
}

/* Collective: open path (defer: verify in one pass, calling read). */
static int open_path (MPI_Comm comm,
                      const char *path,
                      int defer,
                      l3_read_f read,
                      void *arg,
                      struct l3_file **out,
                      elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_h5quiet q;
    struct l3_file *f = NULL;
    int rc;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    if (!path || !out) {
        return errcodef (
            err, ELASTIC_ERR_INVAL, "l3_open: path and out must not be NULL");
    }
    l3_h5quiet_begin (&q);
    rc = open_one (comm, path, NULL, -1, defer, &f, err);
    if (rc == ELASTIC_OK && defer) {
        l3_h5quiet_end (&q);
        return read_rest (f, read, arg, out, err);
    }
    if (rc == ELASTIC_OK)
        *out = f;
    if (rc != ELASTIC_OK) {
        char msg[sizeof (err->text)];
        snprintf (msg, sizeof (msg), "%s", err->text);
        if (strncmp (msg, path, strlen (path)) == 0)
            errprintf (err, "%s", msg);
        else
            errprintf (err, "%s: %s", path, msg);
    }
    l3_h5quiet_end (&q);
    return rc;
}

int l3_open (MPI_Comm comm, const char *path, struct l3_file **out, elastic_error_t *err)
{
    return open_path (comm, path, 0, NULL, NULL, out, err);
}

int l3_restore (MPI_Comm comm,
                const char *path,
                l3_read_f read,
                void *arg,
                struct l3_file **out,
                elastic_error_t *err)
{
    return open_path (comm, path, 1, read, arg, out, err);
}

/* Rank 0 lists the committed snapshots of dir (newest first) and sends the
 * list to every rank: n names, '\0'-separated in *names. */
static int
candidates (MPI_Comm comm, const char *dir, char **names, int *n, elastic_error_t *err)
{
    struct l3_entry *e = NULL;
    int rank, ne = 0, rc = ELASTIC_OK, e2;
    struct {
        int n;
        int bytes;
    } hdr = {0, 0};
    char *buf = NULL;
    elastic_error_t why;

    MPI_Comm_rank (comm, &rank);
    if (rank == 0) {
        if (l3_dir_list (dir, &e, &ne, &why) < 0) {
            rc = errcodef (err, ELASTIC_ERR_NO_SNAPSHOT, "no L3 snapshot: %s", why.text);
        } else {
            size_t bytes = 0;
            for (int i = 0; i < ne; i++)
                if (!e[i].temporary)
                    bytes += strlen (e[i].name) + 1;
            if (!(buf = malloc (bytes + 1))) {
                rc = errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
            } else {
                char *p = buf;
                for (int i = ne - 1; i >= 0; i--)
                    if (!e[i].temporary) {
                        strcpy (p, e[i].name);
                        p += strlen (p) + 1;
                        hdr.n++;
                    }
                hdr.bytes = (int)(p - buf);
            }
            l3_dir_free (e, ne);
        }
    }
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        goto error;
    if ((e2 = MPI_Bcast (&hdr, sizeof (hdr), MPI_BYTE, 0, comm)) != MPI_SUCCESS) {
        rc = l3_mpi_error (e2, "MPI_Bcast", err);
        goto error;
    }
    if (rank != 0 && !(buf = malloc ((size_t)hdr.bytes + 1))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
    }
    if ((rc = l3_agree (comm, rc, err)) != ELASTIC_OK)
        goto error;
    if (hdr.bytes > 0 &&
        (e2 = MPI_Bcast (buf, hdr.bytes, MPI_CHAR, 0, comm)) != MPI_SUCCESS) {
        rc = l3_mpi_error (e2, "MPI_Bcast", err);
        goto error;
    }
    *names = buf;
    *n = hdr.n;
    return ELASTIC_OK;
error:
    free (buf);
    return rc;
}

/* Collective: open the newest valid snapshot (defer: verify in one pass,
 * calling read, and fall back past a file found damaged on the way). */
static int open_latest (MPI_Comm comm,
                        const char *dir,
                        const char *run_id,
                        int defer,
                        l3_read_f read,
                        void *arg,
                        struct l3_file **out,
                        int *nrejected,
                        elastic_error_t *err)
{
    elastic_error_t tmp_err, e1;
    struct l3_h5quiet q;
    char *names = NULL, *p;
    char first_bad[2 * sizeof (err->text)] = "";
    int n = 0, rank, rc, rejected = 0, other = 0;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    if (!dir || !*dir || !out) {
        return errcodef (
            err, ELASTIC_ERR_INVAL, "l3_open_latest: no snapshot directory given");
    }
    MPI_Comm_rank (comm, &rank);
    l3_h5quiet_begin (&q);
    if ((rc = candidates (comm, dir, &names, &n, err)) != ELASTIC_OK)
        goto out;
    p = names;
    for (int i = 0; i < n; i++, p += strlen (p) + 1) {
        char path[PATH_MAX];
        int64_t step = strtoll (p + 5, NULL, 10); /* "snap-" */

        snprintf (path, sizeof (path), "%s/%s", dir, p);
        e1.text[0] = '\0';
        if (!defer)
            rc = open_one (comm, path, run_id, step, 0, out, &e1);
        else {
            struct l3_file *f = NULL;
            rc = open_one (comm, path, run_id, step, 1, &f, &e1);
            if (rc == ELASTIC_OK) {
                l3_h5quiet_end (&q);
                rc = read_rest (f, read, arg, out, &e1);
                l3_h5quiet_begin (&q);
                /* a fault found while reading names the file: drop that */
                size_t pl = strlen (path);
                if (rc == ELASTIC_ERR_CORRUPT && strncmp (e1.text, path, pl) == 0 &&
                    e1.text[pl] == ':' && e1.text[pl + 1] == ' ')
                    memmove (e1.text, e1.text + pl + 2, strlen (e1.text + pl + 2) + 1);
                else if (rc != ELASTIC_OK && rc != ELASTIC_ERR_CORRUPT) {
                    /* the caller's own error (not the file's): stop here */
                    *err = e1;
                    goto out;
                }
            }
        }
        if (rc == ELASTIC_OK) {
            if (rejected > 0 && rank == 0)
                el_log (EL_INFO, "restoring from L3 snapshot %s", path);
            goto out;
        }
        if (rc == OTHER_RUN) {
            other++;
            continue;
        }
        if (rc == ELASTIC_ERR_MPI || rc == ELASTIC_ERR_PROC_FAILED ||
            rc == ELASTIC_ERR_NOMEM) {
            *err = e1;
            goto out;
        }
        if (rejected++ == 0)
            snprintf (first_bad, sizeof (first_bad), "%s: %s", p, e1.text);
        if (rank == 0)
            el_log (EL_WARN,
                    "L3 snapshot %s is unusable (%s); falling back to an older snapshot",
                    path,
                    e1.text);
    }
    rc = ELASTIC_ERR_NO_SNAPSHOT;
    if (n == 0)
        errprintf (err, "no L3 snapshot in '%s'", dir);
    else if (rejected == 0)
        errprintf (err,
                   "no L3 snapshot of run '%s' in '%s' (it holds %d of other runs; "
                   "ELASTIC_RUN_ID names the run)",
                   run_id ? run_id : "",
                   dir,
                   other);
    else
        errprintf (err,
                   "no valid L3 snapshot in '%s': %d rejected, the newest %s",
                   dir,
                   rejected,
                   first_bad);
out:
    if (nrejected)
        *nrejected = rejected;
    free (names);
    l3_h5quiet_end (&q);
    return rc;
}

int l3_open_latest (MPI_Comm comm,
                    const char *dir,
                    const char *run_id,
                    struct l3_file **out,
                    elastic_error_t *err)
{
    return open_latest (comm, dir, run_id, 0, NULL, NULL, out, NULL, err);
}

int l3_restore_latest (MPI_Comm comm,
                       const char *dir,
                       const char *run_id,
                       l3_read_f read,
                       void *arg,
                       struct l3_file **out,
                       int *nrejected,
                       elastic_error_t *err)
{
    return open_latest (comm, dir, run_id, 1, read, arg, out, nrejected, err);
}

int l3_verify_rest (struct l3_file *f, elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_h5quiet q;
    elastic_error_t why;
    struct l3_first_fault ff = {.err = &why};
    int rank, size, rc = ELASTIC_OK, e;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    MPI_Comm_rank (f->comm, &rank);
    MPI_Comm_size (f->comm, &size);
    /* what any rank verified (blocks wholly inside its range) is done */
    if (f->ndone > 0 && (e = MPI_Allreduce (MPI_IN_PLACE,
                                            f->done,
                                            (int)f->ndone,
                                            MPI_UNSIGNED_CHAR,
                                            MPI_MAX,
                                            f->comm)) != MPI_SUCCESS)
        return l3_mpi_error (e, "MPI_Allreduce", err);
    l3_h5quiet_begin (&q);
    if (l3_catalog_verify_rest (
            f->cat, H5P_DEFAULT, rank, size, f->done, l3_first_fault_cb, &ff) > 0) {
        rc = errcodef (err, ELASTIC_ERR_CORRUPT, "%s: %s", f->path, why.text);
    }
    rc = l3_agree (f->comm, rc, err);
    l3_h5quiet_end (&q);
    return rc;
}

int64_t l3_step (const struct l3_file *f)
{
    return f->cat->hdr.step;
}

int l3_world_size (const struct l3_file *f)
{
    return f->cat->hdr.world_size;
}

const char *l3_path (const struct l3_file *f)
{
    return f->path;
}

const char *l3_run_id (const struct l3_file *f)
{
    return f->cat->hdr.run_id;
}

int l3_array_info (const struct l3_file *f,
                   const char *name,
                   size_t *elem_size,
                   uint64_t *global_count)
{
    const struct l3_cat_array *a;

    if (!f || !name || !(a = l3_catalog_array (f->cat, name)))
        return ELASTIC_ERR_NOT_FOUND;
    if (elem_size)
        *elem_size = a->elem_size;
    if (global_count)
        *global_count = a->global_count;
    return ELASTIC_OK;
}

int l3_value_info (const struct l3_file *f, const char *name, size_t *size)
{
    const struct l3_cat_value *v;

    if (!f || !name || !(v = l3_catalog_value (f->cat, name)))
        return ELASTIC_ERR_NOT_FOUND;
    if (size)
        *size = v->size;
    return ELASTIC_OK;
}

/* Ask the kernel to read rows [offset, offset+count) ahead, all at once
 * (a deep queue of requests instead of one stream's readahead window): a
 * contiguous dataset only, at most L3_PIECE_BYTES, and only a hint (errors
 * are ignored). */
static void prefetch (const struct l3_file *f,
                      const struct l3_cat_array *a,
                      uint64_t offset,
                      uint64_t count)
{
#ifdef POSIX_FADV_WILLNEED
    haddr_t addr = H5Dget_offset (a->dset);
    int fd;

    if (addr == HADDR_UNDEF || (fd = open (f->path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    (void)posix_fadvise (fd,
                         (off_t)(addr + offset * a->elem_size),
                         (off_t)(count * a->elem_size),
                         POSIX_FADV_WILLNEED);
    close (fd);
#else
    (void)f;
    (void)a;
    (void)offset;
    (void)count;
#endif
}

static void mismatch (elastic_error_t *err,
                      const struct l3_file *f,
                      const struct l3_cat_array *a,
                      int r,
                      uint32_t crc)
{
    errprintf (err,
               "%s: array '%s', block of old rank %d (offset %llu, count %llu): "
               "checksum mismatch on read (stored %08x, computed %08x)",
               f->path,
               a->name,
               r,
               (unsigned long long)a->blocks[3 * r],
               (unsigned long long)a->blocks[3 * r + 1],
               (uint32_t)a->blocks[3 * r + 2],
               crc);
}

/* One rank's piece of a block that its range covers only in part. */
enum { P_BLOCK, P_START, P_LEN, P_CRC, P_N };
#define NO_BLOCK UINT64_MAX

/* Collective: verify every block of a that the ranges read (buf holds
 * elements [offset, offset+count)) cover: each rank the blocks wholly
 * inside its range; a block split between ranks by combining the crc32s
 * of its pieces, gathered from every rank (at most two per rank: the
 * blocks at the two ends of its range).  Marks them done; a block that no
 * chain of pieces covers stays for l3_verify_rest. */
static int verify_read (struct l3_file *f,
                        const struct l3_cat_array *a,
                        uint64_t offset,
                        uint64_t count,
                        const void *buf,
                        elastic_error_t *err)
{
    int world = f->cat->hdr.world_size, ai = (int)(a - f->cat->arrays);
    int rc = ELASTIC_OK, size, e, np = 0;
    uint64_t mine[2 * P_N], *all = NULL, end = offset + count;
    size_t es = a->elem_size;

    MPI_Comm_size (f->comm, &size);
    for (int i = 0; i < 2; i++)
        mine[i * P_N + P_BLOCK] = NO_BLOCK;
    for (int r = 0; r < world && count > 0 && rc == ELASTIC_OK; r++) {
        uint64_t bo = a->blocks[3 * r], bc = a->blocks[3 * r + 1];
        uint64_t s = bo > offset ? bo : offset, e2 = bo + bc < end ? bo + bc : end;
        if (bc == 0 || s >= e2)
            continue;
        uint32_t crc = l3_crc32 (0, (const char *)buf + (s - offset) * es, (e2 - s) * es);
        if (s == bo && e2 == bo + bc) {
            if (crc != (uint32_t)a->blocks[3 * r + 2]) {
                mismatch (err, f, a, r, crc);
                rc = ELASTIC_ERR_CORRUPT;
            } else
                f->done[l3_item_block (f->cat, ai, r)] = 1;
        } else if (np < 2) { /* the blocks tile: only the two ends are split */
            uint64_t *p = mine + P_N * np++;
            p[P_BLOCK] = (uint64_t)r;
            p[P_START] = s - bo;
            p[P_LEN] = e2 - s;
            p[P_CRC] = crc;
        }
    }
    if (rc == ELASTIC_OK && !(all = malloc (sizeof (mine) * (size_t)size))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "out of memory");
    }
    if ((rc = l3_agree (f->comm, rc, err)) != ELASTIC_OK)
        goto out;
    if ((e = MPI_Allgather (
             mine, 2 * P_N, MPI_UINT64_T, all, 2 * P_N, MPI_UINT64_T, f->comm)) !=
        MPI_SUCCESS) {
        rc = l3_mpi_error (e, "MPI_Allgather", err);
        goto out;
    }
    /* every rank sees the same pieces and reaches the same verdict */
    long npieces = 2L * size;
    for (long i = 0; i < npieces && rc == ELASTIC_OK; i++) {
        uint64_t b = all[i * P_N + P_BLOCK];
        int seen = 0;
        if (b == NO_BLOCK)
            continue;
        for (long j = 0; j < i && !seen; j++)
            seen = all[j * P_N + P_BLOCK] == b;
        if (seen)
            continue; /* this block's chain was followed already */
        uint64_t bc = a->blocks[3 * b + 1], at = 0;
        uint32_t crc = 0;
        for (int more = 1; more && at < bc;) {
            more = 0;
            for (long j = i; j < npieces; j++) {
                const uint64_t *p = all + j * P_N;
                if (p[P_BLOCK] == b && p[P_START] == at) {
                    crc = l3_crc32_combine (crc, (uint32_t)p[P_CRC], p[P_LEN] * es);
                    at += p[P_LEN];
                    more = 1;
                    break;
                }
            }
        }
        if (at != bc)
            continue; /* not covered by a chain: left to l3_verify_rest */
        if (crc != (uint32_t)a->blocks[3 * b + 2]) {
            mismatch (err, f, a, (int)b, crc);
            rc = ELASTIC_ERR_CORRUPT;
        } else
            f->done[l3_item_block (f->cat, ai, (int)b)] = 1;
    }
out:
    free (all);
    return rc;
}

int l3_read_array (struct l3_file *f,
                   const char *name,
                   uint64_t offset,
                   uint64_t count,
                   void *buf,
                   elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_h5quiet q;
    const struct l3_cat_array *a = NULL;
    hid_t dxpl = -1;
    uint64_t rows_per;
    int rc = ELASTIC_OK;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    if (!f) {
        return errcodef (err, ELASTIC_ERR_INVAL, "l3_read_array: no file");
    }
    l3_h5quiet_begin (&q);
    if (!name || !(a = l3_catalog_array (f->cat, name))) {
        rc = errcodef (err,
                       ELASTIC_ERR_NOT_FOUND,
                       "%s: no array '%s' in the snapshot",
                       f->path,
                       name ? name : "(null)");
    } else if (offset > a->global_count || count > a->global_count - offset) {
        rc = errcodef (err,
                       ELASTIC_ERR_INVAL,
                       "array '%s': range [%llu, +%llu) is outside its %llu elements",
                       name,
                       (unsigned long long)offset,
                       (unsigned long long)count,
                       (unsigned long long)a->global_count);
    } else if (count > 0 && !buf) {
        rc = errcodef (err, ELASTIC_ERR_INVAL, "l3_read_array: buf is NULL");
    }
    if ((rc = l3_agree (f->comm, rc, err)) != ELASTIC_OK)
        goto out;
    /* independent transfers: each rank reads its contiguous rows straight
     * into buf (ompio's collective two-phase read would route every byte
     * through an aggregator rank, a second copy across processes) */
    rows_per = L3_PIECE_BYTES / a->elem_size ? L3_PIECE_BYTES / a->elem_size : 1;
    if ((dxpl = H5Pcreate (H5P_DATASET_XFER)) < 0 ||
        H5Pset_dxpl_mpio (dxpl, H5FD_MPIO_INDEPENDENT) < 0)
        rc = l3_h5fail (err, "cannot set up a read of", name);
    if ((rc = l3_agree (f->comm, rc, err)) != ELASTIC_OK)
        goto out;
    for (uint64_t first = 0; first < count && rc == ELASTIC_OK; first += rows_per) {
        uint64_t k = count - first < rows_per ? count - first : rows_per;
        prefetch (f, a, offset + first, k);
        if (l3_array_read_rows (
                a, dxpl, offset + first, k, (char *)buf + first * a->elem_size) < 0)
            rc = l3_h5fail (err, "cannot read array", name);
    }
    if ((rc = l3_agree (f->comm, rc, err)) == ELASTIC_OK)
        rc = verify_read (f, a, offset, count, buf, err);
out:
    if (dxpl >= 0)
        H5Pclose (dxpl);
    l3_h5quiet_end (&q);
    return rc;
}

int l3_read_value (
    struct l3_file *f, const char *name, void *buf, size_t size, elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_h5quiet q;
    const struct l3_cat_value *v;
    int rc = ELASTIC_OK;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    if (!f || !name || !(v = l3_catalog_value (f->cat, name))) {
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "no value '%s' in the snapshot",
                         name ? name : "(null)");
    }
    if (size != v->size || (size > 0 && !buf)) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "value '%s' has %zu bytes in the snapshot; %zu requested",
                         name,
                         v->size,
                         size);
    }
    if (size == 0) {
        f->done[l3_item_value (f->cat, (int)(v - f->cat->values))] = 1;
        return ELASTIC_OK;
    }
    l3_h5quiet_begin (&q);
    if (H5Dread (v->dset, v->memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        rc = l3_h5fail (err, "cannot read value", name);
    else if (l3_crc32 (0, buf, size) != v->crc) {
        rc = errcodef (
            err, ELASTIC_ERR_CORRUPT, "%s: value '%s': checksum mismatch", f->path, name);
    } else
        f->done[l3_item_value (f->cat, (int)(v - f->cat->values))] = 1;
    l3_h5quiet_end (&q);
    return rc;
}

int l3_read_blob (struct l3_file *f,
                  const char *name,
                  int old_rank,
                  void **buf,
                  size_t *size,
                  elastic_error_t *err)
{
    elastic_error_t tmp_err;
    struct l3_h5quiet q;
    const struct l3_cat_blob *b;
    uint64_t off, n;
    unsigned char *data;
    hid_t fspace = -1, mspace = -1;
    int rc = ELASTIC_OK;

    if (!err)
        err = &tmp_err;
    err->text[0] = '\0';
    if (!f || !name || !buf || !size) {
        return errcodef (err, ELASTIC_ERR_INVAL, "l3_read_blob: NULL argument");
    }
    if (!(b = l3_catalog_blob (f->cat, name))) {
        return errcodef (
            err, ELASTIC_ERR_NOT_FOUND, "no blob '%s' in the snapshot", name);
    }
    if (old_rank < 0 || old_rank >= f->cat->hdr.world_size) {
        return errcodef (
            err,
            ELASTIC_ERR_NOT_FOUND,
            "blob '%s': old rank %d does not exist (the snapshot was written by "
            "%d ranks)",
            name,
            old_rank,
            f->cat->hdr.world_size);
    }
    off = b->index[3 * old_rank];
    n = b->index[3 * old_rank + 1];
    if (!(data = malloc (n ? n : 1))) {
        return errcodef (err,
                         ELASTIC_ERR_NOMEM,
                         "out of memory (%llu bytes for blob '%s')",
                         (unsigned long long)n,
                         name);
    }
    l3_h5quiet_begin (&q);
    if (n > 0) {
        hsize_t start = off, count = n;
        if ((fspace = H5Dget_space (b->dset)) < 0 ||
            H5Sselect_hyperslab (fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) <
                0 ||
            (mspace = H5Screate_simple (1, &count, NULL)) < 0 ||
            H5Dread (b->dset, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, data) < 0)
            rc = l3_h5fail (err, "cannot read blob", name);
    }
    if (rc == ELASTIC_OK &&
        l3_crc32 (0, data, n) != (uint32_t)b->index[3 * old_rank + 2]) {
        rc = errcodef (err,
                       ELASTIC_ERR_CORRUPT,
                       "%s: blob '%s' of old rank %d: checksum mismatch",
                       f->path,
                       name,
                       old_rank);
    }
    if (mspace >= 0)
        H5Sclose (mspace);
    if (fspace >= 0)
        H5Sclose (fspace);
    l3_h5quiet_end (&q);
    if (rc != ELASTIC_OK) {
        free (data);
        return rc;
    }
    f->done[l3_item_blob (f->cat, (int)(b - f->cat->blobs), old_rank)] = 1;
    *buf = data;
    *size = (size_t)n;
    return ELASTIC_OK;
}

void l3_close (struct l3_file *f)
{
    struct l3_h5quiet q;

    if (!f)
        return;
    int saved = errno;
    l3_h5quiet_begin (&q);
    file_free (f);
    l3_h5quiet_end (&q);
    errno = saved;
}
