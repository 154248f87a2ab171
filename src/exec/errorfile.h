/* errorfile.h - torchelastic's JSON error files
 *
 * A worker records its error in the file named by ELASTIC_ERROR_FILE /
 * TORCHELASTIC_ERROR_FILE, in either of torchelastic's two shapes:
 *   {"message": {"message": "text", "extraInfo": {"py_callstack": "...",
 *                                                 "timestamp": "1714564800"}}}
 *   {"message": "text", "timestamp": 1714564800}
 */
#ifndef ELASTIC_EXEC_ERRORFILE_H
#define ELASTIC_EXEC_ERRORFILE_H

#include <stddef.h>

struct error_record {
    char *message;    /* malloc'ed */
    char *traceback;  /* malloc'ed, NULL if none */
    double timestamp; /* epoch seconds, 0 if the file has none */
};

/* Read path.  Returns 0 with *rec filled, or -1 with errno (ENOENT: no file,
 * EPROTO: not a torchelastic error file; then rec->message says why). */
int errorfile_read (const char *path, struct error_record *rec);

/* Free the strings of rec. */
void errorfile_clear (struct error_record *rec);

/* Write a torchelastic error file (temporary name, then rename), so an
 * enclosing agent can report our root cause.  Returns 0 or -1 with errno. */
int errorfile_write (const char *path, const char *message, double timestamp);

#endif /* ELASTIC_EXEC_ERRORFILE_H */
