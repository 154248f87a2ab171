/* testhook.h - failure injection for tests: ELASTIC_TEST_KILL (internal)
 *
 * ELASTIC_TEST_KILL=RANK:STEP:WHERE[,RANK:STEP:WHERE...] makes the process of
 * original rank RANK kill itself with a real SIGKILL:
 *   snapshot  inside the snapshot of step STEP, after its L1 copy and before
 *             its L2 exchange completes;
 *   recovery  inside the first recovery that starts at step >= STEP, after
 *             the shrink, before the state exchange;
 *   protect   inside the snapshot that ends a recovery rolling back to a
 *             step >= STEP (after the handler);
 *   persist   inside the L3 write of step STEP, after its data is in the
 *             temporary file and before the commit;
 *   finalize  inside MPI_Finalize (the first thing it does), after a job
 *             that ended at a step >= STEP reported its end;
 *   grow      inside a growth into new processes at a step >= STEP, after
 *             MPI_Comm_spawn returned and before the merge (a working rank);
 *   join      in a process a growth at a step >= STEP started, inside its
 *             elastic_manager_create, after the merge and before the
 *             agreement that takes it in (RANK: its new original rank);
 *   create    inside elastic_manager_create, before its first collective
 *             (STEP is ignored: give 0), right after MPI_Init.
 * It is meant for tests and demos; an unset variable costs nothing.
 */
#ifndef ELASTIC_TESTHOOK_H
#define ELASTIC_TESTHOOK_H

#include <stdint.h>
#include <elastic.h>

enum hook_where {
    HOOK_SNAPSHOT,
    HOOK_RECOVERY,
    HOOK_PROTECT,
    HOOK_PERSIST,
    HOOK_FINALIZE,
    HOOK_GROW,
    HOOK_JOIN,
    HOOK_CREATE
};

struct testhook;

/* Parse spec (NULL or empty: no hooks, *out = NULL).  Returns
 * ELASTIC_ERR_INVAL naming the bad entry. */
int testhook_create (const char *spec, struct testhook **out, elastic_error_t *err);
void testhook_destroy (struct testhook *h);

/* Kill this process if a hook for (rank, step, where) is armed. */
void testhook_check (struct testhook *h, int rank, int64_t step, enum hook_where where);

/* Arm the finalize hook, if one is set for (rank, step): the process kills
 * itself when MPI_Finalize starts. */
void testhook_arm_finalize (struct testhook *h, int rank, int64_t step);

#endif /* ELASTIC_TESTHOOK_H */
