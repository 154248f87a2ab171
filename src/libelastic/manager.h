/* manager.h - the elastic manager's state, shared by its source files (internal)
 *
 * Processes are named by their original rank (in the communicator given to
 * elastic_manager_create).  The replicated part (membership, counters,
 * snapshot metadata) is identical on every working rank after each
 * committed change; spares receive it when an event needs them.
 */
#ifndef ELASTIC_MANAGER_H
#define ELASTIC_MANAGER_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

#include "registry.h"
#include "snapshot.h"
#include "testhook.h"

/* Message tags on the manager's own communicators. */
enum { TAG_WAKE = 7101, TAG_L2 = 7102, TAG_RESTORE = 7103, TAG_BLOB = 7104 };

/* Flags of the agreements on the working communicator (bitwise AND).
 *
 * Every working rank ends the life of a working communicator with exactly
 * one agreement on it: the commit of a snapshot that did not commit, or
 * the entry of a world event.  Ranks reach either one (those in a snapshot
 * when a failure struck, those that saw it elsewhere), so both use these
 * bits and every rank reads the same outcome. */
enum {
    W_IN_SNAPSHOT = 1, /* contributed by snapshot participants only */
    W_SNAP_OK = 2,     /* my part of the snapshot is complete */
    W_NO_FAILURE = 4,  /* I saw no process failure */
    W_NOT_DONE = 8,    /* I am not ending the job */
    W_GROW = 16,       /* I am growing (or neutral) */
};

struct elastic_manager {
    elastic_config_t cfg;
    char *snapshot_dir;
    char *event_log;

    MPI_Group orig_group; /* the group of the creating communicator */
    int norig;
    int me; /* original rank */

    MPI_Comm world; /* live processes: workers and idle spares */
    MPI_Comm work;  /* working ranks (MPI_COMM_NULL on idle spares) */

    /* replicated membership */
    int nwork;
    int *slot; /* [norig] slot[j] = original rank of working rank j */
    int nspare;
    int *spare; /* [norig] idle spares, ascending */
    int orig_nwork;
    int events;          /* elastic down events committed */
    uint64_t generation; /* world changes committed */
    int in_event;        /* an event committed but not finished */
    int event_counted;   /* ... and counted as an elastic down event */
    int handler_tries;   /* failed handler calls in this event */
    int myslot;          /* my working rank, -1 on an idle spare */

    struct registry *reg;
    uint64_t *layout; /* [nwork * na] current array counts per working rank */
    struct snapstore *store;
    int *buddy; /* [nwork] working rank holding j's L2 (-1 none) */
    int buddy_valid;

    elastic_handler_f handler;
    void *handler_arg;
    elastic_event_f event_cb;
    void *event_arg;

    int64_t step;      /* last step seen */
    double t_progress; /* time of the last library call */
    int started;
    int finished; /* the world was ended (done or final error) */
    int in_handler;
    int work_final;  /* the last agreement on work was made (see W_*) */
    int work_result; /* its outcome */
    int fatal_rc;    /* the final error, once finished by one */

    struct testhook *hooks;
};

/* Seconds from an arbitrary origin (monotonic). */
double mgr_now (void);

/* Set err's text (if err is not NULL) and return code. */
int mgr_err (elastic_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Record that every rank agreed on error rc, and whether this process is
 * the one that reports it in its exit code (see elastic_exit_code). */
void mgr_set_agreed_error (int rc, int reporter);

/* Rebuild m->layout from the registered counts (collective over work). */
int mgr_gather_layout (struct elastic_manager *m);

/* Working rank of original rank r in the current membership, or -1. */
int mgr_slot_of (const struct elastic_manager *m, int r);

/* Why a world event is run (recover.c). */
enum event_why {
    WHY_FAILURE, /* a worker saw a process failure */
    WHY_GROW,    /* maybe_reshard_up found idle spares */
    WHY_DONE,    /* destroy: the job is over */
    WHY_SPARE,   /* an idle spare was woken */
};

/* Outcome of a world event for the calling process. */
enum event_outcome {
    EV_WORKING, /* a working rank of the new world (rolled back, handler run) */
    EV_IDLE,    /* still an idle spare */
    EV_DONE,    /* the job is over */
};

/* Run a world event with every live process until the new world is
 * committed, the job is over, or a final error (ELASTIC_ERR_RELAUNCH). */
int event_run (struct elastic_manager *m,
               enum event_why why,
               elastic_handler_f handler,
               void *arg,
               enum event_outcome *outcome,
               elastic_error_t *err);

#endif /* ELASTIC_MANAGER_H */
