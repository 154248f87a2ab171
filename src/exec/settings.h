/* settings.h - elastic-exec's settings: one table for flags, environment
 * and spec keys (settings.c)
 *
 * Each row is one setting: its long flag (which is also its spec key for
 * elastic_agent_spec_set), a short flag and torchrun's spelling where it
 * has them, its ELASTIC_* variable (and torchelastic's, for three), the
 * parser that checks the value and stores it in the spec, and its --help
 * line.  The command line (cli.c), the environment (cli.c) and the spec
 * (spec.c) all walk this one table, so that they cannot drift apart.
 */
#ifndef ELASTIC_EXEC_SETTINGS_H
#define ELASTIC_EXEC_SETTINGS_H

#include <stddef.h>

#include "common/error.h"

struct elastic_agent_spec;

/* What a flag takes. */
enum setting_arg {
    SETTING_NONE = 0,  /* no value (--verbose); no variable either */
    SETTING_VALUE = 1, /* a value: --flag V, --flag=V, -cV, -c V */
    SETTING_BOOL = 2,  /* an optional =value, "1" when absent */
};

/* Check value and store it in s; key is the row's name (for messages).
 * Returns 0, or -1 with err ("key: 'value' is ..."; empty on ENOMEM). */
typedef int (*setting_fn) (struct elastic_agent_spec *s,
                           const char *key,
                           const char *value,
                           elastic_error_t *err);

struct setting {
    const char *name;       /* --name, and the spec key when set is not NULL */
    char short_flag;        /* -c, or 0 */
    const char *alias;      /* another long spelling (torchrun's), or NULL */
    enum setting_arg arg;   /* what the flag takes */
    const char *env;        /* ELASTIC_* variable, or NULL */
    const char *compat_env; /* torchelastic's variable, or NULL */
    setting_fn set;         /* the spec's parser; NULL: a flag of elastic-exec only */
    const char *help;       /* the --help line; NULL: a spec key only, no flag */
};

/* The table, in --help order, and its length. */
extern const struct setting settings_table[];
extern const int settings_count;

/* The spec key `key` ('_' may stand for '-'; aliases are not keys), or
 * NULL.  Its index in settings_table[] is (row - settings_table). */
const struct setting *settings_find_key (const char *key);

/* The flag --name (name[0..len), '_' may stand for '-', aliases
 * accepted), or NULL. */
const struct setting *settings_find_flag (const char *name, size_t len);

/* The flag -c, or NULL. */
const struct setting *settings_find_short (char c);

#endif /* ELASTIC_EXEC_SETTINGS_H */
