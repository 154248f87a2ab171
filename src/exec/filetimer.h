/* filetimer.h - torchelastic's file-based watchdog timer, server side
 *
 * Workers (torch.distributed.elastic.timer.FileTimerClient, or any program)
 * write one JSON object per line to a FIFO:
 *   {"version": 1, "pid": 1234, "scope_id": "step", "expiration_time":
 *    1714564800.5, "signal": 9}
 * to arm a deadline (epoch seconds) for (pid, scope_id), and the same with
 * "expiration_time": -1 to release it.  When a deadline passes, the agent
 * sends the timer's signal to that pid (if it belongs to a worker) and
 * forgets every timer of the pid.  Malformed or oversized lines are dropped
 * with a warning; the table is bounded.
 */
#ifndef ELASTIC_EXEC_FILETIMER_H
#define ELASTIC_EXEC_FILETIMER_H

#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

struct filetimer;

struct filetimer_expired {
    pid_t pid;
    int signum;
    char scope[128];
    double expiration; /* epoch seconds */
};

/* Create the FIFO at path (replacing what is there) and open it.  Returns
 * NULL with one line in err. */
struct filetimer *filetimer_create (const char *path, elastic_error_t *err);

/* Close and unlink the FIFO (NULL-safe). */
void filetimer_destroy (struct filetimer *ft);

/* The FIFO's descriptor, for the loop. */
int filetimer_fd (struct filetimer *ft);

/* Read and apply every complete request waiting in the FIFO.  Returns the
 * number applied. */
int filetimer_read (struct filetimer *ft);

/* The earliest armed deadline (epoch seconds), or 0 if none. */
double filetimer_next (struct filetimer *ft);

/* Move up to max expired timers (one per pid: the earliest with a signal >
 * 0) into out and forget every timer of those pids.  Returns the count. */
int filetimer_expire (struct filetimer *ft,
                      double now,
                      struct filetimer_expired *out,
                      int max);

/* Forget every timer of pid (the worker exited). */
void filetimer_clear_pid (struct filetimer *ft, pid_t pid);

/* Forget everything (a new attempt). */
void filetimer_clear (struct filetimer *ft);

/* Number of armed timers. */
int filetimer_count (struct filetimer *ft);

#endif /* ELASTIC_EXEC_FILETIMER_H */
