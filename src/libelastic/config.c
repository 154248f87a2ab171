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
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elastic.h>

#include "common/error.h"
#include "common/signame.h"
#include "config_int.h"

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
    FIELD (snapshot_keep, "ELASTIC_SNAPSHOT_KEEP", 0, INT_MAX),
    FIELD (resume_fresh_ok, "ELASTIC_RESUME_FRESH_OK", 0, 2),
    FIELD (signal_check_period, "ELASTIC_SIGNAL_CHECK_PERIOD", 0, INT_MAX),
    FIELD (deadline_margin, "ELASTIC_DEADLINE_MARGIN", 0, INT_MAX),
    FIELD (diff_threshold_kib, "ELASTIC_DIFF_THRESHOLD_KIB", 0, INT_MAX),
    FIELD (diff_block_kib, "ELASTIC_DIFF_BLOCK_KIB", 1, 1048576),
    FIELD (persist_background, "ELASTIC_PERSIST_BACKGROUND", 0, 2),
    FIELD (max_world_size, "ELASTIC_MAX_WORLD_SIZE", 0, INT_MAX),
    FIELD (grow_min_batch, "ELASTIC_GROW_MIN_BATCH", 1, INT_MAX),
    FIELD (grow_eager_snapshots, "ELASTIC_GROW_EAGER_SNAPSHOTS", 0, 1),
};

static const char *resume_names[] = {"auto", "always", "never"};
static const char *grow_names[] = {"at-once", "original", "never"};

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
    cfg->run_id = NULL;
    cfg->snapshot_keep = 3;
    cfg->resume = ELASTIC_RESUME_AUTO;
    cfg->resume_fresh_ok = 0;
    cfg->resume_from = NULL;
    cfg->signals = "TERM,USR1";
    cfg->signal_check_period = 0;
    cfg->deadline = 0;
    cfg->deadline_margin = 30;
    cfg->diff_threshold_kib = 0;
    cfg->diff_block_kib = 64;
    cfg->persist_background = 1;
    cfg->grow_policy = ELASTIC_GROW_AT_ONCE;
    cfg->max_world_size = 0;
    cfg->grow_min_batch = 1;
    cfg->grow_eager_snapshots = 0;
}

/* A string variable: unset leaves *field, empty is invalid unless
 * empty_ok (then NULL). */
static int env_string (const char *var,
                       const char *what,
                       int empty_ok,
                       const char **field,
                       elastic_error_t *err)
{
    const char *s = getenv (var);

    if (!s)
        return ELASTIC_OK;
    if (*s == '\0' && !empty_ok)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "%s: '' is invalid (expected %s)", var, what);
    *field = *s ? s : NULL;
    return ELASTIC_OK;
}

int elastic_config_from_env (elastic_config_t *cfg, elastic_error_t *err)
{
    const char *s;
    char want[64], *end;
    long v;

    if (!cfg)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_config_from_env: cfg is NULL");
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct int_field *f = &int_fields[i];
        if (!(s = getenv (f->env)))
            continue;
        expected (f, want, sizeof (want));
        errno = 0;
        v = strtol (s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s: '%s' is invalid (expected %s)",
                             f->env,
                             s,
                             want);
        if (v < f->min || v > f->max)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s: %ld is invalid (expected %s)",
                             f->env,
                             v,
                             want);
        *field_ptr (cfg, f) = (int)v;
    }
    if ((s = getenv ("ELASTIC_SNAPSHOT_DIR"))) {
        if (*s == '\0')
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "ELASTIC_SNAPSHOT_DIR: '' is invalid (expected a directory path)");
        cfg->snapshot_dir = s;
    }
    if ((s = getenv ("ELASTIC_EVENT_LOG")))
        cfg->event_log = *s ? s : NULL;
    if (env_string ("ELASTIC_RUN_ID", "a run id", 0, &cfg->run_id, err) ||
        env_string ("ELASTIC_RESUME_FROM",
                    "an L3 snapshot file or directory",
                    1,
                    &cfg->resume_from,
                    err) ||
        env_string ("ELASTIC_SIGNALS",
                    "signal names such as TERM,USR1, or none",
                    0,
                    &cfg->signals,
                    err))
        return ELASTIC_ERR_INVAL;
    if (getenv ("ELASTIC_SIGNALS")) {
        int sigs[16], n;
        if (config_signals_parse ("ELASTIC_SIGNALS", cfg->signals, sigs, 16, &n, err) !=
            ELASTIC_OK)
            return ELASTIC_ERR_INVAL;
    }
    if (cfg->run_id && getenv ("ELASTIC_RUN_ID") && strlen (cfg->run_id) > 254)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "ELASTIC_RUN_ID: '%.40s...' is invalid (expected 1 to 254 bytes)",
            cfg->run_id);
    if ((s = getenv ("ELASTIC_RESUME_MODE"))) {
        int i;
        for (i = 0; i < 3 && strcmp (s, resume_names[i]) != 0; i++)
            ;
        if (i == 3)
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "ELASTIC_RESUME_MODE: '%s' is invalid (expected auto, always "
                "or never)",
                s);
        cfg->resume = i;
    }
    if ((s = getenv ("ELASTIC_GROW_POLICY"))) {
        int i;
        for (i = 0; i < 3 && strcmp (s, grow_names[i]) != 0; i++)
            ;
        if (i == 3)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "ELASTIC_GROW_POLICY: '%s' is invalid (expected at-once, "
                             "original or never)",
                             s);
        cfg->grow_policy = i;
    }
    if ((s = getenv ("ELASTIC_DEADLINE"))) {
        long long v;
        errno = 0;
        v = strtoll (s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0 || v < 0)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "ELASTIC_DEADLINE: '%s' is invalid (expected a time in "
                             "seconds since the epoch, or 0 for none)",
                             s);
        cfg->deadline = v;
    }
    return ELASTIC_OK;
}

