/* events.c - what the job's JSON-lines event log says happened */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/signame.h"
#include "elastic.h"
#include "events.h"

void events_init (struct events *ev)
{
    memset (ev, 0, sizeof (*ev));
    ev->first_exit = -1;
    report_init (&ev->failed);
}

void events_clear (struct events *ev)
{
    for (int i = 0; i < EVENTS_MAX_RANKS; i++) {
        free (ev->host_of[i]);
        ev->host_of[i] = NULL;
    }
}

static const char *skip_ws (const char *p)
{
    while (*p && isspace ((unsigned char)*p))
        p++;
    return p;
}

/* End of the JSON string starting at p ('"'), past the closing quote. */
static const char *skip_string (const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* End of the JSON value starting at p, or NULL if malformed. */
static const char *skip_value (const char *p)
{
    int depth = 0;

    p = skip_ws (p);
    if (*p == '"')
        return skip_string (p);
    if (*p != '{' && *p != '[') {
        const char *s = p;
        while (*p && !strchr (",}] \t\r\n", *p))
            p++;
        return p > s ? p : NULL;
    }
    for (; *p; p++) {
        if (*p == '"') {
            if (!(p = skip_string (p)))
                return NULL;
            p--;
        } else if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']') {
            if (--depth == 0)
                return p + 1;
        }
    }
    return NULL;
}

const char *json_find (const char *obj, const char *key, size_t *len)
{
    const char *p = skip_ws (obj);
    size_t klen = strlen (key);

    if (*p != '{')
        return NULL;
    p = skip_ws (p + 1);
    while (*p == '"') {
        const char *kstart = p + 1, *kend = skip_string (p), *v, *vend;
        if (!kend)
            return NULL;
        p = skip_ws (kend);
        if (*p != ':')
            return NULL;
        v = skip_ws (p + 1);
        if (!(vend = skip_value (v)))
            return NULL;
        if ((size_t)(kend - 1 - kstart) == klen && memcmp (kstart, key, klen) == 0) {
            if (len)
                *len = (size_t)(vend - v);
            return v;
        }
        p = skip_ws (vend);
        if (*p == ',')
            p = skip_ws (p + 1);
        else
            break;
    }
    return NULL;
}

int json_string (const char *val, size_t len, char *buf, size_t size)
{
    size_t n = 0;

    if (!val || len < 2 || val[0] != '"' || !size)
        return -1;
    for (size_t i = 1; i + 1 < len && n + 1 < size; i++) {
        char c = val[i];
        if (c == '\\' && i + 2 < len) {
            c = val[++i];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
            if (c == 'u') {
                i += 4;
                c = '?';
            }
        }
        buf[n++] = c;
    }
    buf[n] = '\0';
    return 0;
}

static int get_str (const char *obj, const char *key, char *buf, size_t size)
{
    size_t len;
    const char *v = json_find (obj, key, &len);

    return v ? json_string (v, len, buf, size) : -1;
}

static int get_num (const char *obj, const char *key, double *out)
{
    size_t len;
    const char *v = json_find (obj, key, &len);
    char *end;

    if (!v)
        return -1;
    *out = strtod (v, &end);
    return end == v ? -1 : 0;
}

/* An integer field in [min, max]: -1 when absent, not a number or out of
 * range (a double outside the target type must not be converted). */
static int
get_int (const char *obj, const char *key, double min, double max, long long *out)
{
    double x;

    if (get_num (obj, key, &x) < 0 || !(x >= min && x <= max))
        return -1;
    *out = (long long)x;
    return 0;
}

/* Parse an array of integers; returns how many (up to max), or -1. */
static int get_ints (const char *obj, const char *key, int *out, int max)
{
    size_t len;
    const char *v = json_find (obj, key, &len), *end;
    int n = 0;

    if (!v || *v != '[')
        return -1;
    end = v + len;
    for (const char *p = v + 1; p < end;) {
        char *e;
        long x;
        p = skip_ws (p);
        if (*p == ']')
            break;
        x = strtol (p, &e, 10);
        if (e == p)
            return -1;
        if (n < max && x >= 0 && x <= INT_MAX) /* ranks; others are skipped */
            out[n++] = (int)x;
        p = skip_ws (e);
        if (*p == ',')
            p++;
    }
    return n;
}

/* The signal of a worker_exit event: a name as signal_name writes it
 * ("SIGKILL", "SIG70"), "KILL", or a number; 0 when not a signal. */
static int signal_number (const char *name)
{
    int sig;

    if (strncasecmp (name, "SIG", 3) == 0 && isdigit ((unsigned char)name[3]))
        name += 3;
    sig = signal_parse (name);
    return sig > 0 ? sig : 0;
}

