/* registry.c - the state an application registers with its manager */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gpu.h"
#include "registry.h"

struct registry *registry_create (void)
{
    return calloc (1, sizeof (struct registry));
}

void registry_destroy (struct registry *r)
{
    int saved = errno;

    if (r) {
        registry_clear_restore (r);
        for (int i = 0; i < r->na; i++)
            gpu_array_free (&r->a[i]); /* a device array's pinned mirror */
        free (r->v);
        free (r->a);
        free (r->b);
        free (r);
    }
    errno = saved;
}

static int check_name (const struct registry *r, const char *name, elastic_error_t *err)
{
    struct reg_item it;

    if (!name || name[0] == '\0')
        return errcodef (
            err, ELASTIC_ERR_INVAL, "name: '' is invalid (expected a non-empty name)");
    if (strlen (name) >= REG_NAME_MAX)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "name: '%.20s...' is invalid (expected at most %d characters)",
                         name,
                         REG_NAME_MAX - 1);
    REG_FOREACH (r, it)
    if (!strcmp (it.name, name))
        return errcodef (err,
                         ELASTIC_ERR_EXISTS,
                         "'%s' is already registered (%s %s)",
                         name,
                         it.kind == REG_ARRAY ? "an" : "a",
                         it.what);
    if (r->frozen)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "'%s': state must be registered before elastic_manager_start",
                         name);
    return ELASTIC_OK;
}

static int grow (void **p, int n, size_t elem)
{
    void *q = realloc (*p, (size_t)(n + 1) * elem);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

int registry_add_value (
    struct registry *r, const char *name, void *data, size_t size, elastic_error_t *err)
{
    int rc;

    if ((rc = check_name (r, name, err)) != ELASTIC_OK)
        return rc;
    if (!data || size == 0)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "value '%s': %s is invalid (expected a non-NULL pointer and a size >= 1)",
            name,
            data ? "size 0" : "a NULL pointer");
    if (grow ((void **)&r->v, r->nv, sizeof (r->v[0])) < 0)
        return errcodef (err, ELASTIC_ERR_NOMEM, "value '%s': out of memory", name);
    memset (&r->v[r->nv], 0, sizeof (r->v[0]));
    strcpy (r->v[r->nv].name, name);
    r->v[r->nv].data = data;
    r->v[r->nv].size = size;
    r->nv++;
    r->vbytes += size;
    return ELASTIC_OK;
}

int registry_add_array (struct registry *r,
                        const char *name,
                        void *data,
                        size_t elem_size,
                        uint64_t count,
                        elastic_error_t *err)
{
    int rc;

    if ((rc = check_name (r, name, err)) != ELASTIC_OK)
        return rc;
    if (elem_size == 0)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "array '%s': elem_size 0 is invalid (expected >= 1 byte)",
                         name);
    if (count > 0 && !data)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "array '%s': a NULL pointer with %llu elements is invalid (expected data "
            "for count > 0)",
            name,
            (unsigned long long)count);
    if (grow ((void **)&r->a, r->na, sizeof (r->a[0])) < 0)
        return errcodef (err, ELASTIC_ERR_NOMEM, "array '%s': out of memory", name);
    memset (&r->a[r->na], 0, sizeof (r->a[0]));
    strcpy (r->a[r->na].name, name);
    r->a[r->na].data = data;
    r->a[r->na].elem_size = elem_size;
    r->a[r->na].count = count;
    r->na++;
    return ELASTIC_OK;
}

int registry_set_blob (struct registry *r,
                       const char *name,
                       const void *data,
                       size_t size,
                       elastic_error_t *err)
{
    int i, rc;

    if (size > 0 && !data)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "blob '%s': a NULL pointer with %zu bytes is invalid (expected data for "
            "size > 0)",
            name ? name : "",
            size);
    if (name && (i = registry_find_blob (r, name)) >= 0) {
        r->b[i].data = data;
        r->b[i].size = size;
        return ELASTIC_OK;
    }
    if ((rc = check_name (r, name, err)) != ELASTIC_OK)
        return rc;
    if (grow ((void **)&r->b, r->nb, sizeof (r->b[0])) < 0)
        return errcodef (err, ELASTIC_ERR_NOMEM, "blob '%s': out of memory", name);
    memset (&r->b[r->nb], 0, sizeof (r->b[0]));
    strcpy (r->b[r->nb].name, name);
    r->b[r->nb].data = data;
    r->b[r->nb].size = size;
    r->nb++;
    return ELASTIC_OK;
}

/* Bytes of one item of an ELASTIC_TYPE_*, 0 if not one. */
static size_t type_size (int type)
{
    static const size_t sizes[] = {1, 4, 8, 4, 8, 4, 8};
    return type >= 0 && type < (int)(sizeof (sizes) / sizeof (sizes[0])) ? sizes[type]
                                                                         : 0;
}

