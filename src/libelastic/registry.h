/* registry.h - the state an application registers with its manager (internal)
 *
 * Values are replicated bytes restored in place; arrays are distributed in
 * blocks along their first dimension; blobs are opaque per-rank bytes.
 * During a world change each array also carries its restored block (rbuf)
 * until the handler copies it out with elastic_array_restore, or, for an
 * array with a placement hook (elastic_array_set_realloc), the block is
 * restored straight into the application's buffer the hook returned.
 */
#ifndef ELASTIC_REGISTRY_H
#define ELASTIC_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <elastic.h>

#define REG_NAME_MAX 64

struct reg_value {
    char name[REG_NAME_MAX];
    void *data;
    size_t size;
    int type; /* ELASTIC_TYPE_* (L3 only) */
};

struct reg_array {
    char name[REG_NAME_MAX];
    void *data;
    size_t elem_size;
    uint64_t count;
    int type;        /* ELASTIC_TYPE_* (L3 only) */
    void *rbuf;      /* restored block, during a world change */
    uint64_t rcount; /* its element count */
    int rbuf_app;    /* rbuf is the application's (from place): not freed */
    int restored;    /* elastic_array_restore was called */
    int in_place;    /* ... with rbuf itself: nothing was copied */
    /* placement hook (elastic_array_set_realloc), NULL: none */
    void *(*place) (void *data, uint64_t count, uint64_t new_count, void *arg);
    void *place_arg;
    int diff; /* ELASTIC_DIFF_* (elastic_array_set_diff) */
    /* a device array (gpu.h): data is the library's pinned host mirror */
    int is_dev;
    void *dev;         /* the application's device buffer (count elements) */
    size_t mirror_cap; /* bytes the mirror holds */
    void *stage;       /* device staging copy of a periodic snapshot (gpu.h) */
    size_t stage_cap;  /* bytes it holds */
    int dev_placed;    /* dev came from the placement hook in this restore */
};

struct reg_blob {
    char name[REG_NAME_MAX];
    const void *data;
    size_t size;
};

struct registry {
    struct reg_value *v;
    int nv;
    struct reg_array *a;
    int na;
    struct reg_blob *b;
    int nb;
    size_t vbytes; /* sum of the value sizes */
    int frozen;    /* no new names (after start) */
};

/* The kinds of registered items, in the order of a serialized snapshot
 * (snapshot.h) and of registry_signature. */
enum reg_kind { REG_VALUE = 0, REG_ARRAY = 1, REG_BLOB = 2 };

/* One registered item as an iteration over all of them sees it. */
struct reg_item {
    enum reg_kind kind;
    int index; /* within its kind: r->v[index], r->a[index] or r->b[index] */
    const char *name;
    void *data;       /* the application's bytes (a blob's: read only) */
    size_t bytes;     /* its local bytes now: size, count * elem_size, size */
    size_t unit;      /* the fixed size of each rank's item: a value's size, an
                         array's elem_size; 0 for a blob (any size per rank) */
    int type;         /* ELASTIC_TYPE_* (a blob: 0) */
    const char *what; /* "value", "array", "blob" */
    uint64_t extent;  /* what a snapshot's metadata records of it: an array's
                         element count, a blob's bytes (a value: its bytes) */
    int col;          /* its column in a snapshot's metadata row (snapshot.h:
                         the arrays, then the blobs); -1 for a value */
};

/* Item k of r in the order values, arrays, blobs: 1 with *it filled, or 0
 * when k is past the last (never fails otherwise). */
int registry_item (const struct registry *r, int k, struct reg_item *it);

/* Every registered item of r in that order, into the struct reg_item it. */
#define REG_FOREACH(r, it)                                                               \
    for (int reg_k_ = 0; registry_item ((r), reg_k_, &(it)); reg_k_++)

/* Item i of one kind (r->v[i], r->a[i] or r->b[i]) as registry_item sees
 * it: 1, or 0 when i is past the last of that kind. */
int registry_item_of (const struct registry *r,
                      enum reg_kind kind,
                      int i,
                      struct reg_item *it);

/* Every registered item of one kind, in order. */
#define REG_FOREACH_OF(r, kind, it)                                                      \
    for (int reg_k_ = 0; registry_item_of ((r), (kind), reg_k_, &(it)); reg_k_++)

/* The index within its kind of name's item, or -1. */
int registry_find (const struct registry *r, enum reg_kind kind, const char *name);

struct registry *registry_create (void);
void registry_destroy (struct registry *r);

/* Add an entry; ELASTIC_ERR_EXISTS if the name is taken (any kind),
 * ELASTIC_ERR_INVAL on a bad name or size, ELASTIC_ERR_STATE when frozen. */
int registry_add_value (
    struct registry *r, const char *name, void *data, size_t size, elastic_error_t *err);
int registry_add_array (struct registry *r,
                        const char *name,
                        void *data,
                        size_t elem_size,
                        uint64_t count,
                        elastic_error_t *err);
/* Adds, or updates data and size of an existing blob (also when frozen). */
int registry_set_blob (struct registry *r,
                       const char *name,
                       const void *data,
                       size_t size,
                       elastic_error_t *err);

/* Set the element type of a value or array (see elastic_set_type). */
int registry_set_type (struct registry *r,
                       const char *name,
                       int type,
                       elastic_error_t *err);

/* Index of a name, or -1. */
int registry_find_array (const struct registry *r, const char *name);
int registry_find_blob (const struct registry *r, const char *name);
int registry_find_value (const struct registry *r, const char *name);

/* A hash of the names, kinds and fixed sizes, equal on ranks that registered
 * the same state in the same order. */
uint64_t registry_signature (const struct registry *r);

/* Copy the values in buf (r->vbytes bytes: every value's bytes in order, as
 * a serialized snapshot begins) into the application's variables. */
void registry_values_load (struct registry *r, const void *buf);

/* Free the restored blocks (those the library allocated). */
void registry_clear_restore (struct registry *r);

#endif /* ELASTIC_REGISTRY_H */
