/* eventlog.c - the agent's JSON-lines event log */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eventlog.h"
#include "util.h"

struct eventlog {
    int fd;
    char *run_id;
    char *role;
    pthread_mutex_t lock;
};

struct eventlog *eventlog_open (const char *path, const char *run_id, const char *role)
{
    struct eventlog *ev;

    if (!(ev = calloc (1, sizeof (*ev))))
        return NULL;
    ev->fd = -1;
    pthread_mutex_init (&ev->lock, NULL);
    if (!(ev->run_id = strdup (run_id ? run_id : "")) ||
        !(ev->role = strdup (role ? role : "")))
        goto error;
    if ((ev->fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
        goto error;
    return ev;
error:
    eventlog_close (ev);
    return NULL;
}

void eventlog_close (struct eventlog *ev)
{
    int saved = errno;

    if (ev) {
        if (ev->fd >= 0)
            close (ev->fd);
        pthread_mutex_destroy (&ev->lock);
        free (ev->run_id);
        free (ev->role);
        free (ev);
    }
    errno = saved;
}

void eventlog_set_run_id (struct eventlog *ev, const char *run_id)
{
    char *copy;

    if (!ev || !run_id || !(copy = strdup (run_id)))
        return;
    pthread_mutex_lock (&ev->lock);
    free (ev->run_id);
    ev->run_id = copy;
    pthread_mutex_unlock (&ev->lock);
}

int eventlog_emit (struct eventlog *ev, const char *name, json_t *obj)
{
    char when[64];
    json_t *line;
    char *text = NULL;
    double now;
    int rc = -1;

    if (!ev) {
        json_decref (obj);
        return 0;
    }
    now = wall_now ();
    format_iso_time (now, when, sizeof (when));
    pthread_mutex_lock (&ev->lock);
    line = json_pack ("{s:f s:s s:s s:s s:s s:s s:i}",
                      "ts",
                      now,
                      "time",
                      when,
                      "event",
                      name,
                      "run_id",
                      ev->run_id,
                      "role",
                      ev->role,
                      "host",
                      host_name (),
                      "agent_pid",
                      (int)getpid ());
    if (!line)
        goto out;
    if (obj && json_object_update (line, obj) < 0)
        goto out;
    if (!(text = json_dumps (line, JSON_COMPACT | JSON_REAL_PRECISION (16))))
        goto out;
    size_t len = strlen (text);
    char *buf = realloc (text, len + 2);
    if (!buf)
        goto out;
    text = buf;
    text[len] = '\n';
    rc = write_all (ev->fd, text, len + 1);
out:
    pthread_mutex_unlock (&ev->lock);
    free (text);
    json_decref (line);
    json_decref (obj);
    return rc;
}
