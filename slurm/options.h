/* options.h - the value of `--elastic[=OPTIONS]`, parsed and checked
 *
 * OPTIONS is a comma-separated list of KEY=VALUE items (KEY may be spelled
 * with '-' or '_'; a flag may stand alone).  Library keys become ELASTIC_*
 * variables of the job; elastic-exec keys become its command-line flags;
 * `wrap` says whether tasks run under elastic-exec at all:
 *
 *   snapshot-period=N   ELASTIC_SNAPSHOT_PERIOD   (integer >= 1)
 *   persist-period=N    ELASTIC_PERSIST_PERIOD    (integer >= 0)
 *   spare-ranks=N       ELASTIC_SPARE_RANKS       (integer >= 0)
 *   min-world-size=N    ELASTIC_MIN_WORLD_SIZE    (integer >= 1)
 *   snapshot-dir=DIR    ELASTIC_SNAPSHOT_DIR=DIR/<job id>
 *   max-restarts=N      elastic-exec --max-restarts=N (0..1000000)
 *   hang-timeout=T      elastic-exec --hang-timeout=T (a duration: 30, 2.5,
 *   shutdown-timeout=T  elastic-exec --shutdown-timeout=T  500ms, 2m, 1h)
 *   exit-barrier-timeout=T  elastic-exec --exit-barrier-timeout=T
 *   event-log=FILE      elastic-exec --event-log=FILE
 *   log-dir=DIR         elastic-exec --log-dir=DIR
 *   verbose[=BOOL]      elastic-exec --verbose
 *   wrap=BOOL           run each task under elastic-exec (default yes)
 *
 * Every error is one line naming the key, the value and what is accepted.
 * This file has no Slurm dependency, so the unit test links it directly.
 */
#ifndef ELASTIC_SLURM_OPTIONS_H
#define ELASTIC_SLURM_OPTIONS_H

#include <stddef.h>

#include "common/error.h"

struct spank_opts;

/* Create an empty option set (wrap on, nothing else set); NULL on ENOMEM. */
struct spank_opts *spank_opts_create (void);

/* Free the set; NULL is accepted; errno is preserved. */
void spank_opts_destroy (struct spank_opts *o);

/* Add the items of one `--elastic` value (NULL or "" for the bare flag);
 * later items win.  Returns 0, or -1 with one line in err (the set is then
 * unchanged). */
int spank_opts_parse (struct spank_opts *o, const char *arg, elastic_error_t *err);

/* 1 if tasks are to run under elastic-exec, else 0. */
int spank_opts_wrap (const struct spank_opts *o);

/* The snapshot-dir base given, or NULL. */
const char *spank_opts_snapshot_dir (const struct spank_opts *o);

/* The i-th library setting that was given: its variable in *name and its
 * value in *value.  Returns 0, or -1 when there is no i-th setting. */
int spank_opts_env (const struct spank_opts *o,
                    int i,
                    const char **name,
                    const char **value);

/* The elastic-exec flags, one per line ("--max-restarts=3\n--verbose"),
 * into buf.  Returns the length, or -1 if buf is too small. */
int spank_opts_exec_args (const struct spank_opts *o, char *buf, size_t size);

/* The accepted keys, comma-separated, for messages and --help. */
const char *spank_opts_keys (void);

#endif /* ELASTIC_SLURM_OPTIONS_H */
