/* t1001-config.c - the manager's configuration: defaults, ELASTIC_*
 * variables, validation messages; exit codes and error names */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>
#include "lib/tap.h"

static const char *vars[] = {
    "ELASTIC_SNAPSHOT_PERIOD",
    "ELASTIC_SNAPSHOT_BUFFER_SIZE",
    "ELASTIC_PERSIST_PERIOD",
    "ELASTIC_RESHARD_CHECK_PERIOD",
    "ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT",
    "ELASTIC_MAX_RESHARD_RETRY_COUNT",
    "ELASTIC_MIN_WORLD_SIZE",
    "ELASTIC_SPARE_RANKS",
    "ELASTIC_SPARE_TAKEOVER",
    "ELASTIC_SNAPSHOT_DIR",
    "ELASTIC_EVENT_LOG",
    "ELASTIC_RUN_ID",
    "ELASTIC_SNAPSHOT_KEEP",
    "ELASTIC_RESUME_MODE",
    "ELASTIC_RESUME_FRESH_OK",
    "ELASTIC_RESUME_FROM",
    "ELASTIC_SIGNALS",
    "ELASTIC_SIGNAL_CHECK_PERIOD",
    "ELASTIC_DEADLINE",
    "ELASTIC_DEADLINE_MARGIN",
    "ELASTIC_DIFF_THRESHOLD_KIB",
    "ELASTIC_DIFF_BLOCK_KIB",
    "ELASTIC_GROW_POLICY",
    "ELASTIC_MAX_WORLD_SIZE",
    "ELASTIC_GROW_MIN_BATCH",
    "ELASTIC_GROW_EAGER_SNAPSHOTS",
    NULL,
};

static void clear_env (void)
{
    for (int i = 0; vars[i]; i++)
        unsetenv (vars[i]);
}

/* env VAR=VALUE must be rejected with exactly want */
static void env_rejects (const char *var, const char *value, const char *want)
{
    elastic_config_t cfg;
    elastic_error_t err = {""};

    clear_env ();
    setenv (var, value, 1);
    elastic_config_init (&cfg);
    is_int (elastic_config_from_env (&cfg, &err),
            ELASTIC_ERR_INVAL,
            "%s=%s is rejected",
            var,
            value);
    is_str (err.text,
            want,
            "%s=%s: the message names the variable, value and range",
            var,
            value);
}

/* The defaults of elastic_config_init. */
static void check_defaults (void)
{
    elastic_config_t cfg;
    elastic_error_t err;

    clear_env ();
    elastic_config_init (&cfg);
    is_int (cfg.snapshot_period, 10, "default snapshot_period");
    is_int (cfg.snapshot_buffer_size, 2, "default snapshot_buffer_size");
    is_int (cfg.persist_period, 0, "default persist_period (never)");
    is_int (cfg.reshard_check_period, 10, "default reshard_check_period");
    is_int (cfg.max_elastic_down_event_count, 16, "default max_elastic_down_event_count");
    is_int (cfg.max_reshard_retry_count, 3, "default max_reshard_retry_count");
    is_int (cfg.min_world_size, 1, "default min_world_size");
    is_int (cfg.spare_ranks, 0, "default spare_ranks");
    is_int (cfg.spare_takeover, 1, "default spare_takeover");
    is_str (cfg.snapshot_dir, ".", "default snapshot_dir");
    ok (cfg.event_log == NULL, "no event log by default");
    ok (cfg.run_id == NULL,
        "no run id by default (ELASTIC_RUN_ID, SLURM_JOB_ID, default)");
    is_int (cfg.snapshot_keep, 3, "default snapshot_keep");
    is_int (cfg.resume, ELASTIC_RESUME_AUTO, "default resume: auto");
    is_int (cfg.resume_fresh_ok, 0, "default resume_fresh_ok");
    ok (cfg.resume_from == NULL, "no resume_from by default");
    is_str (cfg.signals, "TERM,USR1", "default signals");
    is_int (cfg.signal_check_period, 0, "default signal_check_period (auto)");
    ok (cfg.deadline == 0, "no deadline by default");
    is_int (cfg.deadline_margin, 30, "default deadline_margin");
    is_int (cfg.diff_threshold_kib, 0, "default diff_threshold_kib (no automatic diff)");
    is_int (cfg.diff_block_kib, 64, "default diff_block_kib");
    is_int (cfg.grow_policy, ELASTIC_GROW_AT_ONCE, "default grow_policy: at once");
    is_int (cfg.max_world_size, 0, "default max_world_size (the size at creation)");
    is_int (cfg.grow_min_batch, 1, "default grow_min_batch");
    is_int (cfg.grow_eager_snapshots, 0, "default grow_eager_snapshots");
    is_int (elastic_config_validate (&cfg, 8, &err), ELASTIC_OK, "defaults are valid");
}

