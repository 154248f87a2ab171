/* util.h - small helpers of the agent: clocks, paths, signal names, text */
#ifndef ELASTIC_EXEC_UTIL_H
#define ELASTIC_EXEC_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC, and since the epoch. */
double mono_now (void);
double wall_now (void);

/* CLOCK_MONOTONIC in nanoseconds (the heartbeat's clock). */
uint64_t mono_ns (void);

/* Format epoch seconds as "2024-05-01T12:00:00.123456Z" into buf. */
void format_iso_time (double t, char *buf, size_t size);

/* mkdir -p with mode 0755.  Returns 0, or -1 with errno. */
int mkdir_p (const char *path);

/* rm -rf of a directory tree (no symlink following).  Returns 0 or -1. */
int remove_tree (const char *path);

/* The name of a signal without "SIG" prefix handling: "SIGTERM"; a static
 * "SIG<n>" style name for unknown numbers (not thread-safe for those). */
const char *signal_name (int signum);

/* Parse "SIGTERM", "TERM", "term" or "15".  Returns the number or -1. */
int signal_parse (const char *s);

/* Parse a comma-separated signal list into set (emptied first).  Returns 0,
 * or -1 with one line in err naming `what`, the bad entry, and what is
 * accepted. */
int signal_list_parse (
    const char *what, const char *s, sigset_t *set, char *err, size_t errsz);

/* Format a signal set as "SIGTERM,SIGINT" into buf. */
void signal_list_format (const sigset_t *set, char *buf, size_t size);

/* Write all of buf to fd, retrying on EINTR and short writes.  Returns 0 or
 * -1 with errno. */
int write_all (int fd, const void *buf, size_t len);

/* Read a whole (small) file into a malloc'ed NUL-terminated buffer of at
 * most max bytes.  Returns NULL with errno (EFBIG when larger). */
char *read_file (const char *path, size_t max, size_t *lenp);

/* Parse a boolean: 1/0, true/false, yes/no, on/off.  Returns 0 or -1. */
int parse_bool (const char *s, int *out);

/* The host's name (cached). */
const char *host_name (void);

/* snprintf for messages, where truncation is acceptable. */
int errfmt (char *buf, size_t size, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* snprintf for paths: returns 0, or -1 with errno ENAMETOOLONG when the
 * result does not fit. */
int pathfmt (char *buf, size_t size, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* 1 if sig's default action ends a process (not SIGCHLD, SIGCONT, the stop
 * signals, SIGURG, SIGWINCH); 0 for those and for invalid numbers. */
int signal_default_terminates (int sig);

#endif /* ELASTIC_EXEC_UTIL_H */
