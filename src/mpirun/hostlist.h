/* hostlist.h - the hosts of an elastic-mpirun job, and who runs on them
 *
 * Pure bookkeeping (no I/O except hostlist_write): hosts come from a
 * hostfile, a --host list or a Slurm allocation; hosts whose processes died
 * are excluded from the next launch, spare hosts replace them, and the world
 * size is recomputed within --np-min/--np-max.
 *
 * Every function that can fail returns -1 and writes one line into err
 * naming the bad value and what is accepted.
 */
#ifndef ELASTIC_MPIRUN_HOSTLIST_H
#define ELASTIC_MPIRUN_HOSTLIST_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"
#include "common/hostlist.h"

enum host_state {
    HOST_ACTIVE = 0, /* launched on */
    HOST_SPARE = 1,  /* held back until an active host fails */
    HOST_FAILED = 2, /* its processes died: excluded */
    HOST_DOWN = 3,   /* the scheduler marks it down: excluded */
};

struct host {
    char *name;
    int slots; /* 0: unknown (hostfile line without slots=) */
    enum host_state state;
    int was_active; /* ran ranks at some point */
    int replaced;   /* a spare was promoted in its place */
    char why[128];  /* why it was excluded */
};

struct hostlist;

/* Create an empty list.  Returns NULL on allocation failure. */
struct hostlist *hostlist_create (void);

/* Free the list (NULL-safe, preserves errno). */
void hostlist_destroy (struct hostlist *hl);

/* Add a host (a repeated name adds its slots, as Open MPI does).  slots 0
 * means unknown.  Returns 0, or -1 with err. */
int hostlist_add (
    struct hostlist *hl, const char *name, int slots, int spare, elastic_error_t *err);

/* Parse the text of an Open MPI hostfile: "name [slots=N] [max_slots=M]
 * [spare]" per line, '#' comments.  `spare` (an elastic-mpirun keyword)
 * holds the host back as a spare.  source names the file in errors.
 * Returns the number of hosts added, or -1 with err. */
int hostlist_parse_hostfile (struct hostlist *hl,
                             const char *text,
                             const char *source,
                             elastic_error_t *err);

/* Parse a --host list "a,b:4,c" (":N" slots; none means 1).
 * Returns the number of hosts added, or -1 with err. */
int hostlist_parse_hosts (struct hostlist *hl, const char *list, elastic_error_t *err);

/* Add the hosts of `scontrol show hostnames` output (one per line) or of
 * compact Slurm host lists ("n[1-3,5],gpu07", hostlist_expand in
 * common/hostlist.h, which also has slurm_expand_counts) with slots from a
 * Slurm count list (NULL or "": unknown).
 * Returns the number of hosts added, or -1 with err. */
int hostlist_add_slurm (struct hostlist *hl,
                        const char *hostnames,
                        const char *counts,
                        elastic_error_t *err);

/* Mark the nodes that `sinfo -h -N -o "%N %t"` output shows down, drained,
 * failing or not responding (a trailing '*') as HOST_DOWN.  Returns how
 * many hosts of the list it marked. */
int hostlist_mark_slurm_down (struct hostlist *hl, const char *sinfo_text);

/* Hold the last n non-spare hosts back as spares.  Returns 0, or -1 with
 * err when fewer than n + 1 hosts would remain. */
int hostlist_set_spares (struct hostlist *hl, int n, elastic_error_t *err);

/* Exclude the host `name` (matched by hostlist_match) as failed, with a
 * reason.  Returns 1 if a listed host was excluded now, 0 if it was already
 * excluded or is not in the list. */
int hostlist_fail (struct hostlist *hl, const char *name, const char *why);

/* Promote one spare to active for each excluded host that had run ranks
 * and was not replaced yet.  Writes "spare X replaces Y" lines into log (may
 * be NULL).  Returns the number of spares promoted. */
int hostlist_replace_failed (struct hostlist *hl, char *log, size_t logsz);

/* World size for the next launch: `desired` (0: as many as the slots
 * allow, else np_max) bounded by the active slots (unless oversubscribe),
 * by np_max (0: none), and at least np_min.  Hosts with unknown slots are
 * taken to hold an equal share of `desired`.  Sets *np (0: let mpirun
 * choose).  Returns 0, or -1 with err when np_min cannot be met. */
int hostlist_plan_np (const struct hostlist *hl,
                      int desired,
                      int np_min,
                      int np_max,
                      int oversubscribe,
                      int *np,
                      elastic_error_t *err);

/* Write an Open MPI hostfile of the active hosts.  Returns 0 or -1 (errno). */
int hostlist_write (const struct hostlist *hl, FILE *f);

/* Number of hosts, and host i (borrowed; NULL if out of range). */
size_t hostlist_count (const struct hostlist *hl);
const struct host *hostlist_get (const struct hostlist *hl, size_t i);

/* Hosts and known slots in a state. */
int hostlist_count_state (const struct hostlist *hl, enum host_state st, int *slots);

/* One line: "n1(4) n2(4) | spares: n3(4) | excluded: n4 (why)". */
void hostlist_describe (const struct hostlist *hl, char *buf, size_t size);

/* Whether two host names mean the same host: equal ignoring case, or equal
 * up to the first '.' (short name vs FQDN). */
int hostlist_match (const char *a, const char *b);

/* The state's name: active, spare, failed, down. */
const char *hostlist_state_name (enum host_state st);

#endif /* ELASTIC_MPIRUN_HOSTLIST_H */