int registry_set_type (struct registry *r,
                       const char *name,
                       int type,
                       elastic_error_t *err)
{
    static const char *names[] = {
        "bytes", "int32", "int64", "uint32", "uint64", "float32", "float64"};
    size_t ts = type_size (type), size;
    int *field, i;
    const char *kind;

    if (r->frozen)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "'%s': types must be set before elastic_manager_start",
                         name ? name : "");
    if ((i = registry_find_array (r, name)) >= 0) {
        size = r->a[i].elem_size;
        field = &r->a[i].type;
        kind = "array";
    } else if ((i = registry_find_value (r, name)) >= 0) {
        size = r->v[i].size;
        field = &r->v[i].type;
        kind = "value";
    } else
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "elastic_set_type: no array or value '%s' (register it first)",
                         name ? name : "");
    if (ts == 0)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "%s '%s': type %d is invalid (expected an ELASTIC_TYPE_* from 0 "
                         "to 6)",
                         kind,
                         name,
                         type);
    if (size % ts != 0)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "%s '%s': type %s is invalid for %s %zu (expected a size that is "
            "a multiple of %zu)",
            kind,
            name,
            names[type],
            *kind == 'a' ? "elem_size" : "size",
            size,
            ts);
    *field = type;
    return ELASTIC_OK;
}

int registry_item (const struct registry *r, int k, struct reg_item *it)
{
    static const char *what[] = {"value", "array", "blob"};

    if (k < 0)
        return 0;
    memset (it, 0, sizeof (*it));
    if (k < r->nv) {
        const struct reg_value *v = &r->v[k];
        it->kind = REG_VALUE;
        it->index = k;
        it->name = v->name;
        it->data = v->data;
        it->bytes = v->size;
        it->unit = v->size;
        it->type = v->type;
    } else if ((k -= r->nv) < r->na) {
        const struct reg_array *a = &r->a[k];
        it->kind = REG_ARRAY;
        it->index = k;
        it->name = a->name;
        it->data = a->data;
        it->bytes = a->count * a->elem_size;
        it->unit = a->elem_size;
        it->type = a->type;
    } else if ((k -= r->na) < r->nb) {
        const struct reg_blob *b = &r->b[k];
        it->kind = REG_BLOB;
        it->index = k;
        it->name = b->name;
        it->data = (void *)b->data;
        it->bytes = b->size;
    } else
        return 0;
    it->what = what[it->kind];
    it->extent = it->kind == REG_ARRAY ? r->a[it->index].count : it->bytes;
    it->col = it->kind == REG_VALUE   ? -1
              : it->kind == REG_ARRAY ? it->index
                                      : r->na + it->index;
    return 1;
}

int registry_item_of (const struct registry *r,
                      enum reg_kind kind,
                      int i,
                      struct reg_item *it)
{
    const int n[] = {r->nv, r->na, r->nb};
    int first = kind == REG_VALUE ? 0 : kind == REG_ARRAY ? r->nv : r->nv + r->na;

    if (i < 0 || i >= n[kind])
        return 0;
    return registry_item (r, first + i, it);
}

int registry_find (const struct registry *r, enum reg_kind kind, const char *name)
{
    struct reg_item it;

    REG_FOREACH_OF (r, kind, it)
    if (name && !strcmp (it.name, name))
        return it.index;
    return -1;
}

int registry_find_value (const struct registry *r, const char *name)
{
    return registry_find (r, REG_VALUE, name);
}

int registry_find_array (const struct registry *r, const char *name)
{
    return registry_find (r, REG_ARRAY, name);
}

int registry_find_blob (const struct registry *r, const char *name)
{
    return registry_find (r, REG_BLOB, name);
}

/* FNV-1a, 64 bits */
static uint64_t fnv (uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t registry_signature (const struct registry *r)
{
    static const char letter[] = {'v', 'a', 'b'};
    uint64_t h = 0xcbf29ce484222325ull, x;
    struct reg_item it;

    REG_FOREACH (r, it)
    {
        h = fnv (h, &letter[it.kind], 1);
        h = fnv (h, it.name, strlen (it.name) + 1);
        if (it.kind == REG_BLOB)
            continue; /* no fixed size, no type */
        x = it.unit;
        h = fnv (h, &x, sizeof (x));
        x = (uint64_t)it.type;
        h = fnv (h, &x, sizeof (x));
    }
    return h;
}

void registry_values_load (struct registry *r, const void *buf)
{
    const char *p = buf;
    struct reg_item it;

    REG_FOREACH_OF (r, REG_VALUE, it)
    {
        memcpy (it.data, p, it.bytes);
        p += it.bytes;
    }
}

void registry_clear_restore (struct registry *r)
{
    for (int i = 0; r && i < r->na; i++) {
        if (!r->a[i].rbuf_app)
            free (r->a[i].rbuf);
        r->a[i].rbuf = NULL;
        r->a[i].rbuf_app = 0;
        r->a[i].rcount = 0;
        r->a[i].restored = 0;
        r->a[i].in_place = 0;
    }
}
