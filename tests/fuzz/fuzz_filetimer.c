/* fuzz_filetimer.c - torchelastic's file-timer requests, as elastic-exec's
 * watchdog reads them from its FIFO (src/exec/filetimer.c)
 *
 * Input: the bytes workers write into the FIFO.  A fresh FIFO is created
 * per input and the bytes are written into it in pieces of up to 1000
 * bytes (so that requests are split across reads), each followed by the
 * agent's read; then the timers are expired as the loop does, and the
 * rest forgotten.  Only timers are recorded: nothing is signalled here
 * (the agent's watchdog does that with the pids it knows).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "filetimer.h"
#include "fuzz.h"

static char dir[64], path[96];

static void cleanup (void)
{
    unlink (path);
    rmdir (dir);
}

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    snprintf (dir,
              sizeof (dir),
              "%s/fuzz_filetimer.XXXXXX",
              access ("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp (dir))
        abort ();
    snprintf (path, sizeof (path), "%s/timer", dir);
    log_init ("fuzz_filetimer", LOG_ERROR); /* every dropped line warns */
    atexit (cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct filetimer_expired ex[8];
    struct filetimer *ft;
    elastic_error_t err;
    size_t off = 0;
    double next;
    int w;

    if (!(ft = filetimer_create (path, &err)))
        abort ();
    if ((w = open (path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
        abort ();
    while (off < size) {
        size_t n = size - off < 1000 ? size - off : 1000;
        ssize_t k = write (w, data + off, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        off += (size_t)k;
        filetimer_read (ft);
    }
    filetimer_read (ft);
    close (w);
    if ((next = filetimer_next (ft)) > 0)
        filetimer_expire (ft, next, ex, 8);
    if (filetimer_count (ft) > 0)
        filetimer_clear_pid (ft, 1);
    filetimer_clear (ft);
    filetimer_destroy (ft);
    return 0;
}
