/* log.h - libelastic's diagnostics on stderr, filtered by ELASTIC_LOG (internal)
 *
 * ELASTIC_LOG=error|warn|info|debug (default warn).  Each line is prefixed
 * with "elastic[rank R]: LEVEL: " where R is the original rank once known.
 */
#ifndef ELASTIC_LOG_H
#define ELASTIC_LOG_H

enum { EL_ERROR = 0, EL_WARN = 1, EL_INFO = 2, EL_DEBUG = 3 };

/* Set the rank shown in the prefix (-1: none). */
void el_log_set_rank (int rank);

/* True if messages of this level are printed. */
int el_log_enabled (int level);

/* Print one line (a newline is added) if level is enabled. */
void el_log (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif /* ELASTIC_LOG_H */
