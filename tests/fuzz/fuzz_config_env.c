/* fuzz_config_env.c - libelastic's configuration from the environment
 * (src/libelastic/config.c: every ELASTIC_* variable of elastic_config_t)
 * and the test hook's ELASTIC_TEST_KILL (testhook.c)
 *
 * Input: KEY=VALUE lines.  Only the variables the library reads are set
 * (others are ignored), the defaults are loaded, the environment is read
 * and the result validated for a world of 1 to 8 ranks; every variable is
 * unset again before the next input.
 */
#include <elastic.h>

#include "fuzz.h"
#include "libelastic/config_int.h"
#include "libelastic/testhook.h"

static const char *const vars[] = {
    "ELASTIC_SNAPSHOT_PERIOD",
    "ELASTIC_SNAPSHOT_BUFFER_SIZE",
    "ELASTIC_PERSIST_PERIOD",
    "ELASTIC_RESHARD_CHECK_PERIOD",
    "ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT",
    "ELASTIC_MAX_RESHARD_RETRY_COUNT",
    "ELASTIC_MIN_WORLD_SIZE",
    "ELASTIC_SPARE_RANKS",
    "ELASTIC_SPARE_TAKEOVER",
    "ELASTIC_SNAPSHOT_KEEP",
    "ELASTIC_RESUME_FRESH_OK",
    "ELASTIC_SIGNAL_CHECK_PERIOD",
    "ELASTIC_DEADLINE_MARGIN",
    "ELASTIC_SNAPSHOT_DIR",
    "ELASTIC_EVENT_LOG",
    "ELASTIC_RUN_ID",
    "ELASTIC_RESUME_FROM",
    "ELASTIC_SIGNALS",
    "ELASTIC_RESUME_MODE",
    "ELASTIC_DEADLINE",
    "ELASTIC_TEST_KILL",
};
#define NVARS (sizeof (vars) / sizeof (vars[0]))

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), **line;
    elastic_config_t cfg;
    elastic_error_t err;
    struct testhook *hook = NULL;
    const char *kill;
    int n, sigs[16], nsigs;

    line = fuzz_lines (s, &n);
    for (int i = 0; i < n; i++) {
        char *eq = strchr (line[i], '=');
        if (!eq)
            continue;
        *eq = '\0';
        for (size_t k = 0; k < NVARS; k++)
            if (!strcmp (line[i], vars[k]))
                setenv (vars[k], eq + 1, 1);
    }
    elastic_config_init (&cfg);
    if (elastic_config_from_env (&cfg, &err) == ELASTIC_OK) {
        elastic_config_validate (&cfg, 0, &err);
        elastic_config_validate (&cfg, 1 + (int)(size % 8), &err);
        if (config_signals_parse ("signals", cfg.signals, sigs, 16, &nsigs, &err) ==
            ELASTIC_OK)
            for (int i = 0; i < nsigs; i++)
                config_signal_name (sigs[i]);
    }
    if ((kill = getenv ("ELASTIC_TEST_KILL")) &&
        testhook_create (kill, &hook, &err) == ELASTIC_OK)
        testhook_destroy (hook);
    for (size_t k = 0; k < NVARS; k++)
        unsetenv (vars[k]);
    free (line);
    free (s);
    return 0;
}
