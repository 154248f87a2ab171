/* event.h - one JSON line per world change or final error (internal)
 *
 * Written by hand (libelastic depends on MPI only) with JSON string escaping;
 * appended with one write(2) to the event log and passed to the callback.
 */
#ifndef ELASTIC_EVENT_H
#define ELASTIC_EVENT_H

#include <stddef.h>
#include <stdint.h>

struct elastic_manager;

struct event_rec {
    const char *kind; /* reshard_down, reshard_up, fatal */
    int64_t step;
    int old_size;
    int new_size;
    const int *failed; /* original ranks */
    int nfailed;
    const int *used; /* spares that started working */
    int nused;
    const int *spawned; /* a growth: the new processes (original ranks) */
    int nspawned;
    double t_spawn, t_merge; /* ... its MPI_Comm_spawn and merge, seconds */
    double t_snapshot;       /* ... the snapshot it took before, seconds */
    int64_t rewound;         /* ... started this many steps back instead */
    double t_rewind;         /* ... about this long to redo them, seconds */
    int attempts;
    int handler_tries;
    /* phase durations, seconds */
    double t_detect, t_revoke_agree, t_shrink, t_restore, t_handler, t_protect, t_total;
    int protect_deferred; /* a growth: protected at the next snapshot step */
    const char *error;    /* fatal only */
    int rank;             /* original rank of the writer */
};

/* Format e as one JSON object (no newline) into buf.  Returns the length, or
 * -1 if it did not fit. */
int event_format (const struct event_rec *e, char *buf, size_t size);

/* Format e, append it to the event log if write_file, and pass it to the
 * callback.  Never fails (a log that cannot be written is warned about). */
void event_emit (struct elastic_manager *m, const struct event_rec *e, int write_file);

/* Append line (n bytes; line[n] must be writable, it is restored) and a
 * newline to the event log, if there is one, in one write(2).  Safe from
 * any thread; warns if the log cannot be written. */
void event_append (struct elastic_manager *m, char *line, int n);

/* An event of the L3 level: persist, persist_failed, suspend, resume.
 * Unset strings are left out (file: null). */
struct l3_event_rec {
    const char *kind;
    int64_t step;
    int world_size; /* persist, persist_failed, suspend */
    int old_size;   /* resume */
    int new_size;   /* resume */
    int64_t bytes;  /* persist: file size (-1: unknown) */
    double t;       /* persist: t_write_ms; resume: t_restore_ms (seconds) */
    const char *file;
    const char *reason; /* suspend */
    const char *error;  /* persist_failed */
    int rank;
};

/* Format e as one JSON object (no newline) into buf; -1 if it did not fit. */
int event_format_l3 (const struct l3_event_rec *e, char *buf, size_t size);

/* As event_emit, for an L3 event. */
void event_emit_l3 (struct elastic_manager *m,
                    const struct l3_event_rec *e,
                    int write_file);

#endif /* ELASTIC_EVENT_H */
