/* command.h - the mpirun command line of an attempt, and its world size
 *
 * The command is mpirun with the options ULFM needs (--with-ft ulfm, the
 * pml/coll choices, the failure detector sized to the job) unless the user
 * gave them, the user's mpirun options, -n, the attempt's hostfile, the
 * environment the ranks get (-x), and the program, under elastic-exec
 * unless --no-wrap.
 */
#ifndef ELASTIC_MPIRUN_COMMAND_H
#define ELASTIC_MPIRUN_COMMAND_H

#include <stddef.h>

#include "common/error.h"
#include "job.h"

/* A NULL-terminated argv that owns its strings. */
struct argvec {
    char **v;
    int n, cap;
};

/* Free a's strings and array, and empty it. */
void argvec_free (struct argvec *a);

/* The world size of the next attempt, from the options and the usable
 * hosts.  Returns 0, or -1 with err when it would fall below --np-min. */
int command_plan_np (struct job *j, int *np, elastic_error_t *err);

/* The most processes an attempt of np ranks may have at once, which its
 * ranks grow back into after losing some (ELASTIC_GROW_SLOTS): --np-max,
 * else -n, else np; on several hosts no more than their slots unless
 * oversubscribing. */
int command_grow_slots (const struct job *j, int np);

/* The usable hosts and their slots as HOST:SLOTS,... into buf, where the
 * ranks place the processes of a growth (ELASTIC_GROW_HOSTS).  Returns 1,
 * or 0 with "" for a local launch or a host of unknown slots. */
int command_grow_hosts (const struct job *j, char *buf, size_t size);

/* Append the mpirun command of an attempt of np ranks (hostfile: NULL for
 * a local launch) to a.  Exits with a message when out of memory. */
void command_build (struct job *j, int np, const char *hostfile, struct argvec *a);

/* argv as one shell-quoted line, cut at size. */
void command_format (char *const argv[], char *buf, size_t size);

#endif /* ELASTIC_MPIRUN_COMMAND_H */
