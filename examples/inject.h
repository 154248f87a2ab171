/* inject.h - failure injection shared by the examples (for tests and demos)
 *
 *   --fail RANK:STEP[:WHERE]   (repeatable) the process of original rank RANK
 *                              (its MPI_COMM_WORLD rank) kills itself with a
 *                              real SIGKILL:
 *     step      during step STEP, before its communication (default);
 *     snapshot  inside the library's snapshot of step STEP;
 *     recovery  inside the first recovery that starts at step >= STEP;
 *     protect   inside the snapshot that ends a recovery (rollback >= STEP);
 *     persist   inside the L3 (HDF5) write of step STEP, before its commit;
 *     finalize  inside MPI_Finalize, after the end of a run that reached
 *               step STEP (the work is done, the result complete);
 *     grow      inside a growth into new processes at a step >= STEP, after
 *               MPI_Comm_spawn and before the merge (a working rank);
 *     join      a process a growth at a step >= STEP started (RANK: its new
 *               original rank, numbered after every earlier rank), inside its
 *               elastic_manager_create, before it is taken in;
 *     spin      not a kill: during step STEP, after its communication, the
 *               process spins on the CPU for ever without reporting progress
 *               (a hang for elastic-exec's --hang-timeout to catch);
 *     stall     not a kill: inside the first recovery that starts at step
 *               >= STEP, after the shrink, the process stops itself
 *               (SIGSTOP), so that its peers' recovery cannot end (for
 *               ELASTIC_RECOVERY_TIMEOUT to catch).
 *
 *   --fail-rank RANK --fail-step STEP   the same as --fail RANK:STEP (pairs)
 *
 * Several "step" failures of one step die together (inject_step).
 *
 * "snapshot", "recovery", "protect", "persist", "finalize", "grow", "join" and "stall"
 * are handed to libelastic through its test hook, the ELASTIC_TEST_KILL environment
 * variable
 * ("stall" as RANK:STEP:recovery:STOP), before the manager is created.
 */
#ifndef EXAMPLES_INJECT_H
#define EXAMPLES_INJECT_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#define INJECT_MAX 64

struct inject {
    long pending_rank, pending_step; /* --fail-rank / --fail-step halves (-1: none) */
    int n;
    int rank[INJECT_MAX];
    long long step[INJECT_MAX];
    int spin[INJECT_MAX]; /* 1: spin (inject_after_comm), 0: kill (inject_step) */
    char hook[1024];      /* ELASTIC_TEST_KILL entries */
};

static inline void inject_init (struct inject *in)
{
    memset (in, 0, sizeof (*in));
    in->pending_rank = in->pending_step = -1;
}

/* A --fail-rank or --fail-step left without its other half. */
static inline int inject_check (const struct inject *in, const char *prog)
{
    if (in->pending_rank >= 0 || in->pending_step >= 0) {
        fprintf (stderr, "%s: --fail-rank and --fail-step go in pairs\n", prog);
        return -1;
    }
    return 0;
}

/* Parse one --fail argument; returns -1 with a message on stderr. */
static inline int inject_parse (struct inject *in, const char *prog, const char *arg)
{
    char where[32] = "step", extra;
    long rank;
    long long step;
    int n = sscanf (arg, "%ld:%lld:%31[a-z]%c", &rank, &step, where, &extra);

    if (!(n == 2 || n == 3) || rank < 0 || step < 0) {
        fprintf (stderr,
                 "%s: --fail: '%s' is invalid (expected RANK:STEP[:WHERE], WHERE step, "
                 "snapshot, recovery, protect, persist, finalize, grow, join, spin or "
                 "stall)\n",
                 prog,
                 arg);
        return -1;
    }
    if (!strcmp (where, "step") || !strcmp (where, "spin")) {
        if (in->n == INJECT_MAX) {
            fprintf (stderr, "%s: --fail: more than %d failures\n", prog, INJECT_MAX);
            return -1;
        }
        in->rank[in->n] = (int)rank;
        in->spin[in->n] = !strcmp (where, "spin");
        in->step[in->n++] = step;
        return 0;
    }
    if (strcmp (where, "snapshot") && strcmp (where, "recovery") &&
        strcmp (where, "protect") && strcmp (where, "persist") &&
        strcmp (where, "finalize") && strcmp (where, "grow") && strcmp (where, "join") &&
        strcmp (where, "stall")) {
        fprintf (stderr,
                 "%s: --fail: '%s' is invalid (expected WHERE step, snapshot, recovery, "
                 "protect, persist, finalize, grow, join, spin or stall)\n",
                 prog,
                 where);
        return -1;
    }
    size_t len = strlen (in->hook);
    snprintf (in->hook + len,
              sizeof (in->hook) - len,
              "%s%ld:%lld:%s",
              len ? "," : "",
              rank,
              step,
              strcmp (where, "stall") ? where : "recovery:STOP");
    return 0;
}

