/* options.c - the value of `--elastic[=OPTIONS]`, parsed and checked */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "options.h"

enum kind {
    LIB_INT,      /* an ELASTIC_* variable with an integer value */
    SNAPSHOT_DIR, /* the snapshot directory's base */
    EXEC_INT,     /* an elastic-exec flag with an integer value */
    EXEC_SECONDS, /* an elastic-exec flag with a duration */
    EXEC_PATH,    /* an elastic-exec flag with a path */
    EXEC_FLAG,    /* an elastic-exec flag without a value (a boolean here) */
    WRAP,         /* run tasks under elastic-exec (a boolean) */
};

static const struct key {
    const char *name;
    enum kind kind;
    const char *env; /* LIB_INT: the variable */
    long min;
    long max;
} keys[] = {
    {"snapshot-period", LIB_INT, "ELASTIC_SNAPSHOT_PERIOD", 1, INT_MAX},
    {"persist-period", LIB_INT, "ELASTIC_PERSIST_PERIOD", 0, INT_MAX},
    {"spare-ranks", LIB_INT, "ELASTIC_SPARE_RANKS", 0, INT_MAX},
    {"min-world-size", LIB_INT, "ELASTIC_MIN_WORLD_SIZE", 1, INT_MAX},
    {"snapshot-dir", SNAPSHOT_DIR, NULL, 0, 0},
    {"max-restarts", EXEC_INT, NULL, 0, 1000000},
    {"hang-timeout", EXEC_SECONDS, NULL, 0, 10000000},
    {"shutdown-timeout", EXEC_SECONDS, NULL, 0, 10000000},
    {"exit-barrier-timeout", EXEC_SECONDS, NULL, 0, 10000000},
    {"event-log", EXEC_PATH, NULL, 0, 0},
    {"log-dir", EXEC_PATH, NULL, 0, 0},
    {"node-timeout", EXEC_SECONDS, NULL, 0, 10000000},
    {"status-file", EXEC_PATH, NULL, 0, 0},
    {"verbose", EXEC_FLAG, NULL, 0, 0},
    {"wrap", WRAP, NULL, 0, 0},
};
#define NKEYS ((int)(sizeof (keys) / sizeof (keys[0])))

struct spank_opts {
    char *value[NKEYS]; /* the checked value of each key given, or NULL */
};

struct spank_opts *spank_opts_create (void)
{
    return calloc (1, sizeof (struct spank_opts));
}

void spank_opts_destroy (struct spank_opts *o)
{
    int saved = errno;

    if (o) {
        for (int i = 0; i < NKEYS; i++)
            free (o->value[i]);
        free (o);
    }
    errno = saved;
}

const char *spank_opts_keys (void)
{
    return "snapshot-period, persist-period, spare-ranks, min-world-size, snapshot-dir, "
           "max-restarts, hang-timeout, shutdown-timeout, exit-barrier-timeout, "
           "event-log, "
           "log-dir, node-timeout, status-file, verbose, wrap";
}

static int find_key (const char *name, size_t len)
{
    char norm[64];

    if (len == 0 || len >= sizeof (norm))
        return -1;
    for (size_t i = 0; i < len; i++)
        norm[i] = name[i] == '_' ? '-' : (char)tolower ((unsigned char)name[i]);
    norm[len] = '\0';
    for (int k = 0; k < NKEYS; k++)
        if (strcmp (keys[k].name, norm) == 0)
            return k;
    return -1;
}

/* Check VALUE for key k; on success store its canonical text in *out. */
static int check_value (int k, const char *value, char **out, elastic_error_t *err)
{
    const struct key *key = &keys[k];
    char buf[64];
    long n;
    double secs;
    int b;

    switch (key->kind) {
        case LIB_INT:
        case EXEC_INT:
            if (!value)
                return errprintf (err,
                                  "%s needs a value (expected an integer in %ld..%ld)",
                                  key->name,
                                  key->min,
                                  key->max);
            if (parse_long (key->name, value, key->min, key->max, &n, err) < 0)
                return -1;
            snprintf (buf, sizeof (buf), "%ld", n);
            value = buf;
            break;
        case EXEC_SECONDS:
            if (!value)
                return errprintf (
                    err,
                    "%s needs a value (expected a duration such as 30, 2.5, 500ms, 2m)",
                    key->name);
            if (parse_seconds (
                    key->name, value, (double)key->min, (double)key->max, &secs, err) < 0)
                return -1;
            break;
        case SNAPSHOT_DIR:
        case EXEC_PATH:
            if (!value || *value == '\0')
                return errprintf (err, "%s needs a value (expected a path)", key->name);
            if (strlen (value) >= PATH_MAX - 64)
                return errprintf (err,
                                  "%s: the path is too long (at most %d characters)",
                                  key->name,
                                  PATH_MAX - 65);
            for (const char *p = value; *p; p++) {
                if (iscntrl ((unsigned char)*p))
                    return errprintf (
                        err,
                        "%s: '%s' contains a control character (expected a path)",
                        key->name,
                        value);
            }
            break;
        case EXEC_FLAG:
        case WRAP:
            b = 1;
            if (value && parse_bool (value, &b) < 0)
                return errprintf (
                    err,
                    "%s: '%s' is not a boolean (expected yes, no, true, false, 1 or 0)",
                    key->name,
                    value);
            value = b ? "1" : "0";
            break;
    }
    if (!(*out = strdup (value)))
        return errprintf (err, "out of memory");
    return 0;
}

