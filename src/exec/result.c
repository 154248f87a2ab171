/* result.c - the run result (torchelastic's RunResult) and the failure report */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_impl.h"
#include "util.h"

struct entry {
    int rank;
    int local_rank;
    pid_t pid;
    int state;
    int exitcode;
    int signum;
    int failed;
    int lost; /* recovered in place */
    uint64_t seq;
    double timestamp;
    char *message;
    char *traceback;
    char *error_file;
    void *ret;
    size_t retlen;
    int has_ret;
};

struct elastic_agent_result {
    int state;
    int exit_status;
    int n;
    struct entry *e;
    char role[128];
    char host[256];
    int restarts;
    int max_restarts;
};

void elastic_agent_result_destroy (elastic_agent_result_t *r)
{
    int saved = errno;

    if (r) {
        for (int i = 0; i < r->n; i++) {
            free (r->e[i].message);
            free (r->e[i].traceback);
            free (r->e[i].error_file);
            free (r->e[i].ret);
        }
        free (r->e);
        free (r);
    }
    errno = saved;
}

static int by_rank (const void *a, const void *b)
{
    return ((const struct entry *)a)->rank - ((const struct entry *)b)->rank;
}

static char *dup_or_null (const char *s)
{
    return s ? strdup (s) : NULL;
}

elastic_agent_result_t *result_build (elastic_agent_t *agent, int state, int exit_status)
{
    struct elastic_agent_result *r;

    if (!(r = calloc (1, sizeof (*r))))
        return NULL;
    r->state = state;
    r->exit_status = exit_status;
    r->restarts = agent->restart_count;
    r->max_restarts = agent->spec->max_restarts;
    snprintf (r->role, sizeof (r->role), "%s", agent->spec->role);
    snprintf (r->host, sizeof (r->host), "%s", host_name ());
    if (!(r->e = calloc ((size_t)agent->nworkers, sizeof (*r->e))))
        goto error;
    pthread_mutex_lock (&agent->lock);
    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        struct entry *e = &r->e[r->n++];
        e->rank = w->rank;
        e->local_rank = w->local_rank;
        e->pid = w->pid;
        e->state = w->state;
        e->exitcode = w->exited ? w->exitcode : 0;
        e->signum = w->signum;
        e->failed = w->failed;
        e->lost = w->lost;
        e->seq = w->fail_seq;
        e->timestamp = w->fail_time;
        e->message = dup_or_null (w->message);
        e->traceback = dup_or_null (w->traceback);
        e->error_file = dup_or_null (w->error_file);
        if (w->has_ret && (e->ret = malloc (w->retlen ? w->retlen : 1))) {
            memcpy (e->ret, w->ret, w->retlen);
            e->retlen = w->retlen;
            e->has_ret = 1;
        }
    }
    pthread_mutex_unlock (&agent->lock);
    qsort (r->e, (size_t)r->n, sizeof (*r->e), by_rank);
    return r;
error:
    elastic_agent_result_destroy (r);
    return NULL;
}

int elastic_agent_result_state (const elastic_agent_result_t *r)
{
    return r ? r->state : ELASTIC_AGENT_UNKNOWN;
}

int elastic_agent_result_exit_status (const elastic_agent_result_t *r)
{
    return r ? r->exit_status : 1;
}

int elastic_agent_result_count (const elastic_agent_result_t *r)
{
    return r ? r->n : 0;
}

int elastic_agent_result_rank (const elastic_agent_result_t *r, int i)
{
    if (!r || i < 0 || i >= r->n)
        return -1;
    return r->e[i].rank;
}

static const struct entry *find (const elastic_agent_result_t *r, int rank)
{
    for (int i = 0; r && i < r->n; i++)
        if (r->e[i].rank == rank)
            return &r->e[i];
    return NULL;
}

int elastic_agent_result_return_value (const elastic_agent_result_t *r,
                                       int rank,
                                       const void **buf,
                                       size_t *len)
{
    const struct entry *e = find (r, rank);

    if (!e || !e->has_ret)
        return ELASTIC_ERR_NOT_FOUND;
    if (buf)
        *buf = e->ret;
    if (len)
        *len = e->retlen;
    return ELASTIC_OK;
}

int elastic_agent_result_failure (const elastic_agent_result_t *r,
                                  int rank,
                                  struct elastic_agent_failure *f)
{
    const struct entry *e = find (r, rank);

    if (!e || !e->failed)
        return ELASTIC_ERR_NOT_FOUND;
    if (f) {
        f->rank = e->rank;
        f->local_rank = e->local_rank;
        f->pid = e->pid;
        f->exitcode = e->exitcode;
        f->signal = e->signum;
        f->message = e->message ? e->message : "";
        f->timestamp = e->timestamp;
        f->error_file = e->error_file ? e->error_file : "";
    }
    return ELASTIC_OK;
}

/* Earlier failure first: whole seconds (torchelastic's resolution), then
 * the order the agent saw them in. */
