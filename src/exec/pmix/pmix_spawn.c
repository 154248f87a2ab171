/* pmix_spawn.c - PMIx_Spawn requests (MPI_Comm_spawn) in the hosted server
 *
 * The upcall (PMIx's thread) copies the request, queues it for the
 * caller's loop and returns; the caller decides (capacity), registers the
 * children's namespace and starts them (pmixhost_spawn_launched), or
 * refuses (pmixhost_spawn_refuse).  PMIx_Spawn is answered only once a
 * child published its side of the connect (pmix_pubsub.c: note_join): a
 * child that dies before, or a spawn out of time, is answered with an
 * error (pmixhost_spawn_fail), which Open MPI hands to every parent of the
 * MPI_Comm_spawn (its root alone would learn of a failed lookup, and the
 * others would wait in a broadcast for ever).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>
#include <pmix_server.h>

#include "pmix_host.h"
#include "pmix_host_impl.h"

static void strv_free (char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free (v[i]);
    free (v);
}

/* A NULL-terminated copy of v (NULL stays NULL); -1 on out of memory. */
static int strv_copy (char **v, char ***out)
{
    size_t n = 0;

    *out = NULL;
    if (!v)
        return 0;
    while (v[n])
        n++;
    if (!(*out = calloc (n + 1, sizeof (char *))))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!((*out)[i] = strdup (v[i])))
            return -1;
    return 0;
}

/* The request's argv: the app's argv, with its command first when the
 * app's argv does not start with it (PMIx: argv[0] may be omitted). */
static int copy_argv (const pmix_app_t *app, struct pmixhost_spawn_req *r)
{
    size_t n = 0, k = 0;
    int lead;

    while (app->argv && app->argv[n])
        n++;
    lead = app->cmd && app->cmd[0] && (n == 0 || strcmp (app->argv[0], app->cmd) != 0);
    if (!lead && n == 0)
        return -1;
    if (!(r->argv = calloc (n + 2, sizeof (char *))))
        return -1;
    if (lead && !(r->argv[k++] = strdup (app->cmd)))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(r->argv[k++] = strdup (app->argv[i])))
            return -1;
    return 0;
}

static const char *info_string (const pmix_info_t info[], size_t ninfo, const char *key)
{
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY (&info[i], key) && info[i].value.type == PMIX_STRING)
            return info[i].value.data.string;
    return NULL;
}

pmix_status_t pmixhost_spawn_new (struct pmixhost *h,
                                  const pmix_proc_t *proc,
                                  const pmix_info_t job_info[],
                                  size_t ninfo,
                                  const pmix_app_t apps[],
                                  size_t napps,
                                  pmix_spawn_cbfunc_t cbfunc,
                                  void *cbdata)
{
    struct pmixhost_spawn *sp;
    struct pmixhost_job *job;
    struct rank_state *rs;
    const char *wdir;
    long total = 0;

    if (!cbfunc || napps == 0 || !apps)
        return PMIX_ERR_BAD_PARAM;
    for (size_t a = 0; a < napps; a++)
        total += apps[a].maxprocs;
    if (total < 1 || total > 65535)
        return PMIX_ERR_BAD_PARAM;
    if (!(sp = calloc (1, sizeof (*sp))))
        return PMIX_ERR_NOMEM;
    sp->h = h;
    PMIX_PROC_LOAD (&sp->requestor, proc->nspace, proc->rank);
    snprintf (sp->req.requestor,
              sizeof (sp->req.requestor),
              "%s:%u",
              proc->nspace,
              (unsigned)proc->rank);
    sp->req.nprocs = (int)total;
    sp->req.parent_rank = (int)proc->rank;
    /* one program for every child (the first app's): elastic-exec starts
     * the processes of one MPI_Comm_spawn, not of MPI_Comm_spawn_multiple's
     * different programs */
    wdir = info_string (apps[0].info, apps[0].ninfo, PMIX_WDIR);
    if (!wdir)
        wdir = info_string (job_info, ninfo, PMIX_WDIR);
    if (!wdir && apps[0].cwd && apps[0].cwd[0])
        wdir = apps[0].cwd;
    if (copy_argv (&apps[0], &sp->req) < 0 || strv_copy (apps[0].env, &sp->req.env) < 0 ||
        (wdir && !(sp->req.wdir = strdup (wdir)))) {
        sp->state = PMIXHOST_SPAWN_FAILED;
        pmixhost_spawn_release (sp);
        return PMIX_ERR_NOMEM;
    }
    for (size_t a = 1; a < napps; a++) {
        if (!apps[a].cmd || !apps[0].cmd || strcmp (apps[a].cmd, apps[0].cmd) != 0) {
            pmixhost_spawn_release (sp);
            return PMIX_ERR_NOT_SUPPORTED;
        }
    }
    sp->cbfunc = cbfunc;
    sp->cbdata = cbdata;
    pthread_mutex_lock (&h->lock);
    if (!(rs = pmixhost_find_rank (h, proc, &job)) || job->stopping || job->aborting) {
        pthread_mutex_unlock (&h->lock);
        sp->cbfunc = NULL;
        pmixhost_spawn_release (sp);
        return PMIX_ERR_NOT_SUPPORTED;
    }
    sp->req.parent = job;
    sp->next = h->spawns;
    h->spawns = sp;
    pmixhost_push_spawn_event (h, job, PMIXHOST_EV_SPAWN, sp);
    pthread_mutex_unlock (&h->lock);
    return PMIX_SUCCESS;
}

