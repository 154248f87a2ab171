/* events.h - what the job's JSON-lines event log says happened
 *
 * ELASTIC_EVENT_LOG is written by libelastic (one line per in-place
 * recovery: "reshard_down", "reshard_up", or a final "fatal"; "suspend"
 * with the step and the L3 file once the ranks suspended) and by
 * elastic-exec in wrapper mode ("worker_start" with the rank's "host",
 * "worker_exit" with "exitcode", "state" and "signal"); with
 * ELASTIC_REPORT_INIT=1 each rank's libelastic also writes "rank_loaded"
 * as it loads (before MPI_Init) and "rank_initialized" once MPI is
 * initialized.  The parser reads top-level
 * fields of each line and skips what it does not know: a damaged or foreign
 * line is counted and ignored, never fatal.
 */
#ifndef ELASTIC_MPIRUN_EVENTS_H
#define ELASTIC_MPIRUN_EVENTS_H

#include <stddef.h>
#include <sys/types.h>

#include "report.h"

#define EVENTS_MAX_RESHARDS 64
#define EVENTS_MAX_RANKS    4096

/* rank_exit: how a rank's process ended */
enum {
    EVENTS_EXIT_NONE = 0,  /* no worker_exit seen */
    EVENTS_EXIT_ZERO,      /* exit 0 */
    EVENTS_EXIT_SUSPENDED, /* exit 75 */
    EVENTS_EXIT_OTHER,     /* another code, or a signal */
    EVENTS_EXIT_KINDS
};

/* rank_init: what a rank's libelastic said of its MPI_Init */
enum {
    EVENTS_INIT_NONE = 0, /* nothing (not started, or no libelastic) */
    EVENTS_INIT_LOADED,   /* rank_loaded: started, MPI_Init not finished */
    EVENTS_INIT_DONE,     /* rank_initialized */
};

struct reshard {
    char kind[24]; /* reshard_down, reshard_up */
    long long step;
    int old_size, new_size;
    int nfailed;
    double total_ms; /* t_total_ms, or -1 if absent */
};

struct events {
    int nreshard; /* lines whose event starts with "reshard" (deduplicated) */
    int nreshard_down;
    int nreshard_up;      /* growths (reshard_up): no failure */
    double reshard_ms;    /* sum of their t_total_ms */
    double reshard_up_ms; /* the growths' part of it */
    struct reshard r[EVENTS_MAX_RESHARDS];
    int nfatal;
    char fatal[256]; /* the first fatal event's error text */
    int nsuspended;  /* elastic-exec "suspended" events */
    /* libelastic's "suspend": working rank 0 writes it after the collective
     * L3 write of the suspend step committed (or failed: no file) */
    int nsuspend;
    long long suspend_step;
    /* libelastic's "completed": working rank 0 writes it once every live
     * process agreed that the job ended (elastic_manager_destroy) */
    int ncompleted;
    long long completed_step;
    int completed_world;
    /* ranks a reshard event names as failed: the job recovered from them */
    unsigned char recovered[EVENTS_MAX_RANKS];
    char suspend_file[4096]; /* "" when the event names no file */
    /* how each rank's wrapper said it exited (worker_exit; the last one
     * counts), and how many ranks ended each way */
    unsigned char rank_exit[EVENTS_MAX_RANKS];
    int nexit[EVENTS_EXIT_KINDS];
    int first_exit; /* the rank of the first worker_exit line, -1: none */
    /* what each rank's libelastic said of its MPI_Init (rank_loaded,
     * rank_initialized; never downgraded), and how many ranks said each */
    unsigned char rank_init[EVENTS_MAX_RANKS];
    int ninit_loaded, ninit_done;
    int bad_lines; /* not a JSON object */
    int lines;
    /* rank -> host from elastic-exec's worker_start (NULL: unknown) */
    char *host_of[EVENTS_MAX_RANKS];
    /* failed processes: worker_exit (FAILED, with a signal) and the
     * "failed" ranks of reshard_down/fatal events */
    struct report failed;
};

/* Reset ev to empty. */
void events_init (struct events *ev);

/* Free what ev holds (not ev itself). */
void events_clear (struct events *ev);

/* Parse JSON lines from text.  Returns the number of lines understood. */
int events_parse (struct events *ev, const char *text);

/* Parse the file from byte offset `from` (0: the start).  Returns the
 * number of lines understood, or -1 with errno if it cannot be read
 * (ENOENT when nothing was logged). */
int events_read_file (struct events *ev, const char *path, off_t from);

/* Fill in the hosts of failures that name only a rank, from the
 * worker_start map.  Returns how many it filled. */
int events_resolve_hosts (struct events *ev);

/* Whether the ranks of an attempt of np ranks suspended, by their own
 * account, whatever mpirun's exit code: libelastic's suspend event names a
 * committed L3 file, or the wrappers of all np ranks reported an exit, at
 * least one of them 75 and the others 0 (libelastic has working rank 0
 * carry the job's code; other programs may exit 75 everywhere).  Returns 1
 * with the evidence in why, else 0. */
int events_suspended (const struct events *ev, int np, char *why, size_t size);

/* Find key at the top level of the JSON object `obj` and return a pointer
 * to its raw value (and its length), or NULL.  Exposed for tests. */
const char *json_find (const char *obj, const char *key, size_t *len);

/* Copy a JSON string value (basic unescaping) into buf.  Returns 0, or -1
 * if the value is not a string. */
int json_string (const char *val, size_t len, char *buf, size_t size);

#endif /* ELASTIC_MPIRUN_EVENTS_H */
