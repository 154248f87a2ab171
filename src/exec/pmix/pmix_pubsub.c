/* pmix_pubsub.c - what the hosted PMIx server keeps for PMIx_Publish and
 * PMIx_Lookup
 *
 * Open MPI's MPI_Comm_spawn and MPI_Comm_connect/accept meet through
 * published keys: each root publishes its side's members under
 * "<port>:accept" or "<port>:connect" (PMIX_PERSIST_FIRST_READ) and looks up
 * the other's with PMIX_WAIT and a PMIX_TIMEOUT.  One node hosts one
 * session, so ranges are not told apart.  In a mesh, what a rank
 * publishes is handed to every other member's server too (the transport's
 * publish: a spawn's children and their parents' root may be on
 * different nodes), where pmixhost_publish_peer stores it; a first read
 * removes only the reader's server's copy.  These functions run in PMIx's
 * progress thread (the upcalls) and in the caller's (pmixhost_expire, a
 * a dead rank): records change under the server's mutex,
 * and PMIx is called back only after it is released.  Nothing blocks.
 * Keys are PMIx's (at most PMIX_MAX_KEYLEN characters, "" allowed); info
 * keys that start with "pmix." are directives, never data.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>
#include <pmix_server.h>

#include "pmix_host.h"
#include "pmix_host_impl.h"
#include "pmix_transport.h"

/* At most this many values are kept (a misbehaving client cannot eat the
 * agent's memory). */
#define PUBS_MAX 4096

/* A lookup answer, made once the lock is released. */
struct answer {
    struct answer *next;
    pmix_lookup_cbfunc_t cbfunc;
    void *cbdata;
    pmix_status_t status;
    pmix_pdata_t *pd;
    size_t n;
};

static int is_directive (const char *key)
{
    return strncmp (key, "pmix.", 5) == 0;
}

static struct pub_item *find_item (struct pmixhost *h, const char *key)
{
    for (struct pub_item *p = h->pubs; p; p = p->next)
        if (strcmp (p->key, key) == 0)
            return p;
    return NULL;
}

static void item_free (struct pub_item *p)
{
    if (p->value)
        PMIX_VALUE_RELEASE (p->value);
    free (p);
}

static void unlink_item (struct pmixhost *h, struct pub_item *victim)
{
    for (struct pub_item **pp = &h->pubs; *pp; pp = &(*pp)->next) {
        if (*pp == victim) {
            *pp = victim->next;
            h->npubs--;
            item_free (victim);
            return;
        }
    }
}

/* A spawned process published (its side of the connect): its spawn
 * joined, and PMIx_Spawn is answered now (lock held; the answer is made
 * by the caller once it is released). */
static struct pmixhost_spawn *note_join (struct pmixhost *h, const pmix_proc_t *owner)
{
    struct pmixhost_job *job = pmixhost_find_job (h, owner->nspace);
    struct pmixhost_spawn *sp = job ? job->spawned_by : NULL;

    if (!sp || sp->state != PMIXHOST_SPAWN_PENDING)
        return NULL;
    sp->state = PMIXHOST_SPAWN_JOINED;
    pmixhost_push_spawn_event (h, job, PMIXHOST_EV_SPAWN_JOINED, sp);
    return sp;
}

/* If every key is published, take their values into a new answer (lock
 * held).  NULL if some key is missing or memory ran out (*nomem). */
static struct answer *try_answer (struct pmixhost *h, char **keys, int *nomem)
{
    struct answer *a;
    size_t n = 0;

    *nomem = 0;
    for (; keys && keys[n]; n++)
        if (!find_item (h, keys[n]))
            return NULL;
    if (n == 0 || !(a = calloc (1, sizeof (*a)))) {
        *nomem = n > 0;
        return NULL;
    }
    PMIX_PDATA_CREATE (a->pd, n);
    if (!a->pd) {
        free (a);
        *nomem = 1;
        return NULL;
    }
    a->n = n;
    for (size_t i = 0; i < n; i++) {
        struct pub_item *p = find_item (h, keys[i]);
        if (!p)
            continue; /* a key asked twice, read once (first read) */
        PMIX_PROC_LOAD (&a->pd[i].proc, p->owner.nspace, p->owner.rank);
        PMIX_LOAD_KEY (a->pd[i].key, p->key);
        PMIx_Value_xfer (&a->pd[i].value, p->value);
        if (p->first_read)
            unlink_item (h, p);
    }
    a->status = PMIX_SUCCESS;
    return a;
}

static void deliver (struct answer *a)
{
    while (a) {
        struct answer *next = a->next;
        a->cbfunc (a->status, a->pd, a->n, a->cbdata);
        if (a->pd)
            PMIX_PDATA_FREE (a->pd, a->n);
        free (a);
        a = next;
    }
}

