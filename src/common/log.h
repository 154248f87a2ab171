/* log.h - timestamped diagnostic lines from the tools, on stderr
 *
 * One line per message, written with a single write(2) so lines from
 * several threads never interleave:
 *     2024-05-01T12:00:00.123Z elastic-exec[1234]: warn: text
 * Usage errors (bad flags) are not log lines: the tools print them plainly.
 */
#ifndef ELASTIC_COMMON_LOG_H
#define ELASTIC_COMMON_LOG_H

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the program name shown in each line and the most verbose level shown. */
void log_init (const char *prog, int level);

/* Unless log_init was called, take the level from the variable `var`
 * (error, warn, info, debug), for code used as a library. */
void log_init_from_env (const char *prog, const char *var);

/* Change or read the level. */
void log_set_level (int level);
int log_get_level (void);

/* Write one line at `level` if the level is enabled. */
void log_msg (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#define log_err(...)   log_msg (LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg (LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg (LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg (LOG_DEBUG, __VA_ARGS__)

#endif /* ELASTIC_COMMON_LOG_H */
