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
    int attempts;
    int handler_tries;
    /* phase durations, seconds */
    double t_detect, t_revoke_agree, t_shrink, t_restore, t_handler, t_protect, t_total;
    const char *error; /* fatal only */
    int rank;          /* original rank of the writer */
};

/* Format e as one JSON object (no newline) into buf.  Returns the length, or
 * -1 if it did not fit. */
int event_format (const struct event_rec *e, char *buf, size_t size);

/* Format e, append it to the event log if write_file, and pass it to the
 * callback.  Never fails (a log that cannot be written is warned about). */
void event_emit (struct elastic_manager *m, const struct event_rec *e, int write_file);

#endif /* ELASTIC_EVENT_H */