static void wait_free (struct lookup_wait *w)
{
    for (size_t i = 0; w->keys && w->keys[i]; i++)
        free (w->keys[i]);
    free (w->keys);
    free (w);
}

/* An answer that fails w (taken off the list by the caller). */
static struct answer *fail_answer (struct lookup_wait *w, pmix_status_t status)
{
    struct answer *a = calloc (1, sizeof (*a));

    if (a) {
        a->cbfunc = w->cbfunc;
        a->cbdata = w->cbdata;
        a->status = status;
    } else
        w->cbfunc (status, NULL, 0, w->cbdata); /* out of memory: now */
    wait_free (w);
    return a;
}

/* Answer the waiting lookups that can be (lock held); returns them. */
static struct answer *scan_waits (struct pmixhost *h)
{
    struct answer *out = NULL, *a;
    struct lookup_wait **pp = &h->waits, *w;
    int nomem;

    while ((w = *pp)) {
        if ((a = try_answer (h, w->keys, &nomem)) || nomem) {
            *pp = w->next;
            if (!a) {
                a = fail_answer (w, PMIX_ERR_NOMEM);
            } else {
                a->cbfunc = w->cbfunc;
                a->cbdata = w->cbdata;
                wait_free (w);
            }
            if (a) {
                a->next = out;
                out = a;
            }
        } else
            pp = &w->next;
    }
    return out;
}

static pmix_status_t publish (struct pmixhost *h,
                              const pmix_proc_t *proc,
                              const pmix_info_t info[],
                              size_t ninfo,
                              int forward)
{
    int first_read = 0;
    size_t ndata = 0;
    struct answer *ans;
    struct pmixhost_spawn *joined;
    pmix_status_t rc = PMIX_SUCCESS;

    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY (&info[i], PMIX_PERSISTENCE) &&
            info[i].value.type == PMIX_PERSIST)
            first_read = info[i].value.data.persist == PMIX_PERSIST_FIRST_READ;
        else if (!is_directive (info[i].key))
            ndata++;
    }
    if (ndata == 0)
        return PMIX_ERR_BAD_PARAM;
    pthread_mutex_lock (&h->lock);
    if (h->npubs + (int)ndata > PUBS_MAX)
        rc = PMIX_ERR_OUT_OF_RESOURCE;
    for (size_t i = 0; i < ninfo && rc == PMIX_SUCCESS; i++)
        if (!is_directive (info[i].key) && find_item (h, info[i].key))
            rc = PMIX_ERR_DUPLICATE_KEY;
    for (size_t i = 0; i < ninfo && rc == PMIX_SUCCESS; i++) {
        struct pub_item *p;
        if (is_directive (info[i].key))
            continue;
        if (!(p = calloc (1, sizeof (*p)))) {
            rc = PMIX_ERR_NOMEM;
            break;
        }
        PMIX_LOAD_KEY (p->key, info[i].key);
        PMIX_PROC_LOAD (&p->owner, proc->nspace, proc->rank);
        p->first_read = first_read;
        PMIX_VALUE_CREATE (p->value, 1);
        if (!p->value ||
            PMIx_Value_xfer (p->value, (pmix_value_t *)&info[i].value) != PMIX_SUCCESS) {
            item_free (p);
            rc = PMIX_ERR_NOMEM;
            break;
        }
        p->next = h->pubs;
        h->pubs = p;
        h->npubs++;
    }
    joined = rc == PMIX_SUCCESS ? note_join (h, proc) : NULL;
    ans = scan_waits (h);
    pthread_mutex_unlock (&h->lock);
    if (joined)
        pmixhost_spawn_answer (joined, PMIX_SUCCESS);
    deliver (ans);
    if (rc == PMIX_SUCCESS && forward && h->tp && h->tp->publish)
        h->tp->publish (h->tp_ctx, proc, info, ninfo);
    return rc;
}

pmix_status_t pmixhost_publish (struct pmixhost *h,
                                const pmix_proc_t *proc,
                                const pmix_info_t info[],
                                size_t ninfo)
{
    return publish (h, proc, info, ninfo, 1);
}

pmix_status_t
pmixhost_publish_peer (const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_ERR_INIT;
    rc = publish (h, proc, info, ninfo, 0);
    pmixhost_put (h);
    return rc;
}

/* An integer info value (PMIX_TIMEOUT comes as int or uint32). */
static long info_long (const pmix_info_t *in)
{
    switch (in->value.type) {
        case PMIX_INT:
            return in->value.data.integer;
        case PMIX_UINT32:
            return (long)in->value.data.uint32;
        case PMIX_INT32:
            return in->value.data.int32;
        case PMIX_UINT:
            return (long)in->value.data.uint;
        case PMIX_SIZE:
            return (long)in->value.data.size;
        default:
            return 0;
    }
}