/* The signals accepted in `signals`, named as common/signame.h names them
 * less "SIG" (the accepted spellings are "TERM" and "SIGTERM"). */
static const int accepted_signals[] = {
    SIGHUP, SIGINT, SIGQUIT, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2, SIGXCPU};

#define NACCEPTED (sizeof (accepted_signals) / sizeof (accepted_signals[0]))

/* The accepted signal named name ("TERM"), or -1. */
static int accepted_signal (const char *name)
{
    for (size_t i = 0; i < NACCEPTED; i++)
        if (!strcmp (name, signal_name (accepted_signals[i]) + 3))
            return accepted_signals[i];
    return -1;
}

static int signals_invalid (const char *what, const char *bad, elastic_error_t *err)
{
    return errcodef (err,
                     ELASTIC_ERR_INVAL,
                     "%s: '%s' is invalid (expected a comma-separated list of HUP, "
                     "INT, QUIT, ALRM, TERM, USR1, USR2, XCPU, or none)",
                     what,
                     bad);
}

int config_signals_parse (
    const char *what, const char *spec, int *sigs, int max, int *n, elastic_error_t *err)
{
    char copy[256], *save = NULL, *tok;

    *n = 0;
    if (!spec || strlen (spec) >= sizeof (copy))
        return signals_invalid (what, spec ? "(too long)" : "(null)", err);
    if (!strcmp (spec, "none"))
        return ELASTIC_OK;
    snprintf (copy, sizeof (copy), "%s", spec);
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        int sig = accepted_signal (strncmp (tok, "SIG", 3) == 0 ? tok + 3 : tok);
        if (sig < 0 || *n == max)
            return signals_invalid (what, tok, err);
        sigs[(*n)++] = sig;
    }
    if (*n == 0)
        return signals_invalid (what, spec, err);
    return ELASTIC_OK;
}

const char *config_signal_name (int sig)
{
    for (size_t i = 0; i < NACCEPTED; i++)
        if (accepted_signals[i] == sig)
            return signal_name (sig) + 3;
    return "?";
}

int elastic_config_validate (const elastic_config_t *cfg,
                             int comm_size,
                             elastic_error_t *err)
{
    char want[64];

    if (!cfg)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_config_validate: cfg is NULL");
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct int_field *f = &int_fields[i];
        int v = field_get (cfg, f);
        if (v < f->min || v > f->max) {
            expected (f, want, sizeof (want));
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s: %d is invalid (expected %s)",
                             f->name,
                             v,
                             want);
        }
    }
    if (!cfg->snapshot_dir || cfg->snapshot_dir[0] == '\0')
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "snapshot_dir: '' is invalid (expected a directory path)");
    if (strlen (cfg->snapshot_dir) >= 4096)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "snapshot_dir: a %zu-byte path is invalid (expected < 4096 bytes)",
            strlen (cfg->snapshot_dir));
    if (cfg->event_log && strlen (cfg->event_log) >= 4096)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "event_log: a %zu-byte path is invalid (expected < 4096 bytes)",
                         strlen (cfg->event_log));
    if (cfg->run_id && (cfg->run_id[0] == '\0' || strlen (cfg->run_id) > 254))
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "run_id: '%.40s' is invalid (expected 1 to 254 bytes)",
                         cfg->run_id);
    if (cfg->resume_from && strlen (cfg->resume_from) >= 4096)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "resume_from: a %zu-byte path is invalid (expected < 4096 bytes)",
            strlen (cfg->resume_from));
    if (cfg->grow_policy < ELASTIC_GROW_AT_ONCE || cfg->grow_policy > ELASTIC_GROW_NEVER)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "grow_policy: %d is invalid (expected ELASTIC_GROW_AT_ONCE, "
                         "_ORIGINAL or _NEVER)",
                         cfg->grow_policy);
    if (cfg->resume < ELASTIC_RESUME_AUTO || cfg->resume > ELASTIC_RESUME_NEVER)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "resume: %d is invalid (expected ELASTIC_RESUME_AUTO, _ALWAYS or "
            "_NEVER)",
            cfg->resume);
    if (cfg->resume_from && cfg->resume == ELASTIC_RESUME_NEVER)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "resume_from: '%s' is invalid with resume never (expected no "
                         "resume_from, or resume auto or always)",
                         cfg->resume_from);
    if (cfg->deadline < 0)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "deadline: %lld is invalid (expected seconds since the epoch, or "
            "0 for none)",
            (long long)cfg->deadline);
    {
        int sigs[16], n;
        if (config_signals_parse ("signals", cfg->signals, sigs, 16, &n, err) !=
            ELASTIC_OK)
            return ELASTIC_ERR_INVAL;
    }
    if (comm_size > 0) {
        if (cfg->spare_ranks > comm_size - 1)
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "spare_ranks: %d is invalid (expected an integer from 0 to %d: "
                "at least one of the %d ranks must work)",
                cfg->spare_ranks,
                comm_size - 1,
                comm_size);
        if (cfg->min_world_size > comm_size - cfg->spare_ranks)
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "min_world_size: %d is invalid (expected an integer from 1 to %d, "
                "the working size: %d ranks less %d spares)",
                cfg->min_world_size,
                comm_size - cfg->spare_ranks,
                comm_size,
                cfg->spare_ranks);
        if (cfg->max_world_size != 0 &&
            cfg->max_world_size < comm_size - cfg->spare_ranks)
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "max_world_size: %d is invalid (expected 0, or an integer >= %d, the "
                "working size at creation)",
                cfg->max_world_size,
                comm_size - cfg->spare_ranks);
    }
    return ELASTIC_OK;
}
