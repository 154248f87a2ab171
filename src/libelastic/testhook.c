/* testhook.c - failure injection for tests: ELASTIC_TEST_KILL */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "common/error.h"
#include "log.h"
#include "testhook.h"

struct hook {
    int rank;
    int64_t step;
    enum hook_where where;
    int sig; /* SIGKILL, or SIGSTOP (":STOP") */
};

struct testhook {
    struct hook *h;
    int n;
};

void testhook_destroy (struct testhook *h)
{
    int saved = errno;
    if (h) {
        free (h->h);
        free (h);
    }
    errno = saved;
}

static int bad (elastic_error_t *err, const char *entry)
{
    return errcodef (
        err,
        ELASTIC_ERR_INVAL,
        "ELASTIC_TEST_KILL: '%s' is invalid (expected RANK:STEP:WHERE[:STOP] "
        "with WHERE snapshot, recovery, protect, persist, finalize, grow, join or "
        "create, "
        "comma-separated)",
        entry);
}

int testhook_create (const char *spec, struct testhook **out, elastic_error_t *err)
{
    struct testhook *t = NULL;
    char *copy = NULL, *save = NULL, *tok;
    int rc = ELASTIC_ERR_NOMEM;

    *out = NULL;
    if (!spec || *spec == '\0')
        return ELASTIC_OK;
    if (!(t = calloc (1, sizeof (*t))) || !(copy = strdup (spec)))
        goto error;
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        char where[32], sig[8], extra;
        long rank;
        long long step;
        struct hook *nh;
        int colons = 0, n;
        for (const char *c = tok; *c; c++)
            colons += *c == ':';
        if (colons == 2)
            n = sscanf (tok, "%ld:%lld:%31[a-z]%c", &rank, &step, where, &extra) == 3
                    ? 3
                    : -1;
        else if (colons == 3)
            n = sscanf (tok,
                        "%ld:%lld:%31[a-z]:%7[A-Z]%c",
                        &rank,
                        &step,
                        where,
                        sig,
                        &extra) == 4 &&
                        !strcmp (sig, "STOP")
                    ? 4
                    : -1;
        else
            n = -1;
        if (n < 0 || rank < 0 || step < 0) {
            rc = bad (err, tok);
            goto error;
        }
        if (!(nh = realloc (t->h, (t->n + 1) * sizeof (*nh))))
            goto error;
        t->h = nh;
        t->h[t->n].rank = (int)rank;
        t->h[t->n].step = step;
        t->h[t->n].sig = n == 4 ? SIGSTOP : SIGKILL;
        if (!strcmp (where, "snapshot"))
            t->h[t->n].where = HOOK_SNAPSHOT;
        else if (!strcmp (where, "recovery"))
            t->h[t->n].where = HOOK_RECOVERY;
        else if (!strcmp (where, "protect"))
            t->h[t->n].where = HOOK_PROTECT;
        else if (!strcmp (where, "persist"))
            t->h[t->n].where = HOOK_PERSIST;
        else if (!strcmp (where, "finalize"))
            t->h[t->n].where = HOOK_FINALIZE;
        else if (!strcmp (where, "grow"))
            t->h[t->n].where = HOOK_GROW;
        else if (!strcmp (where, "join"))
            t->h[t->n].where = HOOK_JOIN;
        else if (!strcmp (where, "create"))
            t->h[t->n].where = HOOK_CREATE;
        else {
            rc = bad (err, tok);
            goto error;
        }
        t->n++;
    }
    free (copy);
    *out = t;
    return ELASTIC_OK;
error:
    if (rc == ELASTIC_ERR_NOMEM)
        errprintf (err, "ELASTIC_TEST_KILL: out of memory");
    free (copy);
    testhook_destroy (t);
    return rc;
}

static const char *const where_names[] = {
    "snapshot", "recovery", "protect", "persist", "finalize", "grow", "join", "create"};

static void kill_myself (const char *where, int64_t step, int sig)
{
    el_log (EL_INFO,
            "ELASTIC_TEST_KILL: %s myself (pid %d) in %s at step %lld",
            sig == SIGSTOP ? "stopping" : "killing",
            (int)getpid (),
            where,
            (long long)step);
    kill (getpid (), sig);
    for (;;)
        pause ();
}

static const struct hook *
armed (struct testhook *h, int rank, int64_t step, enum hook_where where)
{
    for (int i = 0; h && i < h->n; i++) {
        const struct hook *k = &h->h[i];
        int exact = where == HOOK_SNAPSHOT || where == HOOK_PERSIST;
        if (k->rank == rank && k->where == where &&
            ((exact && step == k->step) || (!exact && step >= k->step)))
            return k;
    }
    return NULL;
}

void testhook_check (struct testhook *h, int rank, int64_t step, enum hook_where where)
{
    const struct hook *k = armed (h, rank, step, where);
    if (k)
        kill_myself (where_names[where], step, k->sig);
}

static int64_t finalize_step;
static int finalize_sig = SIGKILL; /* SIGSTOP: RANK:STEP:finalize:STOP */

/* MPI_COMM_SELF's attributes are deleted first thing in MPI_Finalize. */
static int finalize_cb (MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm;
    (void)key;
    (void)val;
    (void)extra;
    kill_myself ("MPI_Finalize", finalize_step, finalize_sig);
    return MPI_SUCCESS;
}

void testhook_arm_finalize (struct testhook *h, int rank, int64_t step)
{
    const struct hook *k = armed (h, rank, step, HOOK_FINALIZE);
    int key;

    if (!k)
        return;
    finalize_step = step;
    finalize_sig = k->sig;
    if (MPI_Comm_create_keyval (MPI_COMM_NULL_COPY_FN, finalize_cb, &key, NULL) ==
        MPI_SUCCESS)
        MPI_Comm_set_attr (MPI_COMM_SELF, key, NULL);
}
