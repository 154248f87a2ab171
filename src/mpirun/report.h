/* report.h - what mpirun's exit report says about failed processes
 *
 * Open MPI's mpirun (PRRTE in 5.x, ORTE in 4.x) explains an abnormal end in
 * a help block between lines of dashes on stderr, e.g.
 *
 *   prterun noticed that process rank 1 with PID 27684 on node vm exited on
 *   signal 9 (Killed).
 *
 * The parser is fed stderr line by line, joins each block into one line and
 * recognises the messages that name a rank, a host, a signal or an exit
 * code.  Text it does not recognise is ignored.
 */
#ifndef ELASTIC_MPIRUN_REPORT_H
#define ELASTIC_MPIRUN_REPORT_H

#include <stddef.h>

enum failure_kind {
    FAIL_SIGNAL = 0,  /* a rank died on a signal (host is bad) */
    FAIL_EXIT,        /* a rank exited with a non-zero code */
    FAIL_ABORT,       /* a rank called MPI_Abort */
    FAIL_NOSYNC,      /* a rank exited without finalizing */
    FAIL_NODE_LOST,   /* a remote daemon was lost (host is bad) */
    FAIL_LAUNCH_HOST, /* the launch failed on a host (host is bad) */
    FAIL_NO_EXEC,     /* the executable could not be started: not relaunchable */
    FAIL_NO_SLOTS,    /* not enough slots: not relaunchable as is */
    FAIL_EVENT,       /* from the event log: a rank's process failed */
};

struct failure {
    enum failure_kind kind;
    int rank;       /* -1: unknown */
    char host[256]; /* "": unknown */
    int signal;     /* FAIL_SIGNAL, FAIL_EVENT: the signal, else 0 */
    int code;       /* FAIL_EXIT: the exit code */
};

#define REPORT_MAX_FAILURES 64

struct report {
    struct failure f[REPORT_MAX_FAILURES];
    int n;
    int dropped;      /* failures beyond REPORT_MAX_FAILURES */
    int in_block;     /* between dashed lines */
    char block[8192]; /* the block being joined */
    size_t blen;
    char text[4096]; /* the first recognised blocks, verbatim (joined) */
};

/* Reset r to empty. */
void report_init (struct report *r);

/* Feed one line of mpirun's stderr (without or with its newline).
 * Returns the number of failures recognised by this line. */
int report_feed_line (struct report *r, const char *line);

/* Parse what is still buffered (a block without its closing line).
 * Returns the number of failures recognised. */
int report_finish (struct report *r);

/* Parse one joined block of text; used by the feed and by tests.
 * Returns the number of failures recognised. */
int report_parse_block (struct report *r, const char *text);

/* Add a failure (deduplicated by kind, rank and host).  Returns 1 if
 * added, 0 if already known or the table is full. */
int report_add (struct report *r, const struct failure *f);

/* Whether a failure of this kind means its host should be excluded. */
int failure_host_is_bad (enum failure_kind kind);

/* One line describing f, e.g. "rank 1 on vm killed by signal 9 (Killed)". */
void failure_describe (const struct failure *f, char *buf, size_t size);

#endif /* ELASTIC_MPIRUN_REPORT_H */