pmix_status_t pmixhost_lookup (struct pmixhost *h,
                               const pmix_proc_t *proc,
                               char **keys,
                               const pmix_info_t info[],
                               size_t ninfo,
                               pmix_lookup_cbfunc_t cbfunc,
                               void *cbdata)
{
    struct answer *a;
    struct lookup_wait *w;
    int wait = 0, nomem;
    long timeout = 0;
    size_t n = 0;

    if (!cbfunc || !keys || !keys[0])
        return PMIX_ERR_BAD_PARAM;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY (&info[i], PMIX_WAIT))
            wait = info[i].value.type != PMIX_BOOL || info[i].value.data.flag;
        else if (PMIX_CHECK_KEY (&info[i], PMIX_TIMEOUT))
            timeout = info_long (&info[i]);
    }
    pthread_mutex_lock (&h->lock);
    if ((a = try_answer (h, keys, &nomem))) {
        pthread_mutex_unlock (&h->lock);
        a->cbfunc = cbfunc;
        a->cbdata = cbdata;
        deliver (a);
        return PMIX_SUCCESS;
    }
    if (nomem || !wait) {
        pthread_mutex_unlock (&h->lock);
        return nomem ? PMIX_ERR_NOMEM : PMIX_ERR_NOT_FOUND;
    }
    while (keys[n])
        n++;
    if (!(w = calloc (1, sizeof (*w))) || !(w->keys = calloc (n + 1, sizeof (char *)))) {
        free (w);
        pthread_mutex_unlock (&h->lock);
        return PMIX_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(w->keys[i] = strdup (keys[i]))) {
            wait_free (w);
            pthread_mutex_unlock (&h->lock);
            return PMIX_ERR_NOMEM;
        }
    }
    PMIX_PROC_LOAD (&w->proc, proc->nspace, proc->rank);
    w->deadline = timeout > 0 ? pmixhost_now () + (double)timeout : 0;
    w->cbfunc = cbfunc;
    w->cbdata = cbdata;
    w->next = h->waits;
    h->waits = w;
    pthread_mutex_unlock (&h->lock);
    return PMIX_SUCCESS;
}

pmix_status_t
pmixhost_unpublish (struct pmixhost *h, const pmix_proc_t *proc, char **keys)
{
    pthread_mutex_lock (&h->lock);
    for (struct pub_item **pp = &h->pubs, *p; (p = *pp);) {
        int match = PMIX_CHECK_PROCID (&p->owner, proc);
        if (match && keys && keys[0]) {
            match = 0;
            for (size_t i = 0; keys[i] && !match; i++)
                match = strcmp (keys[i], p->key) == 0;
        }
        if (match) {
            *pp = p->next;
            h->npubs--;
            item_free (p);
        } else
            pp = &p->next;
    }
    pthread_mutex_unlock (&h->lock);
    return PMIX_SUCCESS;
}

void pubsub_forget (struct pmixhost *h,
                    const pmix_proc_t *proc,
                    pmix_status_t status,
                    int drop)
{
    struct answer *out = NULL, *a;

    pthread_mutex_lock (&h->lock);
    for (struct lookup_wait **pp = &h->waits, *w; (w = *pp);) {
        if (PMIX_CHECK_PROCID (&w->proc, proc)) {
            *pp = w->next;
            if ((a = fail_answer (w, status))) {
                a->next = out;
                out = a;
            }
        } else
            pp = &w->next;
    }
    for (struct pub_item **pp = &h->pubs, *p; drop && (p = *pp);) {
        if (PMIX_CHECK_PROCID (&p->owner, proc)) {
            *pp = p->next;
            h->npubs--;
            item_free (p);
        } else
            pp = &p->next;
    }
    pthread_mutex_unlock (&h->lock);
    deliver (out);
}

double pmixhost_expire (struct pmixhost *h)
{
    struct answer *out = NULL, *a;
    double now = pmixhost_now (), next = -1;

    pthread_mutex_lock (&h->lock);
    for (struct lookup_wait **pp = &h->waits, *w; (w = *pp);) {
        if (w->deadline > 0 && w->deadline <= now) {
            *pp = w->next;
            if ((a = fail_answer (w, PMIX_ERR_TIMEOUT))) {
                a->next = out;
                out = a;
            }
            continue;
        }
        if (w->deadline > 0 && (next < 0 || w->deadline - now < next))
            next = w->deadline - now;
        pp = &w->next;
    }
    pthread_mutex_unlock (&h->lock);
    deliver (out);
    return next;
}

void pubsub_free_all (struct pmixhost *h)
{
    while (h->pubs) {
        struct pub_item *p = h->pubs;
        h->pubs = p->next;
        item_free (p);
    }
    h->npubs = 0;
    while (h->waits) {
        struct lookup_wait *w = h->waits;
        h->waits = w->next;
        wait_free (w);
    }
}
