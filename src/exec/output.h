/* output.h - a worker's stdout or stderr, routed line by line
 *
 * For one stream of one worker the local backend decides a route (see
 * output_plan): inherit the agent's descriptor, /dev/null, a log file the
 * worker writes itself, or a pipe the agent reads.  Through a pipe each
 * line goes raw to the log file (--redirects/--tee), with the prefix to
 * the console (--tee, --log-line-prefix-template, --local-ranks-filter),
 * and, if it contains a --duplicate-*-filters string, with the prefix to
 * the attempt's filtered log.
 */
#ifndef ELASTIC_EXEC_OUTPUT_H
#define ELASTIC_EXEC_OUTPUT_H

#include <stddef.h>

enum output_mode {
    OUTPUT_INHERIT, /* the worker writes to the agent's own descriptor */
    OUTPUT_NULL,    /* /dev/null */
    OUTPUT_FILE,    /* the worker writes the log file directly */
    OUTPUT_PIPE     /* the agent reads and routes lines */
};

struct output_plan {
    enum output_mode mode;
    int want_file;    /* keep a raw log file */
    int console_fd;   /* 1, 2, or -1 */
    int want_dup;     /* copy matching lines to the filtered log */
    char prefix[256]; /* for console and filtered lines */
};

struct ostream;

/* Start routing: rfd is the pipe's read end (owned from now on), file_fd
 * the raw log (owned, -1 if none), dup_fd the shared filtered log
 * (borrowed, -1 if none), filters borrowed.  Returns NULL with errno. */
struct ostream *ostream_create (int rfd,
                                int file_fd,
                                int console_fd,
                                int dup_fd,
                                char *const *filters,
                                int nfilters,
                                const char *prefix);

/* Read what is available (at most `budget` buffers of 64 KiB, 0: no
 * limit, so a chatty worker cannot starve the agent's loop) and route
 * complete lines.  Returns 1 while the pipe is open, 0 at end of file, -1
 * on a read error. */
int ostream_read (struct ostream *s, int budget);

/* Route a last partial line (a newline is added on the console and in the
 * filtered log) and free everything (NULL-safe). */
void ostream_destroy (struct ostream *s);

/* The pipe's read end. */
int ostream_fd (struct ostream *s);

/* A pseudo-terminal for a worker's stdout, so that its C library
 * line-buffers it as on a terminal (mpirun gives its ranks one too) and
 * the lines written before a crash are not lost in a stdio buffer: *master
 * (non-blocking, close-on-exec) is read like a pipe (ostream_read sees the
 * end as EIO), *slave goes to the worker.  Raw mode: bytes pass unchanged.
 * Returns -1 with errno. */
int output_pty (int *master, int *slave);

#endif /* ELASTIC_EXEC_OUTPUT_H */
