/* elastic.h - the public interface of libelastic
 *
 * libelastic keeps an MPI application running through process failures
 * (in-place recovery with ULFM), job loss and preemption (snapshots).
 *
 * Error contract (every function, unless its comment says otherwise):
 *   - functions returning int return ELASTIC_OK (0) on success and one of
 *     the ELASTIC_ERR_* codes below on failure; elastic_strerror() names it;
 *   - functions returning a pointer return NULL on failure;
 *   - where an `elastic_error_t *` out-parameter is taken (it may be NULL),
 *     its text says what was wrong, which value, and what is accepted;
 *   - the library never aborts the process and never prints unless asked
 *     (ELASTIC_LOG=error|warn|info|debug; default warn, to stderr).
 *
 * Only symbols prefixed elastic_ / ELASTIC_ are part of the interface.
 */
#ifndef ELASTIC_H
#define ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include <elastic/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes.  Values are fixed forever: they may be stored and compared. */
enum {
    ELASTIC_OK = 0,
    ELASTIC_ERR_INVAL = 1,       /* invalid argument or configuration value */
    ELASTIC_ERR_NOMEM = 2,       /* out of memory */
    ELASTIC_ERR_MPI = 3,         /* an MPI call failed with a non-elastic error */
    ELASTIC_ERR_RELAUNCH = 4,    /* in-place recovery impossible: relaunch needed */
    ELASTIC_ERR_NO_ULFM = 5,     /* the MPI library has no ULFM (relaunch-only mode) */
    ELASTIC_ERR_IO = 6,          /* file system error */
    ELASTIC_ERR_CORRUPT = 7,     /* snapshot data failed verification */
    ELASTIC_ERR_NO_SNAPSHOT = 8, /* no usable snapshot */
    ELASTIC_ERR_EXISTS = 9,      /* a name is already registered */
    ELASTIC_ERR_NOT_FOUND = 10,  /* no such name, rank or item */
    ELASTIC_ERR_STATE = 11,      /* call not valid in the current state */
    ELASTIC_ERR_UNSUPPORTED = 12 /* feature not built in */
};

/* Process exit codes a launcher acts on (elastic-exec, elastic-mpirun). */
#define ELASTIC_EXIT_SUSPENDED 75 /* suspended to a snapshot: rerun to resume */
#define ELASTIC_EXIT_RELAUNCH  76 /* in-place recovery impossible: relaunch */

/* A place for an error message.  Functions that take one fill it on error. */
typedef struct {
    char text[256];
} elastic_error_t;

/* Return the version string and, where the pointers are non-NULL, the
 * components.  Never fails. */
const char *elastic_version (int *major, int *minor, int *patch);

/* Return a static, human-readable name for an ELASTIC_* code ("unknown
 * error code" for values outside the enum).  Never fails. */
const char *elastic_strerror (int code);

/* Supervisor link (elastic-exec, or torchrun for the error file).
 * Each is a no-op returning ELASTIC_OK when the process is not supervised. */

/* Report that this process reached `step` (feeds elastic-exec's
 * --hang-timeout and /metrics through ELASTIC_HEARTBEAT_FILE). */
int elastic_progress (int64_t step);

/* Report that the snapshot of `step` completed (shown in /metrics). */
int elastic_progress_snapshot (int64_t step);

/* Record an error message (printf format) in torchelastic's JSON error-file
 * format at ELASTIC_ERROR_FILE (or TORCHELASTIC_ERROR_FILE), so the agent's
 * failure report shows it.  Returns ELASTIC_ERR_IO if the file cannot be
 * written. */
int elastic_record_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_H */
