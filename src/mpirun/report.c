/* report.c - what mpirun's exit report says about failed processes */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void report_init (struct report *r)
{
    memset (r, 0, sizeof (*r));
}

int failure_host_is_bad (enum failure_kind kind)
{
    return kind == FAIL_SIGNAL || kind == FAIL_NODE_LOST || kind == FAIL_LAUNCH_HOST ||
           kind == FAIL_EVENT;
}

int report_add (struct report *r, const struct failure *f)
{
    for (int i = 0; i < r->n; i++) {
        struct failure *o = &r->f[i];
        int same_host = strcmp (o->host, f->host) == 0;
        if (f->rank >= 0 && o->rank == f->rank &&
            (same_host || !o->host[0] || !f->host[0])) {
            /* one rank, several witnesses: keep the most telling account */
            if (!o->host[0] && f->host[0])
                snprintf (o->host, sizeof (o->host), "%s", f->host);
            if (o->signal == 0 && f->signal > 0) {
                o->signal = f->signal;
                if (o->kind == FAIL_EXIT || o->kind == FAIL_NOSYNC)
                    o->kind = f->kind;
            }
            return 0;
        }
        if (f->rank < 0 && o->rank < 0 && o->kind == f->kind && same_host)
            return 0;
    }
    if (r->n >= REPORT_MAX_FAILURES) {
        r->dropped++;
        return 0;
    }
    r->f[r->n++] = *f;
    return 1;
}

/* A line of at least 10 dashes (Open MPI's help-block delimiter). */
static int dashes (const char *s)
{
    int n = 0;

    while (*s == '-') {
        s++;
        n++;
    }
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return n >= 10 && *s == '\0';
}

/* Copy a host name token, dropping trailing punctuation. */
static void take_host (char *dst, size_t size, const char *src)
{
    size_t n = 0;

    while (src[n] && !isspace ((unsigned char)src[n]) && n + 1 < size)
        n++;
    memcpy (dst, src, n);
    dst[n] = '\0';
    while (n > 0 && strchr (".,;:)", dst[n - 1]))
        dst[--n] = '\0';
}

/* "[prterun-vm-27616@1,1]" or "[[41394,1],1]": the number after the last
 * comma before the closing bracket. */
static int rank_of_name (const char *s)
{
    const char *end, *comma = NULL;

    while (*s == ' ')
        s++;
    end = strchr (s, ' ');

    if (!end)
        end = s + strlen (s);
    for (const char *p = s; p < end; p++)
        if (*p == ',')
            comma = p;
    return comma ? atoi (comma + 1) : -1;
}

static int add (struct report *r,
                enum failure_kind kind,
                int rank,
                const char *host,
                int sig,
                int code)
{
    struct failure f;

    memset (&f, 0, sizeof (f));
    f.kind = kind;
    f.rank = rank;
    f.signal = sig;
    f.code = code;
    if (host)
        take_host (f.host, sizeof (f.host), host);
    return report_add (r, &f);
}

int report_parse_block (struct report *r, const char *text)
{
    const char *p;
    int found = 0;
    unsigned long rank, pid;
    int sig, code;
    char host[256];

    /* "... noticed that process rank R with PID P on node H exited on signal S" */
    for (p = text; (p = strstr (p, "noticed that process rank ")); p++) {
        if (sscanf (p,
                    "noticed that process rank %lu with PID %lu on node %255s exited on "
                    "signal %d",
                    &rank,
                    &pid,
                    host,
                    &sig) == 4)
            found += add (r, FAIL_SIGNAL, (int)rank, host, sig, 0);
    }
    /* "... has exited due to process rank R with PID P on node H calling "abort"" /
     * "... exiting improperly" */
    for (p = text; (p = strstr (p, "has exited due to process rank ")); p++) {
        if (sscanf (p,
                    "has exited due to process rank %lu with PID %lu on node %255s",
                    &rank,
                    &pid,
                    host) == 3) {
            const char *tail = strstr (p, host) + strlen (host);
            enum failure_kind k =
                strncmp (tail, " calling", 8) == 0 ? FAIL_ABORT : FAIL_NOSYNC;
            found += add (r, k, (int)rank, host, 0, 0);
        }
    }
    /* "... lost communication with a remote daemon. HNP daemon : [..] on node A
     *  Remote daemon: [..] on node B" */
    if (strstr (text, "lost communication with a remote daemon") &&
        (p = strstr (text, "Remote daemon:")) && (p = strstr (p, " on node ")))
        found += add (r, FAIL_NODE_LOST, -1, p + 9, 0, 0);
    /* "... exited with non-zero status ... Process name: [..,R] Exit code: C" */
    if (strstr (text, "non-zero status") && (p = strstr (text, "Process name:"))) {
        const char *c = strstr (p, "Exit code:");
        if (c && sscanf (c, "Exit code: %d", &code) == 1)
            found += add (r, FAIL_EXIT, rank_of_name (p + 13), NULL, 0, code);
    }
    /* "... unable to start the specified application as it encountered an
     *  error on node H" */
    if ((p = strstr (text, "encountered an error on node ")))
        found += add (r, FAIL_LAUNCH_HOST, -1, p + 29, 0, 0);
    /* "... could not access or execute an executable: Executable: X Node: H" */
    if (strstr (text, "could not access or execute an executable") ||
        strstr (text, "could not find an executable"))
        found += add (r, FAIL_NO_EXEC, -1, NULL, 0, 0);
    if (strstr (text, "not enough slots available"))
        found += add (r, FAIL_NO_SLOTS, -1, NULL, 0, 0);
    if (found) {
        size_t used = strlen (r->text);
        if (used + 2 < sizeof (r->text))
            snprintf (
                r->text + used, sizeof (r->text) - used, "%s%s", used ? "\n" : "", text);
    }
    return found;
}

