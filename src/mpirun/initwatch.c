/* initwatch.c - the MPI_Init deadline of an attempt (--init-timeout) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "initwatch.h"

/* How often the event log is read while the deadline may matter. */
#define READ_PERIOD 0.5
/* The most of the log read at once (what is left is read next time). */
#define READ_MAX (4u << 20)

static int in_report (const struct report *rep, int rank)
{
    for (int i = 0; rep && i < rep->n; i++)
        if (rep->f[i].rank == rank)
            return 1;
    return 0;
}

int init_pending (const struct events *ev,
                  const struct report *rep,
                  int np,
                  struct init_pending *p)
{
    memset (p, 0, sizeof (*p));
    p->first_dead = -1;
    if (np > EVENTS_MAX_RANKS)
        np = EVENTS_MAX_RANKS;
    /* a failure that names no rank (a lost node) is a death too */
    for (int i = 0; rep && i < rep->n; i++)
        if (rep->f[i].rank < 0 || rep->f[i].rank >= np)
            p->ndead++;
    for (int r = 0; r < np; r++) {
        int dead = ev->rank_exit[r] != EVENTS_EXIT_NONE || in_report (rep, r) ||
                   in_report (&ev->failed, r);
        if (dead) {
            if (p->first_dead < 0)
                p->first_dead = r;
            p->ndead++;
            continue;
        }
        if (ev->rank_init[r] == EVENTS_INIT_DONE)
            continue;
        if (p->nwaiting < INITWATCH_SHOWN)
            p->waiting[p->nwaiting] = r;
        p->nwaiting++;
        if (ev->rank_init[r] == EVENTS_INIT_LOADED)
            p->nloaded++;
    }
    if (ev->first_exit >= 0 && ev->first_exit < np)
        p->first_dead = ev->first_exit;
    return p->ndead > 0 && p->nloaded > 0;
}

void init_pending_ranks (const struct init_pending *p, int np, char *buf, size_t size)
{
    size_t used;
    int shown = p->nwaiting < INITWATCH_SHOWN ? p->nwaiting : INITWATCH_SHOWN, n;

    n = snprintf (buf, size, "rank%s ", p->nwaiting == 1 ? "" : "s");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < shown && used < size; i++) {
        n = snprintf (buf + used, size - used, "%s%d", i ? ", " : "", p->waiting[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (p->nwaiting > shown && used < size) {
        n = snprintf (buf + used, size - used, ", ... (%d in all)", p->nwaiting);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size)
        snprintf (buf + used, size - used, " of %d", np);
}

void initwatch_init (
    struct initwatch *w, const char *path, off_t from, int np, double timeout)
{
    memset (w, 0, sizeof (*w));
    events_init (&w->ev);
    snprintf (w->path, sizeof (w->path), "%s", path);
    w->off = from;
    w->np = np;
    w->timeout = timeout;
}

void initwatch_clear (struct initwatch *w)
{
    events_clear (&w->ev);
}

/* Parse the whole lines the log gained since w->off. */
static void read_new (struct initwatch *w)
{
    struct stat st;
    size_t want, got = 0;
    char *buf, *last;
    int fd;

    if ((fd = open (w->path, O_RDONLY | O_CLOEXEC)) < 0)
        return; /* ENOENT: nothing logged yet */
    if (fstat (fd, &st) < 0 || st.st_size <= w->off) {
        close (fd);
        return;
    }
    want = (size_t)(st.st_size - w->off);
    if (want > READ_MAX)
        want = READ_MAX;
    if (!(buf = malloc (want + 1))) {
        close (fd);
        return;
    }
    while (got < want) {
        ssize_t n = pread (fd, buf + got, want - got, w->off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close (fd);
    buf[got] = '\0';
    /* a line still being written waits for its newline; one longer than
     * READ_MAX is skipped whole */
    if ((last = memrchr (buf, '\n', got))) {
        last[1] = '\0';
        events_parse (&w->ev, buf);
        w->off += (off_t)(last + 1 - buf);
    } else if (got == READ_MAX)
        w->off += (off_t)got;
    free (buf);
}

/* "rank 1 on vm killed by signal 9 (Killed)", or "rank 1 exited 3". */
static void describe_death (
    const struct initwatch *w, const struct report *rep, int rank, char *buf, size_t size)
{
    const struct report *reps[2] = {&w->ev.failed, rep};

    for (int k = 0; k < 2; k++)
        for (int i = 0; reps[k] && i < reps[k]->n; i++)
            if (reps[k]->f[i].rank == rank) {
                failure_describe (&reps[k]->f[i], buf, size);
                return;
            }
    if (rank >= 0)
        snprintf (buf, size, "rank %d ended", rank);
    else if (rep && rep->n > 0)
        failure_describe (&rep->f[0], buf, size);
    else
        snprintf (buf, size, "a rank ended");
}

int initwatch_check (
    struct initwatch *w, const struct report *rep, double now, char *why, size_t size)
{
    struct init_pending p;
    char ranks[256], death[320];

    if (w->timeout <= 0 || w->settled || w->fired || w->np <= 0)
        return 0;
    if (now >= w->next_read) {
        w->next_read = now + READ_PERIOD;
        read_new (w);
    }
    if (!init_pending (&w->ev, rep, w->np, &p)) {
        if (w->armed_at)
            log_info ("the ranks that held MPI_Init up have finished it or ended: the "
                      "MPI_Init deadline is off");
        w->armed_at = 0;
        /* every rank finished MPI_Init: nothing can be held in it now */
        if (w->ev.ninit_done >= w->np && w->np <= EVENTS_MAX_RANKS)
            w->settled = 1;
        return 0;
    }
    init_pending_ranks (&p, w->np, ranks, sizeof (ranks));
    describe_death (w, rep, p.first_dead, death, sizeof (death));
    if (p.ndead > 1) {
        size_t used = strlen (death);
        snprintf (death + used, sizeof (death) - used, " and %d more", p.ndead - 1);
    }
    if (!w->armed_at) {
        w->armed_at = now;
        log_info ("%s while %s had not finished MPI_Init: the attempt is stopped if "
                  "they have not within %g s (--init-timeout)",
                  death,
                  ranks,
                  w->timeout);
        return 0;
    }
    if (now - w->armed_at < w->timeout)
        return 0;
    w->fired = 1;
    snprintf (why,
              size,
              "%s never finished MPI_Init: still not %.1f s after %s "
              "(--init-timeout %g s)",
              ranks,
              now - w->armed_at,
              death,
              w->timeout);
    return 1;
}
