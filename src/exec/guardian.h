/* guardian.h - kill the workers' process groups if the agent dies
 *
 * The workers die with the agent through PR_SET_PDEATHSIG, but their own
 * children do not.  The guardian is a tiny process, forked once, in its own
 * session, that holds the read end of a pipe: the agent writes "+PGID" when
 * a worker starts and "-PGID" when its group is gone.  When the pipe
 * reaches end of file - the agent exited, however it died, even SIGKILL -
 * the guardian sends SIGKILL to every group still listed and exits.
 */
#ifndef ELASTIC_EXEC_GUARDIAN_H
#define ELASTIC_EXEC_GUARDIAN_H

#include <stddef.h>
#include <sys/types.h>

struct guardian;

/* Fork the guardian.  Returns NULL with one line in err. */
struct guardian *guardian_start (char *err, size_t errsz);

/* Add or remove a process group.  Returns 0 or -1 with errno. */
int guardian_add (struct guardian *g, pid_t pgid);
int guardian_remove (struct guardian *g, pid_t pgid);

/* Close the pipe (the guardian kills what is still listed) and reap it
 * (NULL-safe). */
void guardian_stop (struct guardian *g);

/* The guardian's pid (for tests and logs). */
pid_t guardian_pid (struct guardian *g);

#endif /* ELASTIC_EXEC_GUARDIAN_H */