static void parse_reshard (struct events *ev, const char *line, const char *name)
{
    struct reshard r;
    double x;
    long long v;
    int failed[256], nf;

    memset (&r, 0, sizeof (r));
    snprintf (r.kind, sizeof (r.kind), "%s", name);
    r.step = get_int (line, "step", 0, 9e18, &v) == 0 ? v : -1;
    r.old_size = get_int (line, "old_size", 0, INT_MAX, &v) == 0 ? (int)v : -1;
    r.new_size = get_int (line, "new_size", 0, INT_MAX, &v) == 0 ? (int)v : -1;
    r.total_ms = get_num (line, "t_total_ms", &x) == 0 ? x : -1;
    nf = get_ints (line, "failed", failed, 256);
    r.nfailed = nf > 0 ? nf : 0;
    /* one line per event is the contract; a second writer is tolerated */
    for (int i = 0; i < ev->nreshard && i < EVENTS_MAX_RESHARDS; i++) {
        const struct reshard *o = &ev->r[i];
        if (strcmp (o->kind, r.kind) == 0 && o->step == r.step &&
            o->old_size == r.old_size && o->new_size == r.new_size)
            return;
    }
    if (ev->nreshard < EVENTS_MAX_RESHARDS)
        ev->r[ev->nreshard] = r;
    ev->nreshard++;
    if (strcmp (name, "reshard_down") == 0)
        ev->nreshard_down++;
    if (strcmp (name, "reshard_up") == 0)
        ev->nreshard_up++;
    if (r.total_ms > 0) {
        ev->reshard_ms += r.total_ms;
        if (strcmp (name, "reshard_up") == 0)
            ev->reshard_up_ms += r.total_ms;
    }
    for (int i = 0; i < nf && i < 256; i++) {
        struct failure f = {.kind = FAIL_EVENT, .rank = failed[i]};
        report_add (&ev->failed, &f);
        if (failed[i] >= 0 && failed[i] < EVENTS_MAX_RANKS)
            ev->recovered[failed[i]] = 1;
    }
}

/* rank_loaded, rank_initialized: a rank's MPI_Init as libelastic saw it.
 * A state is never downgraded (a process that the rank started, linked
 * with libelastic, inherits its environment and says "loaded" again). */
static void parse_init (struct events *ev, const char *line, int done)
{
    unsigned char want = done ? EVENTS_INIT_DONE : EVENTS_INIT_LOADED, *st;
    long long v;

    if (get_int (line, "rank", 0, EVENTS_MAX_RANKS - 1, &v) < 0)
        return;
    st = &ev->rank_init[v];
    if (*st >= want)
        return;
    if (*st == EVENTS_INIT_NONE)
        ev->ninit_loaded++; /* a rank_initialized alone implies it loaded */
    if (want == EVENTS_INIT_DONE)
        ev->ninit_done++;
    *st = want;
}

static void parse_line (struct events *ev, const char *line)
{
    char name[64], host[256], state[32], sig[32];
    double x, r;
    long long v;

    if (get_str (line, "event", name, sizeof (name)) < 0) {
        ev->bad_lines++;
        return;
    }
    ev->lines++;
    if (strncmp (name, "reshard", 7) == 0) {
        parse_reshard (ev, line, name);
    } else if (strcmp (name, "fatal") == 0 || strcmp (name, "recovery_timeout") == 0) {
        /* recovery_timeout: the library gave up a recovery that did not end
         * (ELASTIC_RECOVERY_TIMEOUT) and exits 76, as after a fatal error */
        int failed[256], nf = get_ints (line, "failed", failed, 256);
        if (ev->nfatal++ == 0)
            get_str (line, "error", ev->fatal, sizeof (ev->fatal));
        for (int i = 0; i < nf && i < 256; i++) {
            struct failure f = {.kind = FAIL_EVENT, .rank = failed[i]};
            report_add (&ev->failed, &f);
        }
    } else if (strcmp (name, "worker_start") == 0) {
        if (get_str (line, "host", host, sizeof (host)) == 0 &&
            get_num (line, "rank", &x) == 0 && x >= 0 && x < EVENTS_MAX_RANKS) {
            free (ev->host_of[(int)x]);
            ev->host_of[(int)x] = strdup (host);
        }
    } else if (strcmp (name, "worker_exit") == 0) {
        struct failure f = {.kind = FAIL_EVENT, .rank = -1};
        if (get_num (line, "exitcode", &x) == 0 && get_num (line, "rank", &r) == 0 &&
            r >= 0 && r < EVENTS_MAX_RANKS) {
            unsigned char *kind = &ev->rank_exit[(int)r];
            if (ev->first_exit < 0)
                ev->first_exit = (int)r;
            if (*kind != EVENTS_EXIT_NONE)
                ev->nexit[*kind]--; /* a second line for this rank */
            /* a rank its wrapper counted as finished (ended by a signal
             * after elastic_progress_end) exited as well as with 0 */
            if (get_str (line, "state", state, sizeof (state)) == 0 &&
                strcasecmp (state, "SUCCEEDED") == 0)
                x = 0;
            *kind = x == 0                        ? EVENTS_EXIT_ZERO
                    : x == ELASTIC_EXIT_SUSPENDED ? EVENTS_EXIT_SUSPENDED
                                                  : EVENTS_EXIT_OTHER;
            ev->nexit[*kind]++;
        }
        if (get_str (line, "state", state, sizeof (state)) < 0 ||
            strcasecmp (state, "FAILED") != 0)
            return;
        if (get_str (line, "signal", sig, sizeof (sig)) == 0)
            f.signal = signal_number (sig);
        else if (get_int (line, "signal", 1, INT_MAX, &v) == 0)
            f.signal = (int)v;
        else if (get_int (line, "exitcode", -INT_MAX, -1, &v) == 0)
            f.signal = (int)-v;
        if (f.signal <= 0)
            return; /* an exit code is the program's doing, not its host's */
        if (get_int (line, "rank", 0, INT_MAX, &v) == 0)
            f.rank = (int)v;
        if (get_str (line, "host", f.host, sizeof (f.host)) < 0)
            f.host[0] = '\0';
        report_add (&ev->failed, &f);
    } else if (strcmp (name, "rank_loaded") == 0) {
        parse_init (ev, line, 0);
    } else if (strcmp (name, "rank_initialized") == 0) {
        parse_init (ev, line, 1);
    } else if (strcmp (name, "suspended") == 0) {
        ev->nsuspended++;
    } else if (strcmp (name, "completed") == 0) {
        if (ev->ncompleted++ == 0) {
            ev->completed_step = get_int (line, "step", 0, 9e18, &v) == 0 ? v : -1;
            ev->completed_world =
                get_int (line, "world_size", 0, INT_MAX, &v) == 0 ? (int)v : -1;
        }
    } else if (strcmp (name, "suspend") == 0) {
        if (ev->nsuspend++ == 0) {
            ev->suspend_step = get_int (line, "step", 0, 9e18, &v) == 0 ? v : -1;
            if (get_str (line, "file", ev->suspend_file, sizeof (ev->suspend_file)) < 0)
                ev->suspend_file[0] = '\0'; /* null: the L3 write failed */
        }
    }
}

