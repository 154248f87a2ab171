/* initwatch.h - the MPI_Init deadline of an attempt (--init-timeout)
 *
 * A rank that dies before every rank finished MPI_Init can leave the
 * others waiting inside it: PRRTE under --with-ft ulfm then neither aborts
 * the job nor ends (the survivors wait in MPI_Init's fence for the dead
 * rank, or for a peer that never entered it).  While mpirun runs, the
 * attempt's event log is read as it grows: who ended (elastic-exec's
 * worker_exit, the ranks named by libelastic's failure events, and those
 * named in mpirun's stderr report) and who finished MPI_Init (libelastic's
 * rank_loaded and rank_initialized lines, ELASTIC_REPORT_INIT=1).  Once a
 * rank has ended while a live rank that said it loaded has not said it
 * finished MPI_Init, those ranks get --init-timeout seconds to finish it;
 * then the attempt is stopped and counts as failed (relaunched as any
 * failure).  Nobody dead: never judged, however slow MPI_Init is.  A
 * program without libelastic says nothing and is never judged either.
 */
#ifndef ELASTIC_MPIRUN_INITWATCH_H
#define ELASTIC_MPIRUN_INITWATCH_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "events.h"
#include "report.h"

#define INITWATCH_SHOWN 16

/* Who holds MPI_Init up at one moment (the pure part). */
struct init_pending {
    int ndead;                    /* ranks that ended, and failures that name no rank */
    int first_dead;               /* the first to end by the event log, else the lowest
                                     dead rank; -1: none known */
    int nwaiting;                 /* live ranks that have not said MPI_Init finished */
    int nloaded;                  /* of them, those whose libelastic said it loaded */
    int waiting[INITWATCH_SHOWN]; /* the first of them */
};

/* Fill p from the events and mpirun's report of an attempt of np ranks.
 * Returns 1 when the deadline runs (a rank ended and a live rank loaded
 * libelastic but has not finished MPI_Init), else 0. */
int init_pending (const struct events *ev,
                  const struct report *rep,
                  int np,
                  struct init_pending *p);

/* "rank 3 of 4", "ranks 0, 2, 3 of 4", "ranks 0, 1, ... (40 in all) of
 * 64": p's waiting ranks, into buf. */
void init_pending_ranks (const struct init_pending *p, int np, char *buf, size_t size);

/* The deadline of one attempt while its mpirun runs. */
struct initwatch {
    char path[PATH_MAX + 16]; /* the event log */
    off_t off;                /* read up to here (whole lines) */
    int np;
    double timeout;   /* --init-timeout; 0: off */
    double next_read; /* mono_now () of the next read of the log */
    double armed_at;  /* when the deadline started running (0: it is not) */
    int settled;      /* every rank finished MPI_Init: nothing to judge */
    int fired;
    struct events ev;
};

/* Start watching the event log at path from byte `from`, for np ranks. */
void initwatch_init (
    struct initwatch *w, const char *path, off_t from, int np, double timeout);

/* Free what w holds (not w). */
void initwatch_clear (struct initwatch *w);

/* Read what the log gained (at most every 0.5 s), judge at now (mono_now)
 * with mpirun's report so far.  Returns 1 once, when the deadline has
 * passed, with the line that says so in why; else 0. */
int initwatch_check (
    struct initwatch *w, const struct report *rep, double now, char *why, size_t size);

#endif /* ELASTIC_MPIRUN_INITWATCH_H */
