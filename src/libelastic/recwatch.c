/* recwatch.c - a recovery that does not end in time ends the process */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "event.h"
#include "log.h"
#include "manager.h"
#include "recwatch.h"

#define RECWATCH_DEFAULT 600.0

struct recwatch {
    struct elastic_manager *m;
    double limit; /* seconds, 0: none */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t tid;
    int started; /* the thread runs */
    int stop;
    int armed;
    double t_arm;      /* mono_now () when armed */
    const char *phase; /* a literal */
    int64_t step;
    int size;
};

int recwatch_create (struct elastic_manager *m,
                     struct recwatch **out,
                     elastic_error_t *err)
{
    const char *s = getenv ("ELASTIC_RECOVERY_TIMEOUT");
    double limit = RECWATCH_DEFAULT;
    struct recwatch *w;

    *out = NULL;
    if (s) {
        char *end;
        errno = 0;
        limit = strtod (s, &end);
        if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite (limit) || limit < 0 ||
            limit > 1e9)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "ELASTIC_RECOVERY_TIMEOUT: '%s' is invalid (expected a "
                             "number of seconds >= 0; 0: no limit)",
                             s);
    }
    if (!(w = calloc (1, sizeof (*w))))
        return errcodef (err, ELASTIC_ERR_NOMEM, "recovery watch: out of memory");
    w->m = m;
    w->limit = limit;
    pthread_mutex_init (&w->lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init (&ca);
        pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
        pthread_cond_init (&w->cond, &ca);
        pthread_condattr_destroy (&ca);
    }
    *out = w;
    return ELASTIC_OK;
}

double recwatch_limit (const struct recwatch *w)
{
    return w ? w->limit : 0;
}

/* The limit passed: say where, leave a line in the event log, and end the
 * process for a relaunch.  Called with w->lock held; never returns. */
static void fire (struct recwatch *w, double waited)
{
    struct elastic_manager *m = w->m;
    char error[300], line[1024];
    struct event_rec e = {
        .kind = "recovery_timeout",
        .step = w->step,
        .old_size = w->size,
        .new_size = w->size,
        .attempts = 0,
        .t_total = waited,
        .error = error,
        .rank = m->me,
    };
    int n;

    snprintf (error,
              sizeof (error),
              "in-place recovery did not end within %.0f s (ELASTIC_RECOVERY_TIMEOUT): "
              "stuck in its %s; exiting with %d for a relaunch from the newest L3 "
              "snapshot",
              w->limit,
              w->phase,
              ELASTIC_EXIT_RELAUNCH);
    el_log (EL_ERROR, "%s", error);
    if ((n = event_format (&e, line, sizeof (line) - 1)) > 0)
        event_append (m, line, n);
    _exit (ELASTIC_EXIT_RELAUNCH);
}

static void *watch_main (void *arg)
{
    struct recwatch *w = arg;

    pthread_mutex_lock (&w->lock);
    while (!w->stop) {
        if (!w->armed) {
            pthread_cond_wait (&w->cond, &w->lock);
            continue;
        }
        double due = w->t_arm + w->limit, now = mono_now ();
        if (now >= due)
            fire (w, now - w->t_arm);
        struct timespec ts;
        ts.tv_sec = (time_t)due;
        ts.tv_nsec = (long)((due - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait (&w->cond, &w->lock, &ts);
    }
    pthread_mutex_unlock (&w->lock);
    return NULL;
}

void recwatch_arm (struct recwatch *w, const char *phase, int64_t step)
{
    if (!w || w->limit <= 0)
        return;
    pthread_mutex_lock (&w->lock);
    if (!w->started) {
        int e = pthread_create (&w->tid, NULL, watch_main, w);
        if (e != 0) {
            pthread_mutex_unlock (&w->lock);
            el_log (EL_WARN,
                    "recovery watch: cannot start its thread (%s); no limit on this "
                    "recovery",
                    strerror (e));
            return;
        }
        w->started = 1;
    }
    w->armed = 1;
    w->t_arm = mono_now ();
    w->phase = phase;
    w->step = step;
    w->size = w->m->nwork;
    pthread_cond_signal (&w->cond);
    pthread_mutex_unlock (&w->lock);
}

void recwatch_phase (struct recwatch *w, const char *phase)
{
    if (!w || !w->started)
        return;
    pthread_mutex_lock (&w->lock);
    w->phase = phase;
    pthread_mutex_unlock (&w->lock);
}

void recwatch_disarm (struct recwatch *w)
{
    if (!w || !w->started)
        return;
    pthread_mutex_lock (&w->lock);
    w->armed = 0;
    pthread_cond_signal (&w->cond);
    pthread_mutex_unlock (&w->lock);
}

void recwatch_destroy (struct recwatch *w)
{
    int saved = errno;

    if (!w)
        return;
    if (w->started) {
        pthread_mutex_lock (&w->lock);
        w->stop = 1;
        pthread_cond_signal (&w->cond);
        pthread_mutex_unlock (&w->lock);
        pthread_join (w->tid, NULL);
    }
    pthread_cond_destroy (&w->cond);
    pthread_mutex_destroy (&w->lock);
    free (w);
    errno = saved;
}
