/* util.h - helpers of the agent; the shared ones are in src/common */
#ifndef ELASTIC_EXEC_UTIL_H
#define ELASTIC_EXEC_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/parse.h"
#include "common/signame.h"

/* The host's name (cached). */
const char *host_name (void);

/* The scheduler state of pid from /proc/PID/stat ('R', 'S', 'T', ...), or
 * 0 if it cannot be read; proc_stopped: 1 if it is 'T' or 't' (SIGSTOP,
 * job control, a tracer). */
char proc_state (pid_t pid);
int proc_stopped (pid_t pid);

/* What each thread of pid is doing, from /proc/PID/task: "TID STATE [in
 * WCHAN] [syscall N]" for each, comma-separated, into buf (truncated to
 * size), for a process that should have ended and did not. */
void proc_threads_describe (pid_t pid, char *buf, size_t size);

#endif /* ELASTIC_EXEC_UTIL_H */
