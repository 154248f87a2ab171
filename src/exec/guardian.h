/* guardian.h - kill the workers' process groups if the agent dies
 *
 * The workers die with the agent through PR_SET_PDEATHSIG, but their own
 * children do not.  The guardian is a tiny process, started once (sharing
 * the agent's memory, see guardian.c), in its own
 * session, that holds the read end of a pipe: the agent writes "+PGID" when
 * a worker starts and "-PGID" when its group is gone.  When the pipe
 * reaches end of file - the agent exited, however it died, even SIGKILL -
 * the guardian sends SIGKILL to every group still listed, removes the
 * directory trees and /dev/shm files it was given ("D<path>", "S<prefix>";
 * "d"/"s" forget them) and exits.  Only async-signal-safe calls run in it
 * (the agent has threads when it forks).
 */
#ifndef ELASTIC_EXEC_GUARDIAN_H
#define ELASTIC_EXEC_GUARDIAN_H

#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

struct guardian;

/* Start the guardian.  Returns NULL with one line in err. */
struct guardian *guardian_start (elastic_error_t *err);

/* Add or remove a process group.  Returns 0 or -1 with errno. */
int guardian_add (struct guardian *g, pid_t pgid);
int guardian_remove (struct guardian *g, pid_t pgid);

/* Remove the directory tree path, or the files of /dev/shm whose names
 * start with prefix, if the agent dies (at most 16 entries); _remove_
 * forgets one, before the agent removes it itself.  Return 0, or -1 with
 * errno (EINVAL: empty, too long, or with a newline). */
int guardian_add_dir (struct guardian *g, const char *path);
int guardian_remove_dir (struct guardian *g, const char *path);
int guardian_add_shm (struct guardian *g, const char *prefix);
int guardian_remove_shm (struct guardian *g, const char *prefix);

/* Close the pipe (the guardian kills what is still listed and removes the
 * paths left) and reap it (NULL-safe). */
void guardian_stop (struct guardian *g);

/* The guardian's pid (for tests and logs). */
pid_t guardian_pid (struct guardian *g);

#endif /* ELASTIC_EXEC_GUARDIAN_H */
