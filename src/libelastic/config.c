/* config.c - the manager's configuration: defaults, environment, validation
 *
 * Each integer field has one row in the table below: its name, its
 * ELASTIC_* variable, and the accepted range, so that every message names
 * the field (or variable), the value and what is accepted.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elastic.h>

struct int_field {
    const char *name;
    const char *env;
    size_t offset;
    long min;
    long max;
};

#define FIELD(f, env, min, max)                                                          \
    {                                                                                    \
#f, env, offsetof(elastic_config_t, f), min, max                                 \
    }

static const struct int_field int_fields[] = {
    FIELD (snapshot_period, "ELASTIC_SNAPSHOT_PERIOD", 1, INT_MAX),
    FIELD (snapshot_buffer_size, "ELASTIC_SNAPSHOT_BUFFER_SIZE", 2, 1024),
    FIELD (persist_period, "ELASTIC_PERSIST_PERIOD", 0, INT_MAX),
    FIELD (reshard_check_period, "ELASTIC_RESHARD_CHECK_PERIOD", 1, INT_MAX),
    FIELD (
        max_elastic_down_event_count, "ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT", 0, INT_MAX),
    FIELD (max_reshard_retry_count, "ELASTIC_MAX_RESHARD_RETRY_COUNT", 0, INT_MAX),
    FIELD (min_world_size, "ELASTIC_MIN_WORLD_SIZE", 1, INT_MAX),
    FIELD (spare_ranks, "ELASTIC_SPARE_RANKS", 0, INT_MAX),
    FIELD (spare_takeover, "ELASTIC_SPARE_TAKEOVER", 0, 1),
};

#define NFIELDS (sizeof (int_fields) / sizeof (int_fields[0]))

static int *field_ptr (elastic_config_t *cfg, const struct int_field *f)
{
    return (int *)((char *)cfg + f->offset);
}

static int field_get (const elastic_config_t *cfg, const struct int_field *f)
{
    return *(const int *)((const char *)cfg + f->offset);
}

static void expected (const struct int_field *f, char *buf, size_t size)
{
    if (f->min == 0 && f->max == 1)
        snprintf (buf, size, "0 or 1");
    else if (f->max == INT_MAX)
        snprintf (buf, size, "an integer >= %ld", f->min);
    else
        snprintf (buf, size, "an integer from %ld to %ld", f->min, f->max);
}

static int errset (elastic_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static int errset (elastic_error_t *err, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        va_start (ap, fmt);
        vsnprintf (err->text, sizeof (err->text), fmt, ap);
        va_end (ap);
    }
    return ELASTIC_ERR_INVAL;
}

void elastic_config_init (elastic_config_t *cfg)
{
    if (!cfg)
        return;
    memset (cfg, 0, sizeof (*cfg));
    cfg->snapshot_period = 10;
    cfg->snapshot_buffer_size = 2;
    cfg->persist_period = 0;
    cfg->reshard_check_period = 10;
    cfg->max_elastic_down_event_count = 16;
    cfg->max_reshard_retry_count = 3;
    cfg->min_world_size = 1;
    cfg->spare_ranks = 0;
    cfg->spare_takeover = 1;
    cfg->snapshot_dir = ".";
    cfg->event_log = NULL;
}

int elastic_config_from_env (elastic_config_t *cfg, elastic_error_t *err)
{
    const char *s;
    char want[64], *end;
    long v;

    if (!cfg)
        return errset (err, "elastic_config_from_env: cfg is NULL");
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct int_field *f = &int_fields[i];
        if (!(s = getenv (f->env)))
            continue;
        expected (f, want, sizeof (want));
        errno = 0;
        v = strtol (s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0)
            return errset (err, "%s: '%s' is invalid (expected %s)", f->env, s, want);
        if (v < f->min || v > f->max)
            return errset (err, "%s: %ld is invalid (expected %s)", f->env, v, want);
        *field_ptr (cfg, f) = (int)v;
    }
    if ((s = getenv ("ELASTIC_SNAPSHOT_DIR"))) {
        if (*s == '\0')
            return errset (
                err, "ELASTIC_SNAPSHOT_DIR: '' is invalid (expected a directory path)");
        cfg->snapshot_dir = s;
    }
    if ((s = getenv ("ELASTIC_EVENT_LOG")))
        cfg->event_log = *s ? s : NULL;
    return ELASTIC_OK;
}

int elastic_config_validate (const elastic_config_t *cfg,
                             int comm_size,
                             elastic_error_t *err)
{
    char want[64];

    if (!cfg)
        return errset (err, "elastic_config_validate: cfg is NULL");
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct int_field *f = &int_fields[i];
        int v = field_get (cfg, f);
        if (v < f->min || v > f->max) {
            expected (f, want, sizeof (want));
            return errset (err, "%s: %d is invalid (expected %s)", f->name, v, want);
        }
    }
    if (!cfg->snapshot_dir || cfg->snapshot_dir[0] == '\0')
        return errset (err, "snapshot_dir: '' is invalid (expected a directory path)");
    if (strlen (cfg->snapshot_dir) >= 4096)
        return errset (err,
                       "snapshot_dir: a %zu-byte path is invalid (expected < 4096 bytes)",
                       strlen (cfg->snapshot_dir));
    if (cfg->event_log && strlen (cfg->event_log) >= 4096)
        return errset (err,
                       "event_log: a %zu-byte path is invalid (expected < 4096 bytes)",
                       strlen (cfg->event_log));
    if (comm_size > 0) {
        if (cfg->spare_ranks > comm_size - 1)
            return errset (
                err,
                "spare_ranks: %d is invalid (expected an integer from 0 to %d: "
                "at least one of the %d ranks must work)",
                cfg->spare_ranks,
                comm_size - 1,
                comm_size);
        if (cfg->min_world_size > comm_size - cfg->spare_ranks)
            return errset (
                err,
                "min_world_size: %d is invalid (expected an integer from 1 to %d, "
                "the working size: %d ranks less %d spares)",
                cfg->min_world_size,
                comm_size - cfg->spare_ranks,
                comm_size,
                cfg->spare_ranks);
    }
    return ELASTIC_OK;
}
