/* event.c - one JSON line per world change or final error */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/heartbeat.h"
#include "common/json.h"
#include "event.h"
#include "log.h"
#include "manager.h"

struct sbuf {
    char *p;
    size_t size, len;
    int overflow;
};

static void put (struct sbuf *b, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void put (struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->overflow)
        return;
    va_start (ap, fmt);
    n = vsnprintf (b->p + b->len, b->size - b->len, fmt, ap);
    va_end (ap);
    if (n < 0 || (size_t)n >= b->size - b->len)
        b->overflow = 1;
    else
        b->len += n;
}

/* s as a JSON string literal (common/json.h). */
static void put_string (struct sbuf *b, const char *s)
{
    size_t n;

    if (b->overflow)
        return;
    n = json_quote (b->p + b->len, b->size - b->len, s);
    if (n >= b->size - b->len)
        b->overflow = 1;
    else
        b->len += n;
}

static void put_ints (struct sbuf *b, const char *key, const int *v, int n)
{
    put (b, ",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        put (b, "%s%d", i ? "," : "", v[i]);
    put (b, "]");
}

static void put_ms (struct sbuf *b, const char *key, double seconds)
{
    put (b, ",\"%s\":%.3f", key, seconds * 1e3);
}

int event_format (const struct event_rec *e, char *buf, size_t size)
{
    struct sbuf b = {buf, size, 0, 0};
    struct timeval tv;
    struct tm tm;
    char when[64];

    put (&b, "{\"event\":");
    put_string (&b, e->kind);
    put (&b,
         ",\"step\":%lld,\"old_size\":%d,\"new_size\":%d",
         (long long)e->step,
         e->old_size,
         e->new_size);
    put_ints (&b, "failed", e->failed, e->nfailed);
    put_ints (&b, "spares_used", e->used, e->nused);
    if (e->nspawned > 0) {
        put_ints (&b, "new_ranks", e->spawned, e->nspawned);
        put_ms (&b, "t_snapshot_ms", e->t_snapshot);
        if (e->rewound > 0) {
            put (&b, ",\"rewound_steps\":%lld", (long long)e->rewound);
            put_ms (&b, "t_rewind_ms", e->t_rewind);
        }
        put_ms (&b, "t_spawn_ms", e->t_spawn);
        put_ms (&b, "t_merge_ms", e->t_merge);
    }
    put (&b, ",\"attempts\":%d,\"handler_tries\":%d", e->attempts, e->handler_tries);
    put_ms (&b, "t_detect_ms", e->t_detect);
    put_ms (&b, "t_revoke_agree_ms", e->t_revoke_agree);
    put_ms (&b, "t_shrink_ms", e->t_shrink);
    put_ms (&b, "t_restore_ms", e->t_restore);
    put_ms (&b, "t_handler_ms", e->t_handler);
    put_ms (&b, "t_protect_ms", e->t_protect);
    if (e->protect_deferred)
        put (&b, ",\"protect_deferred\":true");
    put_ms (&b, "t_total_ms", e->t_total);
    if (e->error) {
        put (&b, ",\"error\":");
        put_string (&b, e->error);
    }
    put (&b, ",\"rank\":%d", e->rank);
    gettimeofday (&tv, NULL);
    gmtime_r (&tv.tv_sec, &tm);
    strftime (when, sizeof (when), "%Y-%m-%dT%H:%M:%S", &tm);
    put (&b, ",\"time\":\"%s.%03dZ\"}", when, (int)(tv.tv_usec / 1000));
    return b.overflow ? -1 : (int)b.len;
}

static void put_time (struct sbuf *b)
{
    struct timeval tv;
    struct tm tm;
    char when[64];

    gettimeofday (&tv, NULL);
    gmtime_r (&tv.tv_sec, &tm);
    strftime (when, sizeof (when), "%Y-%m-%dT%H:%M:%S", &tm);
    put (b, ",\"time\":\"%s.%03dZ\"}", when, (int)(tv.tv_usec / 1000));
}

int event_format_l3 (const struct l3_event_rec *e, char *buf, size_t size)
{
    struct sbuf b = {buf, size, 0, 0};
    int resume = !strcmp (e->kind, "resume");

    put (&b, "{\"event\":");
    put_string (&b, e->kind);
    put (&b, ",\"step\":%lld", (long long)e->step);
    if (resume)
        put (&b, ",\"old_size\":%d,\"new_size\":%d", e->old_size, e->new_size);
    else
        put (&b, ",\"world_size\":%d", e->world_size);
    if (!strcmp (e->kind, "persist")) {
        put (&b, ",\"bytes\":%lld", (long long)e->bytes);
        put_ms (&b, "t_write_ms", e->t);
    }
    if (resume)
        put_ms (&b, "t_restore_ms", e->t);
    if (e->reason) {
        put (&b, ",\"reason\":");
        put_string (&b, e->reason);
    }
    if (strcmp (e->kind, "persist_failed") != 0 && strcmp (e->kind, "completed") != 0) {
        put (&b, ",\"file\":");
        if (e->file)
            put_string (&b, e->file);
        else
            put (&b, "null");
    }
    if (e->error) {
        put (&b, ",\"error\":");
        put_string (&b, e->error);
    }
    put (&b, ",\"rank\":%d", e->rank);
    put_time (&b);
    return b.overflow ? -1 : (int)b.len;
}

void event_append (struct elastic_manager *m, char *line, int n)
{
    int fd;

    if (!m->event_log)
        return;
    line[n] = '\n';
    if ((fd = open (m->event_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0 ||
        write (fd, line, n + 1) != n + 1)
        el_log (EL_WARN, "event log %s: %s", m->event_log, strerror (errno));
    if (fd >= 0)
        close (fd);
    line[n] = '\0';
}

/* Log, append to the event log, pass to the callback. */
static void emit_line (struct elastic_manager *m, char *line, int n, int write_file)
{
    el_log (EL_INFO, "event: %s", line);
    if (write_file)
        event_append (m, line, n);
    if (m->event_cb)
        m->event_cb (line, m->event_arg);
}

/* The world change for the supervisor's /metrics (heartbeat version 4). */
static void tell_supervisor (const struct event_rec *e)
{
    double ph[ELASTIC_HEARTBEAT_NPHASES] = {0};
    uint32_t kind = !strcmp (e->kind, "reshard_down") ? ELASTIC_HEARTBEAT_CHANGE_DOWN
                    : !strcmp (e->kind, "reshard_up") ? ELASTIC_HEARTBEAT_CHANGE_UP
                    : !strcmp (e->kind, "grow_failed")
                        ? ELASTIC_HEARTBEAT_CHANGE_GROW_FAILED
                        : 0;

    if (!kind)
        return;
    ph[ELASTIC_HEARTBEAT_PHASE_DETECT] = e->t_detect;
    ph[ELASTIC_HEARTBEAT_PHASE_SHRINK] = e->t_revoke_agree + e->t_shrink;
    if (e->nspawned > 0) {
        ph[ELASTIC_HEARTBEAT_PHASE_SNAPSHOT] = e->t_snapshot;
        ph[ELASTIC_HEARTBEAT_PHASE_REWIND] = e->rewound > 0 ? e->t_rewind : 0;
        ph[ELASTIC_HEARTBEAT_PHASE_SPAWN] = e->t_spawn;
        ph[ELASTIC_HEARTBEAT_PHASE_MERGE] = e->t_merge;
    }
    ph[ELASTIC_HEARTBEAT_PHASE_RESTORE] = e->t_restore;
    ph[ELASTIC_HEARTBEAT_PHASE_HANDLER] = e->t_handler;
    ph[ELASTIC_HEARTBEAT_PHASE_PROTECT] = e->t_protect;
    ph[ELASTIC_HEARTBEAT_PHASE_TOTAL] = e->t_total;
    heartbeat_world_change (
        kind, e->step, e->old_size, e->new_size, e->nspawned > 0 ? e->nspawned : 0, ph);
}

void event_emit (struct elastic_manager *m, const struct event_rec *e, int write_file)
{
    char line[8192];
    int n = event_format (e, line, sizeof (line) - 1);

    tell_supervisor (e);

    if (n < 0) {
        /* too many failed ranks to list: keep the line valid JSON */
        struct event_rec short_e = *e;
        short_e.nfailed = e->nfailed > 64 ? 64 : e->nfailed;
        short_e.nused = e->nused > 64 ? 64 : e->nused;
        short_e.nspawned = e->nspawned > 64 ? 64 : e->nspawned;
        short_e.error = e->error ? "(message too long)" : NULL;
        if ((n = event_format (&short_e, line, sizeof (line) - 1)) < 0)
            return;
    }
    emit_line (m, line, n, write_file);
}

void event_emit_l3 (struct elastic_manager *m,
                    const struct l3_event_rec *e,
                    int write_file)
{
    char line[8192];
    int n = event_format_l3 (e, line, sizeof (line) - 1);

    if (n < 0) {
        struct l3_event_rec short_e = *e;
        short_e.error = e->error ? "(message too long)" : NULL;
        short_e.file = e->file ? "(path too long)" : NULL;
        if ((n = event_format_l3 (&short_e, line, sizeof (line) - 1)) < 0)
            return;
    }
    emit_line (m, line, n, write_file);
}