int spank_opts_parse (struct spank_opts *o, const char *arg, elastic_error_t *err)
{
    char *next[NKEYS] = {0};
    const char *item = arg, *end, *eq;
    int rc = -1;

    if (!o)
        return errprintf (err, "no option set");
    while (item && *item) {
        char value[PATH_MAX];
        size_t len;
        int k;

        end = strchr (item, ',');
        len = end ? (size_t)(end - item) : strlen (item);
        if (len == 0) {
            errprintf (
                err,
                "empty item in '%s' (expected KEY=VALUE items separated by commas)",
                arg);
            goto out;
        }
        eq = memchr (item, '=', len);
        if ((k = find_key (item, eq ? (size_t)(eq - item) : len)) < 0) {
            errprintf (err,
                       "unknown option '%.*s' (accepted: %s)",
                       (int)(eq ? eq - item : (ptrdiff_t)len),
                       item,
                       spank_opts_keys ());
            goto out;
        }
        if (eq) {
            size_t vlen = len - (size_t)(eq + 1 - item);
            if (vlen >= sizeof (value)) {
                errprintf (err, "%s: the value is too long", keys[k].name);
                goto out;
            }
            memcpy (value, eq + 1, vlen);
            value[vlen] = '\0';
        }
        free (next[k]);
        next[k] = NULL;
        if (check_value (k, eq ? value : NULL, &next[k], err) < 0)
            goto out;
        item = end ? end + 1 : NULL;
        if (end && *item == '\0') {
            errprintf (
                err,
                "empty item at the end of '%s' (expected KEY=VALUE items separated "
                "by commas)",
                arg);
            goto out;
        }
    }
    for (int k = 0; k < NKEYS; k++) {
        if (next[k]) {
            free (o->value[k]);
            o->value[k] = next[k];
            next[k] = NULL;
        }
    }
    rc = 0;
out:
    for (int k = 0; k < NKEYS; k++)
        free (next[k]);
    return rc;
}

static const char *value_of (const struct spank_opts *o, enum kind kind, const char *name)
{
    for (int k = 0; k < NKEYS; k++)
        if (keys[k].kind == kind && (!name || strcmp (keys[k].name, name) == 0))
            return o->value[k];
    return NULL;
}

int spank_opts_wrap (const struct spank_opts *o)
{
    const char *v = o ? value_of (o, WRAP, NULL) : NULL;
    return !v || strcmp (v, "1") == 0;
}

const char *spank_opts_snapshot_dir (const struct spank_opts *o)
{
    return o ? value_of (o, SNAPSHOT_DIR, NULL) : NULL;
}

int spank_opts_env (const struct spank_opts *o,
                    int i,
                    const char **name,
                    const char **value)
{
    int seen = 0;

    if (!o || i < 0)
        return -1;
    for (int k = 0; k < NKEYS; k++) {
        if (keys[k].kind != LIB_INT || !o->value[k])
            continue;
        if (seen++ == i) {
            *name = keys[k].env;
            *value = o->value[k];
            return 0;
        }
    }
    return -1;
}

int spank_opts_exec_args (const struct spank_opts *o, char *buf, size_t size)
{
    size_t len = 0;

    if (!o || !buf || size == 0)
        return -1;
    buf[0] = '\0';
    for (int k = 0; k < NKEYS; k++) {
        const struct key *key = &keys[k];
        int n;

        if (!o->value[k])
            continue;
        if (key->kind == EXEC_FLAG) {
            if (strcmp (o->value[k], "1") != 0)
                continue;
            n = snprintf (buf + len, size - len, "%s--%s", len ? "\n" : "", key->name);
        } else if (key->kind == EXEC_INT || key->kind == EXEC_SECONDS ||
                   key->kind == EXEC_PATH)
            n = snprintf (buf + len,
                          size - len,
                          "%s--%s=%s",
                          len ? "\n" : "",
                          key->name,
                          o->value[k]);
        else
            continue;
        if (n < 0 || (size_t)n >= size - len)
            return -1;
        len += (size_t)n;
    }
    return (int)len;
}