const struct pmixhost_spawn_req *pmixhost_spawn_request (struct pmixhost_spawn *sp)
{
    return &sp->req;
}

int pmixhost_spawn_state (struct pmixhost_spawn *sp)
{
    int st;

    pthread_mutex_lock (&sp->h->lock);
    st = sp->state;
    pthread_mutex_unlock (&sp->h->lock);
    return st;
}

/* Take the callback (it is answered once), moving to state.  NULL if it
 * was answered. */
static pmix_spawn_cbfunc_t
take_answer (struct pmixhost_spawn *sp, void **cbdata, int state)
{
    pmix_spawn_cbfunc_t cb;

    pthread_mutex_lock (&sp->h->lock);
    cb = sp->cbfunc;
    *cbdata = sp->cbdata;
    sp->cbfunc = NULL;
    if (cb || state == PMIXHOST_SPAWN_FAILED)
        sp->state = state;
    pthread_mutex_unlock (&sp->h->lock);
    return cb;
}

void pmixhost_spawn_answer (struct pmixhost_spawn *sp, pmix_status_t status)
{
    void *cbdata;
    pmix_spawn_cbfunc_t cb;
    char nspace[PMIX_MAX_NSLEN + 1] = "";

    pthread_mutex_lock (&sp->h->lock);
    cb = sp->cbfunc;
    cbdata = sp->cbdata;
    sp->cbfunc = NULL;
    if (sp->child)
        PMIX_LOAD_NSPACE (nspace, sp->child->nspace);
    pthread_mutex_unlock (&sp->h->lock);
    if (cb)
        cb (status, status == PMIX_SUCCESS ? nspace : NULL, cbdata);
}

int pmixhost_spawn_refuse (struct pmixhost_spawn *sp, int no_resource)
{
    void *cbdata;
    pmix_spawn_cbfunc_t cb;

    if (pmixhost_spawn_state (sp) != PMIXHOST_SPAWN_NEW ||
        !(cb = take_answer (sp, &cbdata, PMIXHOST_SPAWN_FAILED))) {
        errno = EINVAL;
        return -1;
    }
    cb (no_resource ? PMIX_ERR_OUT_OF_RESOURCE : PMIX_ERR_NOT_SUPPORTED, NULL, cbdata);
    return 0;
}

int pmixhost_spawn_launched (struct pmixhost_spawn *sp, struct pmixhost_job *child)
{
    int ok;

    if (!child || child->spawned_by != sp) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock (&sp->h->lock);
    if ((ok = sp->state == PMIXHOST_SPAWN_NEW)) {
        sp->child = child;
        sp->state = PMIXHOST_SPAWN_PENDING;
    }
    pthread_mutex_unlock (&sp->h->lock);
    if (!ok) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

void pmixhost_spawn_fail (struct pmixhost_spawn *sp, int timed_out)
{
    pmix_status_t st = timed_out ? PMIX_ERR_TIMEOUT : PMIX_ERR_LOST_CONNECTION;
    void *cbdata;
    pmix_spawn_cbfunc_t cb;
    int state = pmixhost_spawn_state (sp);

    if (state != PMIXHOST_SPAWN_PENDING && state != PMIXHOST_SPAWN_NEW)
        return;
    if ((cb = take_answer (sp, &cbdata, PMIXHOST_SPAWN_FAILED)))
        cb (st, NULL, cbdata);
    /* whatever the requestor already waits for from them fails too */
    pubsub_forget (sp->h, &sp->requestor, st, 0);
}

void pmixhost_spawn_release (struct pmixhost_spawn *sp)
{
    struct pmixhost *h;

    if (!sp)
        return;
    h = sp->h;
    if (sp->cbfunc)
        pmixhost_spawn_fail (sp, 0); /* never left unanswered */
    pthread_mutex_lock (&h->lock);
    for (struct pmixhost_spawn **pp = &h->spawns; *pp; pp = &(*pp)->next) {
        if (*pp == sp) {
            *pp = sp->next;
            break;
        }
    }
    for (struct pmixhost_job *j = h->jobs; j; j = j->next)
        if (j->spawned_by == sp)
            j->spawned_by = NULL;
    for (struct event_item *it = h->head; it; it = it->next)
        if (it->ev.spawn == sp)
            it->ev.spawn = NULL;
    pthread_mutex_unlock (&h->lock);
    strv_free (sp->req.argv);
    strv_free (sp->req.env);
    free (sp->req.wdir);
    free (sp);
}
