/* persist_int.h - what persist.c and persist_bg.c share (internal) */
#ifndef ELASTIC_PERSIST_INT_H
#define ELASTIC_PERSIST_INT_H

#include <stdint.h>
#include <elastic.h>

#include "l3.h"

struct elastic_manager;

/* ELASTIC_TEST_KILL's persist hook for l3_write and l3_bg (arg: a struct
 * persist_hook_ctx). */
struct persist_hook_ctx {
    struct elastic_manager *m;
    int64_t step;
};
void persist_kill_hook (void *arg);

/* An L3 event of this rank (the file is written by working rank 0). */
void persist_emit (struct elastic_manager *m,
                   const char *kind,
                   int64_t step,
                   int64_t bytes,
                   double t,
                   const char *file,
                   const char *error);

/* The registered state as l3_write's descriptors (persist_state_free
 * frees them), pointing at the live data, or with image at this rank's
 * serialized snapshot (snapshot.h's layout).  Out of memory: NULL
 * descriptors, which l3_write refuses on every rank (it agrees on it),
 * and e says so. */
void persist_describe (const struct elastic_manager *m,
                       const char *image,
                       struct l3_state *st,
                       elastic_error_t *e);
void persist_state_free (struct l3_state *st);

/* The L3 file of step was committed (t seconds, what the deadline's
 * estimate uses): the manager's newest file and step; path (size bytes)
 * gets the file's path.  Returns the file's size on working rank 0, -1
 * elsewhere.  The caller logs and emits the persist event. */
int64_t persist_committed (
    struct elastic_manager *m, int64_t step, double t, char *path, size_t size);

/* A persist step's write failed without a process failure: the warning
 * (working rank 0) and the persist_failed event; the job continues. */
void persist_failed (struct elastic_manager *m, int64_t step, const char *why, double t);

#endif /* ELASTIC_PERSIST_INT_H */