static int earlier (const struct entry *a, const struct entry *b)
{
    long long ta = (long long)a->timestamp, tb = (long long)b->timestamp;

    if (ta != tb)
        return ta < tb;
    return a->seq < b->seq;
}

int elastic_agent_result_failures (const elastic_agent_result_t *r, int *root_rank)
{
    const struct entry *root = NULL, *lost_root = NULL;
    int n = 0;

    /* the root cause failed the group; ranks lost in place did not, unless
     * nothing else failed */
    for (int i = 0; r && i < r->n; i++) {
        if (!r->e[i].failed)
            continue;
        n++;
        if (r->e[i].lost) {
            if (!lost_root || earlier (&r->e[i], lost_root))
                lost_root = &r->e[i];
        } else if (!root || earlier (&r->e[i], root))
            root = &r->e[i];
    }
    if (!root)
        root = lost_root;
    if (root_rank)
        *root_rank = root ? root->rank : -1;
    return n;
}

static void append (char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
static void append (char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!*buf)
        return;
    for (;;) {
        va_start (ap, fmt);
        n = vsnprintf (*buf + *len, *cap - *len, fmt, ap);
        va_end (ap);
        if (n < 0)
            return;
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        char *p = realloc (*buf, *cap * 2 + (size_t)n);
        if (!p) {
            free (*buf);
            *buf = NULL;
            return;
        }
        *buf = p;
        *cap = *cap * 2 + (size_t)n;
    }
}

static void append_entry (
    char **buf, size_t *len, size_t *cap, const char *host, int i, const struct entry *e)
{
    char when[64];

    format_iso_time (e->timestamp, when, sizeof (when));
    append (buf, len, cap, "[%d]:\n", i);
    append (buf, len, cap, "  time      : %s\n", when);
    append (buf, len, cap, "  host      : %s\n", host);
    append (buf, len, cap, "  rank      : %d (local_rank: %d)\n", e->rank, e->local_rank);
    append (buf, len, cap, "  exitcode  : %d (pid: %d)\n", e->exitcode, (int)e->pid);
    if (e->signum > 0)
        append (buf, len, cap, "  signal    : %s\n", signal_name (e->signum));
    append (buf, len, cap, "  error_file: %s\n", e->error_file ? e->error_file : "<N/A>");
    append (buf, len, cap, "  message   : %s\n", e->message ? e->message : "<N/A>");
    if (e->traceback) {
        append (buf, len, cap, "  traceback :\n");
        const char *p = e->traceback;
        while (*p) {
            size_t l = strcspn (p, "\n");
            append (buf, len, cap, "    %.*s\n", (int)l, p);
            p += l;
            if (*p == '\n')
                p++;
        }
    }
}

int elastic_agent_result_report (const elastic_agent_result_t *r, int fd)
{
    static const char *rule =
        "============================================================\n";
    static const char *sep =
        "------------------------------------------------------------\n";
    size_t len = 0, cap = 4096;
    char *buf;
    int root_rank, n, k = 1, rc;

    if (!r)
        return ELASTIC_ERR_INVAL;
    if ((n = elastic_agent_result_failures (r, &root_rank)) == 0)
        return ELASTIC_OK;
    if (!(buf = malloc (cap)))
        return ELASTIC_ERR_NOMEM;
    append (&buf, &len, &cap, "%s", rule);
    append (&buf,
            &len,
            &cap,
            "worker group '%s' FAILED: %d failed rank%s, %d restart%s of %d allowed\n",
            r->role,
            n,
            n == 1 ? "" : "s",
            r->restarts,
            r->restarts == 1 ? "" : "s",
            r->max_restarts);
    append (&buf, &len, &cap, "%s", sep);
    append (&buf, &len, &cap, "Root Cause (first observed failure):\n");
    append_entry (&buf, &len, &cap, r->host, 0, find (r, root_rank));
    if (n > 1) {
        const struct entry *done = find (r, root_rank);
        append (&buf, &len, &cap, "%s", sep);
        append (&buf, &len, &cap, "Other Failures (in the order they happened):\n");
        /* n is small: select the next earliest each time (the root cause,
         * listed above, may come after ranks lost in place) */
        const struct entry *prev = NULL;
        for (int j = 1; j < n; j++) {
            const struct entry *next = NULL;
            for (int i = 0; i < r->n; i++) {
                const struct entry *e = &r->e[i];
                if (!e->failed || e == done || (prev && !earlier (prev, e)))
                    continue;
                if (!next || earlier (e, next))
                    next = e;
            }
            if (!next)
                break;
            append_entry (&buf, &len, &cap, r->host, k++, next);
            prev = next;
        }
    }
    append (&buf, &len, &cap, "%s", rule);
    if (!buf)
        return ELASTIC_ERR_NOMEM;
    rc = write_all (fd, buf, len) < 0 ? ELASTIC_ERR_IO : ELASTIC_OK;
    free (buf);
    return rc;
}
