/* l3_format.c - the L3 snapshot file format, read without MPI */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "common/error.h"
#include "l3_format.h"

#define VERIFY_CHUNK (8u << 20) /* bytes read at a time when verifying */

void l3_h5quiet_begin (struct l3_h5quiet *q)
{
    H5Eget_auto2 (H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2 (H5E_DEFAULT, NULL, NULL);
}

void l3_h5quiet_end (struct l3_h5quiet *q)
{
    H5Eset_auto2 (H5E_DEFAULT, q->func, q->data);
}

struct errwalk {
    char *buf;
    size_t len;
    int found;
};

static herr_t errwalk_cb (unsigned n, const H5E_error2_t *e, void *arg)
{
    struct errwalk *w = arg;
    char maj[128] = "", min[128] = "";

    if (w->found)
        return 0;
    w->found = 1;
    if (e->desc && *e->desc) {
        snprintf (w->buf, w->len, "%s", e->desc);
        /* "unable to open file" alone says little: add the minor class */
        if (H5Eget_msg (e->min_num, NULL, min, sizeof (min)) > 0 &&
            strlen (e->desc) < 40) {
            size_t l = strlen (w->buf);
            snprintf (w->buf + l, w->len - l, " (%s)", min);
        }
        return 0;
    }
    H5Eget_msg (e->maj_num, NULL, maj, sizeof (maj));
    H5Eget_msg (e->min_num, NULL, min, sizeof (min));
    snprintf (w->buf, w->len, "%s: %s", maj, min);
    return 0;
}

void l3_h5_errtext (char *buf, size_t len)
{
    struct errwalk w = {.buf = buf, .len = len};

    if (len == 0)
        return;
    buf[0] = '\0';
    H5Ewalk2 (H5E_DEFAULT, H5E_WALK_UPWARD, errwalk_cb, &w);
    if (!w.found || buf[0] == '\0')
        snprintf (buf, len, "unknown HDF5 error");
}

void l3_h5_errprintf (elastic_error_t *err)
{
    char h5[sizeof (err->text)];

    l3_h5_errtext (h5, sizeof (h5));
    errprintf (err, "%s", h5);
}

hid_t l3_h5_errsave (void)
{
    return H5Eget_current_stack ();
}

void l3_h5_errrestore (hid_t stack)
{
    if (stack >= 0)
        H5Eset_current_stack (stack);
}

uint32_t l3_crc32 (uint32_t crc, const void *buf, size_t len)
{
#if HAVE_LIBDEFLATE
    return libdeflate_crc32 (crc, buf, len);
#else
    const unsigned char *p = buf;
    uLong c = crc;

    while (len > 0) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32 (c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
#endif
}

uint32_t l3_crc32_combine (uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return (uint32_t)crc32_combine (crc_a, crc_b, (z_off_t)len_b);
}

size_t l3_type_size (int type)
{
    switch (type) {
        case L3_TYPE_BYTES:
            return 1;
        case L3_TYPE_INT32:
        case L3_TYPE_UINT32:
        case L3_TYPE_FLOAT32:
            return 4;
        case L3_TYPE_INT64:
        case L3_TYPE_UINT64:
        case L3_TYPE_FLOAT64:
            return 8;
    }
    return 0;
}

const char *l3_type_name (int type)
{
    switch (type) {
        case L3_TYPE_BYTES:
            return "uint8";
        case L3_TYPE_INT32:
            return "int32";
        case L3_TYPE_UINT32:
            return "uint32";
        case L3_TYPE_FLOAT32:
            return "float32";
        case L3_TYPE_INT64:
            return "int64";
        case L3_TYPE_UINT64:
            return "uint64";
        case L3_TYPE_FLOAT64:
            return "float64";
    }
    return "invalid";
}

hid_t l3_type_h5 (int type)
{
    switch (type) {
        case L3_TYPE_BYTES:
            return H5T_NATIVE_UINT8;
        case L3_TYPE_INT32:
            return H5T_NATIVE_INT32;
        case L3_TYPE_UINT32:
            return H5T_NATIVE_UINT32;
        case L3_TYPE_FLOAT32:
            return H5T_NATIVE_FLOAT;
        case L3_TYPE_INT64:
            return H5T_NATIVE_INT64;
        case L3_TYPE_UINT64:
            return H5T_NATIVE_UINT64;
        case L3_TYPE_FLOAT64:
            return H5T_NATIVE_DOUBLE;
    }
    return -1;
}

int l3_type_from_h5 (hid_t dtype)
{
    H5T_class_t cls = H5Tget_class (dtype);
    size_t size = H5Tget_size (dtype);

    if (cls == H5T_INTEGER) {
        int sign = H5Tget_sign (dtype) == H5T_SGN_2;
        if (size == 1 && !sign)
            return L3_TYPE_BYTES;
        if (size == 4)
            return sign ? L3_TYPE_INT32 : L3_TYPE_UINT32;
        if (size == 8)
            return sign ? L3_TYPE_INT64 : L3_TYPE_UINT64;
    } else if (cls == H5T_FLOAT) {
        if (size == 4)
            return L3_TYPE_FLOAT32;
        if (size == 8)
            return L3_TYPE_FLOAT64;
    }
    return -1;
}

int l3_name_valid (const char *name)
{
    size_t len;

    if (!name || (len = strlen (name)) == 0 || len > L3_NAME_MAX)
        return 0;
    if (!strcmp (name, ".") || !strcmp (name, ".."))
        return 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p == '/' || *p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

hid_t l3_file_open_serial (const char *path, int *kind, elastic_error_t *err)
{
    struct stat sb;
    hid_t fapl = -1, file = -1;
    htri_t is;

    if (stat (path, &sb) < 0) {
        *kind = L3_UNREADABLE;
        errprintf (err, "%s", strerror (errno));
        return -1;
    }
    if (!S_ISREG (sb.st_mode)) {
        *kind = L3_FOREIGN;
        errprintf (err,
                   S_ISDIR (sb.st_mode) ? "is a directory, not a snapshot file"
                                        : "not a regular file");
        return -1;
    }
    if ((is = H5Fis_hdf5 (path)) <= 0) {
        *kind = is == 0 ? L3_FOREIGN : L3_UNREADABLE;
        if (is == 0)
            errprintf (err,
                       sb.st_size == 0 ? "not an HDF5 file (empty)"
                                       : "not an HDF5 file (no HDF5 signature)");
        else
            l3_h5_errprintf (err);
        return -1;
    }
    if ((fapl = H5Pcreate (H5P_FILE_ACCESS)) < 0)
        goto h5error;
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking (fapl, 0, 1);
#endif
    if ((file = H5Fopen (path, H5F_ACC_RDONLY, fapl)) < 0)
        goto h5error;
    H5Pclose (fapl);
    return file;
h5error:
    *kind = L3_DAMAGED;
    l3_h5_errprintf (err);
    if (fapl >= 0)
        H5Pclose (fapl);
    return -1;
}

/* Attribute helpers: 0 on success, -1 with err set. */

static int
attr_read (hid_t obj, const char *name, hid_t memtype, void *buf, elastic_error_t *err)
{
    hid_t a;
    hid_t space = -1;
    int rc = -1;

    if ((a = H5Aopen (obj, name, H5P_DEFAULT)) < 0) {
        errprintf (err, "attribute '%s' is missing", name);
        return -1;
    }
    if ((space = H5Aget_space (a)) < 0 || H5Sget_simple_extent_npoints (space) != 1) {
        errprintf (err, "attribute '%s' is not a single value", name);
        goto out;
    }
    if (H5Aread (a, memtype, buf) < 0) {
        errprintf (err, "attribute '%s' cannot be read as a number", name);
        goto out;
    }
    rc = 0;
out:
    if (space >= 0)
        H5Sclose (space);
    H5Aclose (a);
    return rc;
}

static int attr_read_string (
    hid_t obj, const char *name, char *buf, size_t bufsz, elastic_error_t *err)
{
    hid_t a, ftype = -1, mtype = -1;
    int rc = -1;

    if ((a = H5Aopen (obj, name, H5P_DEFAULT)) < 0) {
        errprintf (err, "attribute '%s' is missing", name);
        return -1;
    }
    if ((ftype = H5Aget_type (a)) < 0 || H5Tget_class (ftype) != H5T_STRING) {
        errprintf (err, "attribute '%s' is not a string", name);
        goto out;
    }
    if (H5Tis_variable_str (ftype) > 0) {
        char *s = NULL;
        mtype = H5Tcopy (H5T_C_S1);
        H5Tset_size (mtype, H5T_VARIABLE);
        H5Tset_cset (mtype, H5Tget_cset (ftype));
        if (H5Aread (a, mtype, &s) < 0 || !s)
            goto bad;
        snprintf (buf, bufsz, "%s", s);
        H5free_memory (s);
    } else {
        size_t n = H5Tget_size (ftype);
        char *tmp = calloc (1, n + 1);
        if (!tmp)
            goto bad;
        mtype = H5Tcopy (H5T_C_S1);
        H5Tset_size (mtype, n + 1);
        H5Tset_strpad (mtype, H5T_STR_NULLTERM);
        H5Tset_cset (mtype, H5Tget_cset (ftype));
        if (H5Aread (a, mtype, tmp) < 0) {
            free (tmp);
            goto bad;
        }
        snprintf (buf, bufsz, "%s", tmp);
        free (tmp);
    }
    rc = 0;
    goto out;
bad:
    errprintf (err, "attribute '%s' cannot be read", name);
out:
    if (mtype >= 0)
        H5Tclose (mtype);
    if (ftype >= 0)
        H5Tclose (ftype);
    H5Aclose (a);
    return rc;
}

static int header_load (hid_t file, struct l3_header *h, elastic_error_t *err)
{
    char format[64];

    if (H5Aexists (file, "elastic_format") <= 0) {
        errprintf (
            err,
            "HDF5 file, but not an elastic snapshot (no attribute 'elastic_format')");
        return L3_FOREIGN;
    }
    if (attr_read_string (file, "elastic_format", format, sizeof (format), err) < 0)
        return L3_FOREIGN;
    if (strcmp (format, L3_FORMAT_NAME) != 0) {
        errprintf (
            err,
            "HDF5 file, but not an elastic snapshot (elastic_format is '%s', not '%s')",
            format,
            L3_FORMAT_NAME);
        return L3_FOREIGN;
    }
    if (attr_read (file, "format_version", H5T_NATIVE_INT, &h->format_version, err) < 0)
        return L3_DAMAGED;
    if (h->format_version != L3_FORMAT_VERSION) {
        errprintf (err,
                   "snapshot format version %d (this library reads version %d)",
                   h->format_version,
                   L3_FORMAT_VERSION);
        return L3_FOREIGN;
    }
    if (attr_read (file, "step", H5T_NATIVE_INT64, &h->step, err) < 0 ||
        attr_read (file, "world_size", H5T_NATIVE_INT, &h->world_size, err) < 0 ||
        attr_read (file, "created_unix", H5T_NATIVE_INT64, &h->created_unix, err) < 0 ||
        attr_read_string (file, "created", h->created, sizeof (h->created), err) < 0 ||
        attr_read_string (file,
                          "library_version",
                          h->library_version,
                          sizeof (h->library_version),
                          err) < 0 ||
        attr_read_string (file, "run_id", h->run_id, sizeof (h->run_id), err) < 0)
        return L3_DAMAGED;
    if (h->step < 0 || h->world_size < 1) {
        errprintf (err,
                   "bad header: step %lld, world_size %d",
                   (long long)h->step,
                   h->world_size);
        return L3_DAMAGED;
    }
    return L3_GOOD;
}

/* Names of the links in group `path` of file (sorted by name). */
static int
group_names (hid_t file, const char *path, char ***names, int *n, elastic_error_t *err)
{
    H5G_info_t info;
    hid_t g;
    char **v = NULL;
    hsize_t i;

    *names = NULL;
    *n = 0;
    if ((g = H5Gopen2 (file, path, H5P_DEFAULT)) < 0) {
        errprintf (err, "group '%s' is missing (incomplete file)", path);
        return -1;
    }
    if (H5Gget_info (g, &info) < 0)
        goto h5error;
    if (info.nlinks > 0 && !(v = calloc (info.nlinks, sizeof (*v))))
        goto nomem;
    for (i = 0; i < info.nlinks; i++) {
        ssize_t l = H5Lget_name_by_idx (
            g, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (l < 0)
            goto h5error;
        if (!(v[i] = malloc ((size_t)l + 1)))
            goto nomem;
        if (H5Lget_name_by_idx (
                g, ".", H5_INDEX_NAME, H5_ITER_INC, i, v[i], (size_t)l + 1, H5P_DEFAULT) <
            0)
            goto h5error;
    }
    H5Gclose (g);
    *names = v;
    *n = (int)info.nlinks;
    return 0;
nomem:
    errprintf (err, "out of memory listing '%s'", path);
    goto fail;
h5error : {
    char h5[160];
    l3_h5_errtext (h5, sizeof (h5));
    errprintf (err, "cannot list group '%s': %s", path, h5);
}
fail:
    if (v) {
        for (i = 0; i < info.nlinks; i++)
            free (v[i]);
        free (v);
    }
    H5Gclose (g);
    return -1;
}

static void names_free (char **v, int n)
{
    if (v) {
        for (int i = 0; i < n; i++)
            free (v[i]);
        free (v);
    }
}

/* Read a uint64 [world][3] table at path into *out. */
static int
table_load (hid_t file, const char *path, int world, uint64_t **out, elastic_error_t *err)
{
    hid_t d, space = -1;
    hsize_t dims[2];
    uint64_t *t = NULL;
    int rc = -1;

    if ((d = H5Dopen2 (file, path, H5P_DEFAULT)) < 0) {
        errprintf (err, "dataset '%s' is missing (incomplete file)", path);
        return -1;
    }
    if ((space = H5Dget_space (d)) < 0 || H5Sget_simple_extent_ndims (space) != 2) {
        errprintf (err, "dataset '%s' is not a 2-D table", path);
        goto out;
    }
    H5Sget_simple_extent_dims (space, dims, NULL);
    if (dims[0] != (hsize_t)world || dims[1] != 3) {
        errprintf (err,
                   "dataset '%s' has shape [%llu][%llu], expected [%d][3]",
                   path,
                   (unsigned long long)dims[0],
                   (unsigned long long)dims[1],
                   world);
        goto out;
    }
    if (!(t = malloc (sizeof (*t) * 3 * (size_t)world))) {
        errprintf (err, "out of memory");
        goto out;
    }
    if (H5Dread (d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, t) < 0) {
        char h5[160];
        l3_h5_errtext (h5, sizeof (h5));
        errprintf (err, "cannot read '%s': %s", path, h5);
        free (t);
        t = NULL;
        goto out;
    }
    *out = t;
    rc = 0;
out:
    if (space >= 0)
        H5Sclose (space);
    H5Dclose (d);
    return rc;
}

static int cmp_block (const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0;
}

int l3_blocks_tile (const uint64_t *table, int world, uint64_t total)
{
    uint64_t *t = malloc (sizeof (*t) * 3 * (size_t)world);
    uint64_t next = 0;
    int ok = 1;

    if (!t)
        return 0;
    memcpy (t, table, sizeof (*t) * 3 * (size_t)world);
    qsort (t, (size_t)world, sizeof (*t) * 3, cmp_block);
    for (int r = 0; r < world && ok; r++) {
        if (t[3 * r + 1] == 0)
            ok = t[3 * r] <= total;
        else if (t[3 * r] != next || t[3 * r + 1] > total - next)
            ok = 0;
        else
            next += t[3 * r + 1];
    }
    free (t);
    return ok && next == total;
}

/* Open the typed dataset at path: *dset, its supported element type, the
 * native memory type, and *ftype (the caller closes it when >= 0).
 * Returns 0, or -1 with err. */
static int typed_dataset_open (hid_t file,
                               const char *path,
                               hid_t *dset,
                               int *type,
                               hid_t *memtype,
                               hid_t *ftype,
                               elastic_error_t *err)
{
    if ((*dset = H5Dopen2 (file, path, H5P_DEFAULT)) < 0)
        return errprintf (err, "'%s' is not a dataset", path);
    if ((*ftype = H5Dget_type (*dset)) < 0 || (*type = l3_type_from_h5 (*ftype)) < 0)
        return errprintf (err, "dataset '%s' has an unsupported datatype", path);
    *memtype = H5Tget_native_type (*ftype, H5T_DIR_ASCEND);
    return 0;
}

static int
array_load (hid_t file, struct l3_cat_array *a, int world, elastic_error_t *err)
{
    char path[L3_NAME_MAX + 32];
    hid_t ftype = -1, space = -1;
    hsize_t dims[2] = {0, 1};
    int ndims;
    uint64_t elem_size;
    int rc = -1;

    snprintf (path, sizeof (path), "/arrays/%s", a->name);
    if (typed_dataset_open (file, path, &a->dset, &a->type, &a->memtype, &ftype, err) < 0)
        goto out;
    if ((space = H5Dget_space (a->dset)) < 0 ||
        (ndims = H5Sget_simple_extent_ndims (space)) < 1 || ndims > 2) {
        errprintf (err, "dataset '%s' is not 1-D or 2-D", path);
        goto out;
    }
    H5Sget_simple_extent_dims (space, dims, NULL);
    if (attr_read (a->dset, "elem_size", H5T_NATIVE_UINT64, &elem_size, err) < 0)
        goto out;
    a->elem_size = (size_t)elem_size;
    a->global_count = dims[0];
    if (elem_size == 0 || elem_size != l3_type_size (a->type) * dims[1]) {
        errprintf (err,
                   "dataset '%s': elem_size %llu does not match its shape and type",
                   path,
                   (unsigned long long)elem_size);
        goto out;
    }
    snprintf (path, sizeof (path), "/checksums/%s", a->name);
    if (table_load (file, path, world, &a->blocks, err) < 0)
        goto out;
    if (!l3_blocks_tile (a->blocks, world, a->global_count)) {
        errprintf (err,
                   "'%s': the blocks do not tile the %llu elements of array '%s'",
                   path,
                   (unsigned long long)a->global_count,
                   a->name);
        goto out;
    }
    rc = 0;
out:
    if (space >= 0)
        H5Sclose (space);
    if (ftype >= 0)
        H5Tclose (ftype);
    return rc;
}

static int value_load (hid_t file, struct l3_cat_value *v, elastic_error_t *err)
{
    char path[L3_NAME_MAX + 32];
    hid_t ftype = -1, space = -1;
    hssize_t npoints;
    int rc = -1;

    snprintf (path, sizeof (path), "/values/%s", v->name);
    if (typed_dataset_open (file, path, &v->dset, &v->type, &v->memtype, &ftype, err) < 0)
        goto out;
    if ((space = H5Dget_space (v->dset)) < 0 ||
        (npoints = H5Sget_simple_extent_npoints (space)) < 0 ||
        H5Sget_simple_extent_ndims (space) > 1) {
        errprintf (err, "dataset '%s' is not a scalar or 1-D", path);
        goto out;
    }
    v->size = (size_t)npoints * l3_type_size (v->type);
    if (attr_read (v->dset, "crc32", H5T_NATIVE_UINT32, &v->crc, err) < 0)
        goto out;
    rc = 0;
out:
    if (space >= 0)
        H5Sclose (space);
    if (ftype >= 0)
        H5Tclose (ftype);
    return rc;
}

static int blob_load (hid_t file, struct l3_cat_blob *b, int world, elastic_error_t *err)
{
    char path[L3_NAME_MAX + 32];
    hid_t ftype = -1, space = -1;
    hsize_t dims[1];
    uint64_t next = 0;
    int rc = -1;

    snprintf (path, sizeof (path), "/blobs/%s", b->name);
    if ((b->dset = H5Dopen2 (file, path, H5P_DEFAULT)) < 0) {
        errprintf (err, "'%s' is not a dataset", path);
        return -1;
    }
    if ((ftype = H5Dget_type (b->dset)) < 0 || l3_type_from_h5 (ftype) != L3_TYPE_BYTES ||
        (space = H5Dget_space (b->dset)) < 0 || H5Sget_simple_extent_ndims (space) != 1) {
        errprintf (err, "dataset '%s' is not a 1-D uint8 dataset", path);
        goto out;
    }
    H5Sget_simple_extent_dims (space, dims, NULL);
    b->total = dims[0];
    snprintf (path, sizeof (path), "/blob_index/%s", b->name);
    if (table_load (file, path, world, &b->index, err) < 0)
        goto out;
    for (int r = 0; r < world; r++) {
        if (b->index[3 * r] != next || b->index[3 * r + 1] > b->total - next) {
            errprintf (err, "'%s': the entry of old rank %d is out of place", path, r);
            goto out;
        }
        next += b->index[3 * r + 1];
    }
    if (next != b->total) {
        errprintf (err, "'%s': the entries do not cover blob '%s'", path, b->name);
        goto out;
    }
    rc = 0;
out:
    if (space >= 0)
        H5Sclose (space);
    if (ftype >= 0)
        H5Tclose (ftype);
    return rc;
}

/* Load the names of group `items` and check that group `tables` (if not
 * NULL) holds exactly the same names. */
static int names_load (hid_t file,
                       const char *items,
                       const char *tables,
                       char ***names,
                       int *n,
                       elastic_error_t *err)
{
    char **t = NULL;
    int nt = 0;

    if (group_names (file, items, names, n, err) < 0)
        return -1;
    if (!tables)
        return 0;
    if (group_names (file, tables, &t, &nt, err) < 0)
        goto error;
    for (int i = 0; i < nt || i < *n; i++) {
        if (i >= nt || i >= *n || strcmp (t[i], (*names)[i]) != 0) {
            errprintf (err,
                       "'%s/%s' has no matching '%s' entry (incomplete file)",
                       i < *n ? items : tables,
                       i < *n ? (*names)[i] : t[i],
                       i < *n ? tables : items);
            goto error;
        }
    }
    names_free (t, nt);
    return 0;
error:
    names_free (t, nt);
    names_free (*names, *n);
    *names = NULL;
    *n = 0;
    return -1;
}

int l3_catalog_load (hid_t file, struct l3_catalog **out, elastic_error_t *err)
{
    struct l3_catalog *c;
    char **names = NULL;
    int n = 0, kind;

    if (!(c = calloc (1, sizeof (*c)))) {
        errprintf (err, "out of memory");
        return L3_DAMAGED;
    }
    if ((kind = header_load (file, &c->hdr, err)) != L3_GOOD)
        goto error;
    kind = L3_DAMAGED;
    if (names_load (file, "/arrays", "/checksums", &names, &n, err) < 0)
        goto error;
    if (n > 0 && !(c->arrays = calloc ((size_t)n, sizeof (c->arrays[0]))))
        goto nomem;
    for (int i = 0; i < n; i++) {
        c->arrays[i].dset = c->arrays[i].memtype = -1;
        c->arrays[i].name = names[i];
        names[i] = NULL;
        c->narrays++;
        if (array_load (file, &c->arrays[i], c->hdr.world_size, err) < 0)
            goto error;
    }
    names_free (names, n);
    names = NULL;
    if (names_load (file, "/values", NULL, &names, &n, err) < 0)
        goto error;
    if (n > 0 && !(c->values = calloc ((size_t)n, sizeof (c->values[0]))))
        goto nomem;
    for (int i = 0; i < n; i++) {
        c->values[i].dset = c->values[i].memtype = -1;
        c->values[i].name = names[i];
        names[i] = NULL;
        c->nvalues++;
        if (value_load (file, &c->values[i], err) < 0)
            goto error;
    }
    names_free (names, n);
    names = NULL;
    if (names_load (file, "/blobs", "/blob_index", &names, &n, err) < 0)
        goto error;
    if (n > 0 && !(c->blobs = calloc ((size_t)n, sizeof (c->blobs[0]))))
        goto nomem;
    for (int i = 0; i < n; i++) {
        c->blobs[i].dset = -1;
        c->blobs[i].name = names[i];
        names[i] = NULL;
        c->nblobs++;
        if (blob_load (file, &c->blobs[i], c->hdr.world_size, err) < 0)
            goto error;
    }
    names_free (names, n);
    *out = c;
    return L3_GOOD;
nomem:
    errprintf (err, "out of memory");
error:
    names_free (names, n);
    l3_catalog_destroy (c);
    return kind;
}

/* What the child of l3_probe reports. */
struct probe_report {
    int kind;
    struct l3_header hdr;
    elastic_error_t err;
};

static void probe_load (const char *path, struct probe_report *r)
{
    struct l3_catalog *c = NULL;
    hid_t fid;

    if ((fid = l3_file_open_serial (path, &r->kind, &r->err)) < 0)
        return;
    if ((r->kind = l3_catalog_load (fid, &c, &r->err)) == L3_GOOD) {
        r->hdr = c->hdr;
        l3_catalog_destroy (c);
    }
    H5Fclose (fid);
}

int l3_probe (const char *path, struct l3_header *hdr, elastic_error_t *err)
{
    struct probe_report r = {.kind = L3_DAMAGED};
    size_t got = 0;
    int fd[2], status;
    pid_t pid;

    if (pipe (fd) < 0 || (pid = fork ()) < 0) {
        probe_load (path, &r); /* cannot isolate it: load it here */
        goto out;
    }
    if (pid == 0) {
        /* a fault in HDF5 ends the child by its signal, whatever handlers
         * the application (or a sanitizer) installed */
        static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof (faults) / sizeof (faults[0]); i++)
            signal (faults[i], SIG_DFL);
        close (fd[0]);
        probe_load (path, &r);
        if (write (fd[1], &r, sizeof (r)) != (ssize_t)sizeof (r))
            _exit (1);
        _exit (0); /* no atexit handlers: MPI's, HDF5's belong to the parent */
    }
    close (fd[1]);
    while (got < sizeof (r)) {
        ssize_t n = read (fd[0], (char *)&r + got, sizeof (r) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close (fd[0]);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof (r) || !WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        r.kind = L3_DAMAGED;
        if (WIFSIGNALED (status))
            errprintf (&r.err,
                       "HDF5 crashed reading its metadata (signal %d, %s): the file "
                       "is damaged",
                       WTERMSIG (status),
                       strsignal (WTERMSIG (status)));
        else
            errprintf (&r.err,
                       "HDF5 failed reading its metadata (the reader exited with "
                       "status %d): the file is damaged",
                       WIFEXITED (status) ? WEXITSTATUS (status) : -1);
    }
    r.err.text[sizeof (r.err.text) - 1] = '\0';
    r.hdr.run_id[sizeof (r.hdr.run_id) - 1] = '\0';
out:
    if (r.kind == L3_GOOD)
        *hdr = r.hdr;
    else
        errprintf (err, "%s", r.err.text);
    return r.kind;
}

void l3_catalog_destroy (struct l3_catalog *c)
{
    if (!c)
        return;
    int saved = errno;
    for (int i = 0; i < c->narrays; i++) {
        free (c->arrays[i].name);
        free (c->arrays[i].blocks);
        if (c->arrays[i].dset >= 0)
            H5Dclose (c->arrays[i].dset);
        if (c->arrays[i].memtype >= 0)
            H5Tclose (c->arrays[i].memtype);
    }
    for (int i = 0; i < c->nvalues; i++) {
        free (c->values[i].name);
        if (c->values[i].dset >= 0)
            H5Dclose (c->values[i].dset);
        if (c->values[i].memtype >= 0)
            H5Tclose (c->values[i].memtype);
    }
    for (int i = 0; i < c->nblobs; i++) {
        free (c->blobs[i].name);
        free (c->blobs[i].index);
        if (c->blobs[i].dset >= 0)
            H5Dclose (c->blobs[i].dset);
    }
    free (c->arrays);
    free (c->values);
    free (c->blobs);
    free (c);
    errno = saved;
}

struct l3_cat_array *l3_catalog_array (const struct l3_catalog *c, const char *name)
{
    for (int i = 0; i < c->narrays; i++)
        if (!strcmp (c->arrays[i].name, name))
            return &c->arrays[i];
    return NULL;
}

struct l3_cat_value *l3_catalog_value (const struct l3_catalog *c, const char *name)
{
    for (int i = 0; i < c->nvalues; i++)
        if (!strcmp (c->values[i].name, name))
            return &c->values[i];
    return NULL;
}

struct l3_cat_blob *l3_catalog_blob (const struct l3_catalog *c, const char *name)
{
    for (int i = 0; i < c->nblobs; i++)
        if (!strcmp (c->blobs[i].name, name))
            return &c->blobs[i];
    return NULL;
}

int l3_array_read_rows (
    const struct l3_cat_array *a, hid_t dxpl, uint64_t row, uint64_t n, void *buf)
{
    hid_t fspace, mspace, es = -1;
    hsize_t start[2] = {row, 0}, count[2] = {n, 1}, mcount;
    int ndims, rc = -1;

    if ((fspace = H5Dget_space (a->dset)) < 0)
        return -1;
    ndims = H5Sget_simple_extent_ndims (fspace);
    if (ndims == 2) {
        hsize_t dims[2];
        H5Sget_simple_extent_dims (fspace, dims, NULL);
        count[1] = dims[1];
    }
    mcount = n * count[1];
    if (n == 0) {
        H5Sselect_none (fspace);
        mcount = 1; /* a dataspace needs a non-zero size; select none */
    } else if (H5Sselect_hyperslab (fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        goto out1;
    if ((mspace = H5Screate_simple (1, &mcount, NULL)) < 0)
        goto out1;
    if (n == 0)
        H5Sselect_none (mspace);
    if (H5Dread (a->dset, a->memtype, mspace, fspace, dxpl, buf) >= 0)
        rc = 0;
    else
        es = l3_h5_errsave ();
    H5Sclose (mspace);
    H5Sclose (fspace);
    l3_h5_errrestore (es);
    return rc;
out1:
    es = l3_h5_errsave ();
    H5Sclose (fspace);
    l3_h5_errrestore (es);
    return rc;
}

uint64_t l3_pieces_for (uint64_t bytes)
{
    return bytes == 0 ? 1 : (bytes + L3_PIECE_BYTES - 1) / L3_PIECE_BYTES;
}

/* Read bytes [off, off+n) of a 1-D uint8 or typed 1-D dataset. */
static int
bytes_read (hid_t dset, hid_t memtype, hid_t dxpl, uint64_t off, uint64_t n, void *buf)
{
    hid_t fspace, mspace;
    hsize_t start = off, count = n;
    int rc = -1;

    if (n == 0)
        return 0;
    if ((fspace = H5Dget_space (dset)) < 0)
        return -1;
    if (H5Sget_simple_extent_ndims (fspace) == 0) /* scalar */
        H5Sselect_all (fspace);
    else if (H5Sselect_hyperslab (fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0)
        goto out;
    if ((mspace = H5Screate_simple (1, &count, NULL)) < 0)
        goto out;
    if (H5Dread (dset, memtype, mspace, fspace, dxpl, buf) >= 0)
        rc = 0;
    H5Sclose (mspace);
out : {
    hid_t es = rc < 0 ? l3_h5_errsave () : -1;
    H5Sclose (fspace);
    l3_h5_errrestore (es);
}
    return rc;
}

struct verifier {
    const struct l3_catalog *c;
    hid_t dxpl;
    l3_fault_f fault;
    void *arg;
    unsigned char *buf;
    size_t bufsz;
    int faults;
};

static void report (struct verifier *v, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void report (struct verifier *v, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (msg, sizeof (msg), fmt, ap);
    va_end (ap);
    v->faults++;
    if (v->fault)
        v->fault (msg, v->arg);
}

static void verify_block (struct verifier *v, const struct l3_cat_array *a, int r)
{
    uint64_t off = a->blocks[3 * r], count = a->blocks[3 * r + 1];
    uint32_t want = (uint32_t)a->blocks[3 * r + 2], crc = 0;
    uint64_t rows = v->bufsz / a->elem_size;

    for (uint64_t done = 0; done < count;) {
        uint64_t n = count - done < rows ? count - done : rows;
        if (l3_array_read_rows (a, v->dxpl, off + done, n, v->buf) < 0) {
            char h5[160];
            l3_h5_errtext (h5, sizeof (h5));
            report (v,
                    "array '%s', block of old rank %d (offset %llu, count %llu): read "
                    "failed: %s",
                    a->name,
                    r,
                    (unsigned long long)off,
                    (unsigned long long)count,
                    h5);
            return;
        }
        crc = l3_crc32 (crc, v->buf, n * a->elem_size);
        done += n;
    }
    if (crc != want)
        report (v,
                "array '%s', block of old rank %d (offset %llu, count %llu): checksum "
                "mismatch "
                "(stored %08x, computed %08x)",
                a->name,
                r,
                (unsigned long long)off,
                (unsigned long long)count,
                want,
                crc);
}

static void verify_blob (struct verifier *v, const struct l3_cat_blob *b, int r)
{
    uint64_t off = b->index[3 * r], size = b->index[3 * r + 1];
    uint32_t want = (uint32_t)b->index[3 * r + 2], crc = 0;

    for (uint64_t done = 0; done < size;) {
        uint64_t n = size - done < v->bufsz ? size - done : v->bufsz;
        if (bytes_read (b->dset, H5T_NATIVE_UINT8, v->dxpl, off + done, n, v->buf) < 0) {
            char h5[160];
            l3_h5_errtext (h5, sizeof (h5));
            report (v, "blob '%s' of old rank %d: read failed: %s", b->name, r, h5);
            return;
        }
        crc = l3_crc32 (crc, v->buf, n);
        done += n;
    }
    if (crc != want)
        report (v,
                "blob '%s' of old rank %d (offset %llu, %llu bytes): checksum mismatch "
                "(stored %08x, computed %08x)",
                b->name,
                r,
                (unsigned long long)off,
                (unsigned long long)size,
                want,
                crc);
}

static void verify_value (struct verifier *v, const struct l3_cat_value *val)
{
    unsigned char *buf = val->size <= v->bufsz ? v->buf : malloc (val->size);
    uint32_t crc;
    size_t tsize = l3_type_size (val->type);

    if (!buf) {
        report (v, "value '%s': out of memory", val->name);
        return;
    }
    if (bytes_read (val->dset, val->memtype, v->dxpl, 0, val->size / tsize, buf) < 0) {
        char h5[160];
        l3_h5_errtext (h5, sizeof (h5));
        report (v, "value '%s': read failed: %s", val->name, h5);
    } else if ((crc = l3_crc32 (0, buf, val->size)) != val->crc)
        report (v,
                "value '%s' (%zu bytes): checksum mismatch (stored %08x, computed %08x)",
                val->name,
                val->size,
                val->crc,
                crc);
    if (buf != v->buf)
        free (buf);
}

long l3_catalog_nitems (const struct l3_catalog *c)
{
    return (long)(c->narrays + c->nblobs) * c->hdr.world_size + c->nvalues;
}

long l3_item_block (const struct l3_catalog *c, int array, int rank)
{
    return (long)array * c->hdr.world_size + rank;
}

long l3_item_blob (const struct l3_catalog *c, int blob, int rank)
{
    return (long)(c->narrays + blob) * c->hdr.world_size + rank;
}

long l3_item_value (const struct l3_catalog *c, int value)
{
    return (long)(c->narrays + c->nblobs) * c->hdr.world_size + value;
}

/* Verify checked item k (l3_item_* order: every array's blocks, every
 * blob's entries, the values). */
static void verify_item (struct verifier *v, long k)
{
    const struct l3_catalog *c = v->c;
    long world = c->hdr.world_size;

    if (k < c->narrays * world)
        verify_block (v, &c->arrays[k / world], (int)(k % world));
    else if ((k -= c->narrays * world) < c->nblobs * world)
        verify_blob (v, &c->blobs[k / world], (int)(k % world));
    else
        verify_value (v, &c->values[k - c->nblobs * world]);
}

int l3_catalog_verify_rest (const struct l3_catalog *c,
                            hid_t dxpl,
                            int part,
                            int nparts,
                            unsigned char *done,
                            l3_fault_f fault,
                            void *arg)
{
    struct verifier v = {.c = c, .dxpl = dxpl, .fault = fault, .arg = arg};

    v.bufsz = VERIFY_CHUNK;
    for (int i = 0; i < c->narrays; i++)
        if (c->arrays[i].elem_size > v.bufsz)
            v.bufsz = c->arrays[i].elem_size;
    if (!(v.buf = malloc (v.bufsz))) {
        report (&v, "out of memory (%zu bytes) for verification", v.bufsz);
        return v.faults;
    }
    /* k runs through the items in l3_item_* order */
    for (long k = 0; k < l3_catalog_nitems (c); k++)
        if (k % nparts == part && !(done && done[k])) {
            int before = v.faults;
            verify_item (&v, k);
            if (done && v.faults == before)
                done[k] = 1;
        }
    free (v.buf);
    return v.faults;
}

int l3_catalog_verify (const struct l3_catalog *c,
                       hid_t dxpl,
                       int part,
                       int nparts,
                       l3_fault_f fault,
                       void *arg)
{
    return l3_catalog_verify_rest (c, dxpl, part, nparts, NULL, fault, arg);
}