int report_feed_line (struct report *r, const char *line)
{
    char clean[2048];
    size_t n = 0;
    int found = 0;

    /* strip the newline and trailing blanks */
    while (line[n] && line[n] != '\n' && n + 1 < sizeof (clean)) {
        clean[n] = line[n];
        n++;
    }
    while (n > 0 && isspace ((unsigned char)clean[n - 1]))
        n--;
    clean[n] = '\0';

    if (dashes (clean)) {
        if (r->in_block)
            found = report_finish (r);
        else {
            r->in_block = 1;
            r->blen = 0;
            r->block[0] = '\0';
        }
        return found;
    }
    if (!r->in_block)
        return report_parse_block (r, clean);
    /* join: one space between lines, runs of blanks collapsed */
    const char *s = clean;
    while (*s && r->blen + 2 < sizeof (r->block)) {
        if (isspace ((unsigned char)*s)) {
            while (isspace ((unsigned char)*s))
                s++;
            if (r->blen > 0 && r->block[r->blen - 1] != ' ')
                r->block[r->blen++] = ' ';
            continue;
        }
        r->block[r->blen++] = *s++;
    }
    if (r->blen > 0 && r->block[r->blen - 1] != ' ' && r->blen + 1 < sizeof (r->block))
        r->block[r->blen++] = ' ';
    r->block[r->blen] = '\0';
    return 0;
}

int report_finish (struct report *r)
{
    int found = 0;

    if (r->in_block) {
        while (r->blen > 0 && r->block[r->blen - 1] == ' ')
            r->block[--r->blen] = '\0';
        found = report_parse_block (r, r->block);
        r->in_block = 0;
        r->blen = 0;
        r->block[0] = '\0';
    }
    return found;
}

void failure_describe (const struct failure *f, char *buf, size_t size)
{
    char who[320];

    if (f->rank >= 0 && f->host[0])
        snprintf (who, sizeof (who), "rank %d on %s", f->rank, f->host);
    else if (f->rank >= 0)
        snprintf (who, sizeof (who), "rank %d", f->rank);
    else if (f->host[0])
        snprintf (who, sizeof (who), "host %s", f->host);
    else
        snprintf (who, sizeof (who), "the job");
    switch (f->kind) {
        case FAIL_SIGNAL:
        case FAIL_EVENT:
            if (f->signal > 0)
                snprintf (buf,
                          size,
                          "%s killed by signal %d (%s)",
                          who,
                          f->signal,
                          strsignal (f->signal));
            else
                snprintf (buf, size, "%s: process failed", who);
            break;
        case FAIL_EXIT:
            snprintf (buf, size, "%s exited with code %d", who, f->code);
            break;
        case FAIL_ABORT:
            snprintf (buf, size, "%s called MPI_Abort", who);
            break;
        case FAIL_NOSYNC:
            snprintf (buf, size, "%s exited without finalizing", who);
            break;
        case FAIL_NODE_LOST:
            snprintf (buf, size, "%s lost (its daemon stopped answering)", who);
            break;
        case FAIL_LAUNCH_HOST:
            snprintf (buf, size, "launch failed on %s", f->host[0] ? f->host : "a host");
            break;
        case FAIL_NO_EXEC:
            snprintf (buf, size, "mpirun could not start the executable");
            break;
        case FAIL_NO_SLOTS:
            snprintf (buf, size, "not enough slots for the requested ranks");
            break;
    }
}
