/* signame.h - signal names: the one table of them */
#ifndef ELASTIC_COMMON_SIGNAME_H
#define ELASTIC_COMMON_SIGNAME_H

#include <signal.h>
#include <stddef.h>

#include "error.h"

/* The name of a signal: "SIGTERM"; "SIGRTMIN+n", or a static "SIG<n>" for
 * unknown numbers (not thread-safe for those). */
const char *signal_name (int signum);

/* Parse "SIGTERM", "TERM", "term" or "15".  Returns the number or -1. */
int signal_parse (const char *s);

/* Parse a comma-separated signal list into set (emptied first).  Returns 0,
 * or -1 with one line in err naming `what`, the bad entry, and what is
 * accepted. */
int signal_list_parse (const char *what,
                       const char *s,
                       sigset_t *set,
                       elastic_error_t *err);

/* Format a signal set as "SIGTERM,SIGINT" into buf. */
void signal_list_format (const sigset_t *set, char *buf, size_t size);

/* 1 if sig's default action ends a process (not SIGCHLD, SIGCONT, the stop
 * signals, SIGURG, SIGWINCH); 0 for those and for invalid numbers. */
int signal_default_terminates (int sig);

#endif /* ELASTIC_COMMON_SIGNAME_H */