/* Parse --fail-rank (which 'r') or --fail-step (which 's'): a failure is
 * added when both halves are there.  Returns -1 with a message. */
static inline int
inject_parse_half (struct inject *in, const char *prog, int which, const char *arg)
{
    char *end, spec[64];
    long v = strtol (arg ? arg : "", &end, 10);

    if (!arg || *arg == '\0' || *end != '\0' || v < 0) {
        fprintf (stderr,
                 "%s: --fail-%s: '%s' is invalid (expected an integer >= 0)\n",
                 prog,
                 which == 'r' ? "rank" : "step",
                 arg ? arg : "");
        return -1;
    }
    if (which == 'r')
        in->pending_rank = v;
    else
        in->pending_step = v;
    if (in->pending_rank < 0 || in->pending_step < 0)
        return 0;
    snprintf (spec, sizeof (spec), "%ld:%ld", in->pending_rank, in->pending_step);
    in->pending_rank = in->pending_step = -1;
    return inject_parse (in, prog, spec);
}

/* Hand the snapshot/recovery failures to libelastic (before create). */
static inline void inject_setenv (const struct inject *in)
{
    if (in->hook[0])
        setenv ("ELASTIC_TEST_KILL", in->hook, 1);
}

/* Kill this process if it is to fail during this step.  Where two or more
 * processes are to be killed in the same step, every process of comm (the
 * working communicator) first waits in a barrier, and a victim dies after it
 * whatever it returned: no victim dies before all of them finished the step
 * before, and none makes another MPI call, so the survivors see one failure
 * of all of them.  (Without it, a victim still in the previous step's
 * exchange when another dies takes part in that recovery and dies only in
 * the next one; and a victim whose barrier fails because another left it
 * and died first must not recover either.)  Returns the barrier's error to
 * a survivor (recover as from the step's own), or MPI_SUCCESS. */
static inline int
inject_step (const struct inject *in, int world_rank, int64_t step, MPI_Comm comm)
{
    int kills = 0, victim = 0, rc = MPI_SUCCESS;

    for (int i = 0; i < in->n; i++) {
        if (!in->spin[i] && in->step[i] == step) {
            kills++;
            victim |= in->rank[i] == world_rank;
        }
    }
    if (kills > 1)
        rc = MPI_Barrier (comm);
    if (victim) {
        fprintf (stderr,
                 "rank %d: injected failure at step %lld (SIGKILL)\n",
                 world_rank,
                 (long long)step);
        fflush (stderr);
        kill (getpid (), SIGKILL);
    }
    return rc;
}

/* Spin for ever if this process is to hang in this step (after the step's
 * communication: its peers may get a step further). */
static inline void
inject_after_comm (const struct inject *in, int world_rank, int64_t step)
{
    for (int i = 0; i < in->n; i++) {
        if (in->spin[i] && in->rank[i] == world_rank && in->step[i] == step) {
            volatile unsigned long spins = 0;
            fprintf (stderr,
                     "rank %d: injected hang at step %lld (spinning)\n",
                     world_rank,
                     (long long)step);
            fflush (stderr);
            for (;;)
                spins++;
        }
    }
}

#endif /* EXAMPLES_INJECT_H */
