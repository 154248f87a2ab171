/* loop.h - the agent's one event loop: file descriptors over epoll
 *
 * Every source the agent reacts to is a file descriptor: the signalfd, the
 * workers' pidfds and output pipes, the file-timer FIFO, a wake-up eventfd.
 * Callbacks only record what happened; the agent's state machine decides.
 * Watchers may be removed from inside any callback.
 */
#ifndef ELASTIC_EXEC_LOOP_H
#define ELASTIC_EXEC_LOOP_H

struct loop;

/* revents are poll(2) bits (POLLIN, POLLHUP, POLLERR). */
typedef void (*loop_fn) (struct loop *loop, int fd, int revents, void *arg);

/* Create a loop.  Returns NULL with errno. */
struct loop *loop_create (void);

/* Free a loop (NULL-safe); does not close the watched descriptors. */
void loop_destroy (struct loop *loop);

/* Watch fd for input.  Returns 0, or -1 with errno (EEXIST if watched). */
int loop_add (struct loop *loop, int fd, loop_fn cb, void *arg);

/* Stop watching fd.  Returns 0, or -1 with errno ENOENT. */
int loop_remove (struct loop *loop, int fd);

/* Wait up to timeout seconds (< 0: forever) and dispatch what is ready.
 * Returns the number of callbacks run, or -1 with errno. */
int loop_run_once (struct loop *loop, double timeout);

#endif /* ELASTIC_EXEC_LOOP_H */