int events_parse (struct events *ev, const char *text)
{
    const char *p = text;
    int before = ev->lines;

    while (p && *p) {
        const char *eol = strchr (p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen (p);
        char *line;

        if (len > 0 && (line = strndup (p, len))) {
            if (*skip_ws (line))
                parse_line (ev, line);
            free (line);
        }
        p = eol ? eol + 1 : NULL;
    }
    return ev->lines - before;
}

int events_read_file (struct events *ev, const char *path, off_t from)
{
    char *buf = NULL;
    size_t used = 0, cap = 0;
    ssize_t n;
    int fd, rc;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    if (from > 0 && lseek (fd, from, SEEK_SET) < 0)
        goto error;
    for (;;) {
        if (used + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *p;
            if (ncap > (64u << 20))
                break; /* 64 MiB of events is plenty */
            if (!(p = realloc (buf, ncap)))
                goto error;
            buf = p;
            cap = ncap;
        }
        if ((n = read (fd, buf + used, cap - used - 1)) < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close (fd);
    if (!buf)
        return 0;
    buf[used] = '\0';
    rc = events_parse (ev, buf);
    free (buf);
    return rc;
error : {
    int saved = errno;
    close (fd);
    free (buf);
    errno = saved;
    return -1;
}
}

int events_resolve_hosts (struct events *ev)
{
    int filled = 0;

    for (int i = 0; i < ev->failed.n; i++) {
        struct failure *f = &ev->failed.f[i];
        if (!f->host[0] && f->rank >= 0 && f->rank < EVENTS_MAX_RANKS &&
            ev->host_of[f->rank]) {
            snprintf (f->host, sizeof (f->host), "%s", ev->host_of[f->rank]);
            filled++;
        }
    }
    return filled;
}

int events_suspended (const struct events *ev, int np, char *why, size_t size)
{
    if (ev->nsuspend && ev->suspend_file[0]) {
        snprintf (why,
                  size,
                  "the ranks suspended at step %lld to %s",
                  ev->suspend_step,
                  ev->suspend_file);
        return 1;
    }
    if (np > 0 && ev->nexit[EVENTS_EXIT_SUSPENDED] > 0 &&
        ev->nexit[EVENTS_EXIT_OTHER] == 0 &&
        ev->nexit[EVENTS_EXIT_SUSPENDED] + ev->nexit[EVENTS_EXIT_ZERO] >= np) {
        snprintf (why,
                  size,
                  "all %d ranks exited, %d of them %d (suspended) and the others 0",
                  np,
                  ev->nexit[EVENTS_EXIT_SUSPENDED],
                  ELASTIC_EXIT_SUSPENDED);
        return 1;
    }
    return 0;
}