/* elastic_config_validate of the values a program sets. */
static void check_program_values (void)
{
    elastic_config_t cfg, bad;
    elastic_error_t err;

    elastic_config_init (&cfg);
    /* each field, set by the program */
    struct {
        int *field;
        int value;
        const char *want;
    } cases[] = {
        {&bad.snapshot_period,
         -3,
         "snapshot_period: -3 is invalid (expected an integer >= 1)"},
        {&bad.snapshot_period,
         0,
         "snapshot_period: 0 is invalid (expected an integer >= 1)"},
        {&bad.snapshot_buffer_size,
         1,
         "snapshot_buffer_size: 1 is invalid (expected an integer from 2 to 1024)"},
        {&bad.persist_period,
         -1,
         "persist_period: -1 is invalid (expected an integer >= 0)"},
        {&bad.reshard_check_period,
         0,
         "reshard_check_period: 0 is invalid (expected an integer >= 1)"},
        {&bad.max_elastic_down_event_count,
         -2,
         "max_elastic_down_event_count: -2 is invalid (expected an integer >= 0)"},
        {&bad.max_reshard_retry_count,
         -1,
         "max_reshard_retry_count: -1 is invalid (expected an integer >= 0)"},
        {&bad.min_world_size,
         0,
         "min_world_size: 0 is invalid (expected an integer >= 1)"},
        {&bad.spare_ranks, -1, "spare_ranks: -1 is invalid (expected an integer >= 0)"},
        {&bad.spare_takeover, 2, "spare_takeover: 2 is invalid (expected 0 or 1)"},
        {&bad.snapshot_keep,
         -1,
         "snapshot_keep: -1 is invalid (expected an integer >= 0)"},
        {&bad.resume_fresh_ok,
         3,
         "resume_fresh_ok: 3 is invalid (expected an integer from 0 to 2)"},
        {&bad.signal_check_period,
         -1,
         "signal_check_period: -1 is invalid (expected an integer >= 0)"},
        {&bad.deadline_margin,
         -5,
         "deadline_margin: -5 is invalid (expected an integer >= 0)"},
        {&bad.diff_threshold_kib,
         -1,
         "diff_threshold_kib: -1 is invalid (expected an integer >= 0)"},
        {&bad.diff_block_kib,
         0,
         "diff_block_kib: 0 is invalid (expected an integer from 1 to 1048576)"},
        {&bad.grow_policy,
         3,
         "grow_policy: 3 is invalid (expected ELASTIC_GROW_AT_ONCE, _ORIGINAL or "
         "_NEVER)"},
        {&bad.max_world_size,
         -1,
         "max_world_size: -1 is invalid (expected an integer >= 0)"},
        {&bad.max_world_size,
         7,
         "max_world_size: 7 is invalid (expected 0, or an integer >= 8, the working "
         "size at creation)"},
        {&bad.grow_min_batch,
         0,
         "grow_min_batch: 0 is invalid (expected an integer >= 1)"},
        {&bad.grow_eager_snapshots,
         2,
         "grow_eager_snapshots: 2 is invalid (expected 0 or 1)"},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        bad = cfg;
        /* field pointers were taken into bad: set through them */
        *cases[i].field = cases[i].value;
        memset (&err, 0, sizeof (err));
        is_int (elastic_config_validate (&bad, 8, &err),
                ELASTIC_ERR_INVAL,
                "invalid value %d rejected",
                cases[i].value);
        is_str (err.text, cases[i].want, "message for %d", cases[i].value);
    }
    bad = cfg;
    bad.spare_ranks = 8;
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "spare_ranks: 8 is invalid (expected an integer from 0 to 7: at least one of "
            "the 8 ranks must work)",
            "spare_ranks must leave a working rank");
    bad = cfg;
    bad.spare_ranks = 2;
    bad.min_world_size = 7;
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "min_world_size: 7 is invalid (expected an integer from 1 to 6, the working "
            "size: 8 ranks less 2 spares)",
            "min_world_size cannot exceed the working size");
    is_int (elastic_config_validate (&bad, 0, &err),
            ELASTIC_OK,
            "size checks are skipped without a size");
    bad = cfg;
    bad.snapshot_dir = "";
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "snapshot_dir: '' is invalid (expected a directory path)",
            "empty snapshot_dir");

    bad = cfg;
    bad.signals = "TERM,KILL";
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "signals: 'KILL' is invalid (expected a comma-separated list of HUP, INT, "
            "QUIT, ALRM, TERM, USR1, USR2, XCPU, or none)",
            "signals: KILL cannot be caught");
    bad = cfg;
    bad.signals = "SIGUSR2,HUP";
    is_int (
        elastic_config_validate (&bad, 8, &err), ELASTIC_OK, "signals with SIG prefix");
    bad.signals = "none";
    is_int (elastic_config_validate (&bad, 8, &err), ELASTIC_OK, "signals none");
    bad = cfg;
    bad.resume = 7;
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "resume: 7 is invalid (expected ELASTIC_RESUME_AUTO, _ALWAYS or _NEVER)",
            "resume out of range");
    bad = cfg;
    bad.resume = ELASTIC_RESUME_NEVER;
    bad.resume_from = "/tmp/x.h5";
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "resume_from: '/tmp/x.h5' is invalid with resume never (expected no "
            "resume_from, or resume auto or always)",
            "resume_from contradicts resume never");
    bad = cfg;
    bad.run_id = "";
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text, "run_id: '' is invalid (expected 1 to 254 bytes)", "empty run_id");
    bad = cfg;
    bad.deadline = -1;
    elastic_config_validate (&bad, 8, &err);
    is_str (err.text,
            "deadline: -1 is invalid (expected seconds since the epoch, or 0 for none)",
            "negative deadline");
}

