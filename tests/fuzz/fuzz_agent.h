/* fuzz_agent.h - an elastic-exec agent for the harnesses that read what
 * workers leave in it (fuzz_heartbeat, fuzz_http)
 *
 * The agent is made as elastic-exec makes it (a spec, an entrypoint,
 * elastic_agent_create: the local backend, --wireup none) with 4 workers
 * that are never started; each input fills in the workers' records as a
 * run would.  Their pid is one child of the harness (its own process
 * group, paused, killed at exit or when the harness dies), so that the
 * watchdog's signals reach nothing else; the hang signal is 0 (a probe).
 */
#ifndef ELASTIC_FUZZ_AGENT_H
#define ELASTIC_FUZZ_AGENT_H

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
#include "spec.h"
#include "util.h"

#define FUZZ_NWORKERS 4

static elastic_agent_spec_t *fuzz_spec;
static elastic_agent_t *fuzz_agent;
static pid_t fuzz_child = -1;

static void fuzz_agent_exit (void)
{
    if (fuzz_child > 0) {
        kill (fuzz_child, SIGKILL);
        waitpid (fuzz_child, NULL, 0);
    }
}

static void fuzz_agent_setup (void)
{
    char *argv[] = {(char *)"true", NULL};
    elastic_error_t err;

    log_init ("fuzz", LOG_ERROR);
    if (!(fuzz_spec = elastic_agent_spec_create ()) ||
        elastic_agent_spec_set (fuzz_spec, "nproc-per-node", "4", &err) ||
        elastic_agent_spec_set (fuzz_spec, "wireup", "none", &err) ||
        elastic_agent_spec_set (fuzz_spec, "hang-timeout", "1", &err) ||
        elastic_agent_spec_set_entrypoint (fuzz_spec, 1, argv, &err) ||
        !(fuzz_agent = elastic_agent_create (fuzz_spec, &err)))
        abort ();
    fuzz_spec->hang_signal = 0;
    if ((fuzz_child = fork ()) < 0)
        abort ();
    if (fuzz_child == 0) {
        setpgid (0, 0);
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
            pause ();
    }
    setpgid (fuzz_child, fuzz_child);
    atexit (fuzz_agent_exit);
}

/* Reset the workers to running, healthy, started `age` seconds ago. */
static void fuzz_agent_workers (double age)
{
    for (int i = 0; i < fuzz_agent->nworkers; i++) {
        struct worker *w = &fuzz_agent->w[i];
        w->index = i;
        w->local_rank = w->rank = w->role_rank = i;
        w->world_size = w->role_world_size = fuzz_agent->nworkers;
        w->pid = fuzz_child;
        w->state = ELASTIC_AGENT_HEALTHY;
        w->exited = w->failed = w->lost = 0;
        w->start_mono = mono_now () - age;
        w->hang_grace_ns = 0;
        w->hb = NULL;
    }
}

#endif /* ELASTIC_FUZZ_AGENT_H */
