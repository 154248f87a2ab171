/* fuzz_heartbeat.c - the heartbeat files libelastic's workers update
 * (src/common/heartbeat.h), as elastic-exec reads them: the worker view
 * (elastic_agent_worker_info), the end-of-work flag (worker_reported_end),
 * the --hang-timeout watchdog (check_heartbeats: overdue, stopped, the
 * first to stop, the pid to signal) and /metrics
 *
 * Input: the contents of 4 workers' heartbeat records, one after the other
 * (sizeof (struct elastic_heartbeat) bytes each, zero-filled when short,
 * as the agent creates them), mapped where the agent maps the files.  The
 * workers started 10 s ago with --hang-timeout 1.
 */
#include "fuzz.h"
#include "fuzz_agent.h"

static struct elastic_heartbeat hb[FUZZ_NWORKERS];

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_agent_setup ();
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct elastic_agent_worker_info info;
    char *text;

    memset (hb, 0, sizeof (hb));
    memcpy (hb, data, size < sizeof (hb) ? size : sizeof (hb));
    fuzz_agent_workers (10);
    for (int i = 0; i < FUZZ_NWORKERS; i++)
        fuzz_agent->w[i].hb = &hb[i];
    for (int i = 0; i < FUZZ_NWORKERS; i++) {
        elastic_agent_worker_info (fuzz_agent, i, &info);
        worker_reported_end (&fuzz_agent->w[i]);
    }
    watchdog_check (fuzz_agent);
    if (!(text = agent_metrics (fuzz_agent)))
        abort ();
    free (text);
    return 0;
}