/* elastic_config_from_env. */
static void check_environment (void)
{
    elastic_config_t cfg;
    elastic_error_t err;

    /* the environment */
    clear_env ();
    setenv ("ELASTIC_SNAPSHOT_PERIOD", "7", 1);
    setenv ("ELASTIC_SPARE_RANKS", "2", 1);
    setenv ("ELASTIC_SPARE_TAKEOVER", "0", 1);
    setenv ("ELASTIC_MIN_WORLD_SIZE", "3", 1);
    setenv ("ELASTIC_SNAPSHOT_DIR", "/tmp/snaps", 1);
    setenv ("ELASTIC_EVENT_LOG", "/tmp/events.json", 1);
    elastic_config_init (&cfg);
    cfg.snapshot_period = 99;
    is_int (
        elastic_config_from_env (&cfg, &err), ELASTIC_OK, "valid variables are accepted");
    is_int (
        cfg.snapshot_period, 7, "ELASTIC_SNAPSHOT_PERIOD overrides the program's value");
    is_int (cfg.spare_ranks, 2, "ELASTIC_SPARE_RANKS");
    is_int (cfg.spare_takeover, 0, "ELASTIC_SPARE_TAKEOVER");
    is_int (cfg.min_world_size, 3, "ELASTIC_MIN_WORLD_SIZE");
    is_str (cfg.snapshot_dir, "/tmp/snaps", "ELASTIC_SNAPSHOT_DIR");
    is_str (cfg.event_log, "/tmp/events.json", "ELASTIC_EVENT_LOG");
    is_int (cfg.snapshot_buffer_size, 2, "unset variables leave fields alone");

    clear_env ();
    setenv ("ELASTIC_RUN_ID", "job-42", 1);
    setenv ("ELASTIC_SNAPSHOT_KEEP", "0", 1);
    setenv ("ELASTIC_RESUME_MODE", "always", 1);
    setenv ("ELASTIC_RESUME_FRESH_OK", "1", 1);
    setenv ("ELASTIC_RESUME_FROM", "/tmp/snaps/snap-000000000040.h5", 1);
    setenv ("ELASTIC_SIGNALS", "USR2", 1);
    setenv ("ELASTIC_SIGNAL_CHECK_PERIOD", "5", 1);
    setenv ("ELASTIC_DEADLINE", "1900000000", 1);
    setenv ("ELASTIC_DEADLINE_MARGIN", "120", 1);
    setenv ("ELASTIC_DIFF_THRESHOLD_KIB", "4096", 1);
    setenv ("ELASTIC_DIFF_BLOCK_KIB", "256", 1);
    setenv ("ELASTIC_GROW_POLICY", "original", 1);
    setenv ("ELASTIC_MAX_WORLD_SIZE", "12", 1);
    setenv ("ELASTIC_GROW_MIN_BATCH", "2", 1);
    setenv ("ELASTIC_GROW_EAGER_SNAPSHOTS", "1", 1);
    elastic_config_init (&cfg);
    is_int (elastic_config_from_env (&cfg, &err),
            ELASTIC_OK,
            "the L3 variables are accepted");
    is_str (cfg.run_id, "job-42", "ELASTIC_RUN_ID");
    is_int (cfg.snapshot_keep, 0, "ELASTIC_SNAPSHOT_KEEP");
    is_int (cfg.resume, ELASTIC_RESUME_ALWAYS, "ELASTIC_RESUME_MODE");
    is_int (cfg.resume_fresh_ok, 1, "ELASTIC_RESUME_FRESH_OK");
    is_str (cfg.resume_from, "/tmp/snaps/snap-000000000040.h5", "ELASTIC_RESUME_FROM");
    is_str (cfg.signals, "USR2", "ELASTIC_SIGNALS");
    is_int (cfg.signal_check_period, 5, "ELASTIC_SIGNAL_CHECK_PERIOD");
    ok (cfg.deadline == 1900000000, "ELASTIC_DEADLINE");
    is_int (cfg.deadline_margin, 120, "ELASTIC_DEADLINE_MARGIN");
    is_int (cfg.diff_threshold_kib, 4096, "ELASTIC_DIFF_THRESHOLD_KIB");
    is_int (cfg.diff_block_kib, 256, "ELASTIC_DIFF_BLOCK_KIB");
    is_int (cfg.grow_policy, ELASTIC_GROW_ORIGINAL, "ELASTIC_GROW_POLICY");
    is_int (cfg.max_world_size, 12, "ELASTIC_MAX_WORLD_SIZE");
    is_int (cfg.grow_min_batch, 2, "ELASTIC_GROW_MIN_BATCH");
    is_int (cfg.grow_eager_snapshots, 1, "ELASTIC_GROW_EAGER_SNAPSHOTS");
    is_int (elastic_config_validate (&cfg, 8, &err), ELASTIC_OK, "and are valid");

    env_rejects (
        "ELASTIC_GROW_POLICY",
        "sometimes",
        "ELASTIC_GROW_POLICY: 'sometimes' is invalid (expected at-once, original "
        "or never)");

    env_rejects ("ELASTIC_DIFF_BLOCK_KIB",
                 "2000000",
                 "ELASTIC_DIFF_BLOCK_KIB: 2000000 is invalid (expected an integer from 1 "
                 "to 1048576)");
    env_rejects ("ELASTIC_SNAPSHOT_PERIOD",
                 "-3",
                 "ELASTIC_SNAPSHOT_PERIOD: -3 is invalid (expected an integer >= 1)");
    env_rejects ("ELASTIC_SNAPSHOT_PERIOD",
                 "abc",
                 "ELASTIC_SNAPSHOT_PERIOD: 'abc' is invalid (expected an integer >= 1)");
    env_rejects ("ELASTIC_SNAPSHOT_PERIOD",
                 "",
                 "ELASTIC_SNAPSHOT_PERIOD: '' is invalid (expected an integer >= 1)");
    env_rejects ("ELASTIC_SNAPSHOT_PERIOD",
                 "10x",
                 "ELASTIC_SNAPSHOT_PERIOD: '10x' is invalid (expected an integer >= 1)");
    env_rejects ("ELASTIC_SNAPSHOT_BUFFER_SIZE",
                 "1",
                 "ELASTIC_SNAPSHOT_BUFFER_SIZE: 1 is invalid (expected an integer from 2 "
                 "to 1024)");
    env_rejects ("ELASTIC_SPARE_TAKEOVER",
                 "yes",
                 "ELASTIC_SPARE_TAKEOVER: 'yes' is invalid (expected 0 or 1)");
    env_rejects ("ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT",
                 "99999999999",
                 "ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT: 99999999999 is invalid (expected "
                 "an integer >= 0)");
    env_rejects ("ELASTIC_SNAPSHOT_DIR",
                 "",
                 "ELASTIC_SNAPSHOT_DIR: '' is invalid (expected a directory path)");
    env_rejects ("ELASTIC_RESUME_MODE",
                 "sometimes",
                 "ELASTIC_RESUME_MODE: 'sometimes' is invalid (expected auto, always or "
                 "never)");
    env_rejects ("ELASTIC_SIGNALS",
                 "TERM,STOP",
                 "ELASTIC_SIGNALS: 'STOP' is invalid (expected a comma-separated list of "
                 "HUP, INT, QUIT, ALRM, TERM, USR1, USR2, XCPU, or none)");
    env_rejects (
        "ELASTIC_SIGNALS",
        "",
        "ELASTIC_SIGNALS: '' is invalid (expected signal names such as TERM,USR1, "
        "or none)");
    env_rejects (
        "ELASTIC_DEADLINE",
        "tomorrow",
        "ELASTIC_DEADLINE: 'tomorrow' is invalid (expected a time in seconds since "
        "the epoch, or 0 for none)");
    env_rejects (
        "ELASTIC_RUN_ID", "", "ELASTIC_RUN_ID: '' is invalid (expected a run id)");
    env_rejects ("ELASTIC_SNAPSHOT_KEEP",
                 "-1",
                 "ELASTIC_SNAPSHOT_KEEP: -1 is invalid (expected an integer >= 0)");
    clear_env ();
}

/* elastic_exit_code and elastic_strerror. */
static void check_exit_codes (void)
{
    /* exit codes and names */
    is_int (elastic_exit_code (ELASTIC_OK), 0, "exit code for OK");
    is_int (elastic_exit_code (ELASTIC_ERR_RELAUNCH),
            ELASTIC_EXIT_RELAUNCH,
            "exit code for RELAUNCH");
    is_int (elastic_exit_code (ELASTIC_ERR_NO_ULFM),
            ELASTIC_EXIT_RELAUNCH,
            "exit code for NO_ULFM");
    is_int (elastic_exit_code (ELASTIC_ERR_MPI), 1, "exit code for other errors");
    is_int (elastic_exit_code (ELASTIC_SUSPENDED),
            ELASTIC_EXIT_SUSPENDED,
            "exit code for SUSPENDED");
    ok (strstr (elastic_strerror (ELASTIC_SUSPENDED), "suspended") != NULL,
        "strerror(SUSPENDED)");
    is_str (elastic_strerror (ELASTIC_ERR_PROC_FAILED),
            "a process failed",
            "strerror(PROC_FAILED)");
}

int main (void)
{
    check_defaults ();
    check_program_values ();
    check_environment ();
    check_exit_codes ();
    return done_testing ();
}
