/* eventlog.h - the agent's JSON-lines event log (--event-log)
 *
 * One JSON object per line, written with a single write(2) to a file opened
 * O_APPEND, so lines stay whole even when several agents share the file:
 *   {"ts":1714564800.123456,"time":"2024-05-01T12:00:00.123456Z",
 *    "event":"worker_exit","run_id":"...","role":"default","host":"n1",
 *    "agent_pid":42, ...event fields...}
 * Thread-safe (the health server logs its transitions from its thread).
 */
#ifndef ELASTIC_EXEC_EVENTLOG_H
#define ELASTIC_EXEC_EVENTLOG_H

#include <jansson.h>

struct eventlog;

/* Open (create, append) path.  Returns NULL with errno. */
struct eventlog *eventlog_open (const char *path, const char *run_id, const char *role);

/* Close (NULL-safe). */
void eventlog_close (struct eventlog *ev);

/* Log event `name` with the fields of obj (stolen, may be NULL).  A NULL
 * log does nothing.  Returns 0, or -1 with errno if the line could not be
 * written. */
int eventlog_emit (struct eventlog *ev, const char *name, json_t *obj);

/* Change the run id shown in later lines (after a rendezvous). */
void eventlog_set_run_id (struct eventlog *ev, const char *run_id);

#endif /* ELASTIC_EXEC_EVENTLOG_H */
