/* command.c - the mpirun command line of an attempt, and its world size */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"

/* Shell-quote s into out if it needs it. */
static void quote (const char *s, char *out, size_t size)
{
    size_t n = 0;
    int plain = *s != '\0';

    for (const char *p = s; *p; p++)
        if (!strchr ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./"
                     "=:,+@%^",
                     *p))
            plain = 0;
    if (plain) {
        snprintf (out, size, "%s", s);
        return;
    }
    if (n + 1 < size)
        out[n++] = '\'';
    for (const char *p = s; *p && n + 5 < size; p++) {
        if (*p == '\'') {
            memcpy (out + n, "'\\''", 4);
            n += 4;
        } else
            out[n++] = *p;
    }
    if (n + 1 < size)
        out[n++] = '\'';
    out[n < size ? n : size - 1] = '\0';
}

void command_format (char *const argv[], char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; argv[i] && used + 1 < size; i++) {
        char q[4096];
        quote (argv[i], q, sizeof (q));
        int n = snprintf (buf + used, size - used, "%s%s", i ? " " : "", q);
        used += n > 0 ? (size_t)n : 0;
    }
}

static void av_add (struct argvec *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        if (!(a->v = realloc (a->v, (size_t)a->cap * sizeof (char *)))) {
            fprintf (stderr, "%s: out of memory\n", MPIRUN_PROG);
            exit (EXIT_FAILED);
        }
    }
    if (!(a->v[a->n++] = strdup (s))) {
        fprintf (stderr, "%s: out of memory\n", MPIRUN_PROG);
        exit (EXIT_FAILED);
    }
    a->v[a->n] = NULL;
}

void argvec_free (struct argvec *a)
{
    for (int i = 0; i < a->n; i++)
        free (a->v[i]);
    free (a->v);
    memset (a, 0, sizeof (*a));
}

static void
add_mca (struct argvec *a, const struct job *j, const char *key, const char *value)
{
    if (options_has_mca (&j->o, key))
        return;
    av_add (a, "--mca");
    av_add (a, key);
    av_add (a, value);
}

static int oversubscribed (const struct job *j, int np)
{
    if (j->local)
        return np > j->ncpu;
    int slots = 0;
    hostlist_count_state (j->hl, HOST_ACTIVE, &slots);
    return slots > 0 && np > slots;
}

int command_grow_slots (const struct job *j, int np)
{
    const struct options *o = &j->o;
    int most = o->np_max ? o->np_max : o->np ? o->np : np, slots = 0;

    if (most < np)
        most = np;
    /* several hosts: no more than their slots, unless told to oversubscribe */
    if (!j->local && !o->oversubscribe) {
        hostlist_count_state (j->hl, HOST_ACTIVE, &slots);
        if (slots > 0 && slots < most)
            most = slots < np ? np : slots;
    }
    return most;
}

int command_grow_hosts (const struct job *j, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    if (j->local)
        return 0;
    for (size_t i = 0; i < hostlist_count (j->hl); i++) {
        const struct host *h = hostlist_get (j->hl, i);
        int n;
        if (h->state != HOST_ACTIVE)
            continue;
        if (h->slots <= 0) { /* unknown: PRRTE places them */
            buf[0] = '\0';
            return 0;
        }
        n = snprintf (
            buf + used, size - used, "%s%s:%d", used ? "," : "", h->name, h->slots);
        if (n < 0 || (size_t)n >= size - used) {
            buf[0] = '\0';
            return 0;
        }
        used += (size_t)n;
    }
    return used > 0;
}

void command_build (struct job *j, int np, const char *hostfile, struct argvec *a)
{
    const struct options *o = &j->o;
    char buf[64];
    int auto_oversub = 0;

    av_add (a, j->mi.path);
    if (j->mi.ulfm) {
        if (!o->with_ft) {
            av_add (a, "--with-ft");
            av_add (a, "ulfm");
        }
        add_mca (a, j, "pml", "ob1");
        add_mca (a, j, "coll", "^han");
        /* MPI_Finalize's PMIx fence hangs after a rank's death without it */
        add_mca (a, j, "async_mpi_finalize", "1");
        if (!options_has_mca (o, "mpi_ft_detector")) {
            double period = 0, timeout = 0;
            int hosts = j->local ? 1 : hostlist_count_state (j->hl, HOST_ACTIVE, NULL);
            if (o->det_mode == 2) {
                period = o->det_period;
                timeout = o->det_timeout;
            } else if (o->det_mode == 0 && hosts > 1) {
                /* across hosts a heartbeat also catches a silent node; an
                 * oversubscribed rank answers late, so give it longer */
                int over = oversubscribed (j, np);
                period = over ? 3 : 1;
                timeout = over ? 15 : 4;
            }
            if (period > 0) {
                add_mca (a, j, "mpi_ft_detector", "true");
                snprintf (buf, sizeof (buf), "%g", period);
                add_mca (a, j, "mpi_ft_detector_period", buf);
                snprintf (buf, sizeof (buf), "%g", timeout);
                add_mca (a, j, "mpi_ft_detector_timeout", buf);
            } else
                add_mca (a, j, "mpi_ft_detector", "false");
        }
    }
    if (j->sm_dir[0])
        add_mca (a, j, "btl_sm_backing_directory", j->sm_dir);
    for (int i = 0; i < o->npass; i++)
        av_add (a, o->pass[i]);
    if (np > 0 && !o->npernode) {
        snprintf (buf, sizeof (buf), "%d", np);
        av_add (a, "-n");
        av_add (a, buf);
    }
    if (hostfile) {
        av_add (a, "--hostfile");
        av_add (a, hostfile);
    }
    if (!o->oversubscribe && np > 0 && j->local && oversubscribed (j, np)) {
        /* one host, more ranks than cores: what mpirun refuses by default */
        auto_oversub = 1;
        av_add (a, "--oversubscribe");
        if (!o->bind_given) {
            av_add (a, "--bind-to");
            av_add (a, "none");
        }
    }
    (void)auto_oversub;
    av_add (a, "-x");
    av_add (a, "ELASTIC_EVENT_LOG");
    av_add (a, "-x");
    av_add (a, "ELASTIC_RUN_DIR");
    av_add (a, "-x");
    av_add (a, "ELASTIC_ATTEMPT");
    av_add (a, "-x");
    av_add (a, "ELASTIC_GROW_SLOTS");
    if (getenv ("ELASTIC_GROW_HOSTS")) { /* set_attempt_env decided */
        av_add (a, "-x");
        av_add (a, "ELASTIC_GROW_HOSTS");
    }
    av_add (a, "-x");
    av_add (a, "ELASTIC_RUN_ID");
    if (o->init_timeout > 0) {
        /* the ranks' libelastic says when MPI_Init finished (initwatch.h) */
        av_add (a, "-x");
        av_add (a, "ELASTIC_REPORT_INIT");
    }
    if (getenv ("ELASTIC_RESUME")) {
        av_add (a, "-x");
        av_add (a, "ELASTIC_RESUME");
    }
    if (getenv ("ELASTIC_RESUME_FRESH_OK")) {
        av_add (a, "-x");
        av_add (a, "ELASTIC_RESUME_FRESH_OK");
    }
    if (o->wrap) {
        av_add (a, j->exec);
        for (int i = 0; i < o->nexec_opts; i++)
            av_add (a, o->exec_opts[i]);
        av_add (a, "--");
    }
    for (int i = 0; i < o->napp; i++)
        av_add (a, o->app[i]);
}

/* World size of the next attempt.  Returns 0, or -1 with err. */
int command_plan_np (struct job *j, int *np, elastic_error_t *err)
{
    const struct options *o = &j->o;

    if (j->local) {
        *np = o->np ? o->np : o->npernode ? o->npernode : j->ncpu;
        if (o->np_max && *np > o->np_max)
            *np = o->np_max;
        return 0;
    }
    if (o->npernode) {
        int hosts = hostlist_count_state (j->hl, HOST_ACTIVE, NULL);
        *np = o->npernode * hosts;
        if (hosts == 0 || *np < (o->np_min ? o->np_min : 1)) {
            return errprintf (
                err,
                "-N %d on %d usable host%s gives %d ranks, below --np-min %d",
                o->npernode,
                hosts,
                hosts == 1 ? "" : "s",
                *np,
                o->np_min ? o->np_min : 1);
        }
        return 0;
    }
    return hostlist_plan_np (
        j->hl, o->np, o->np_min, o->np_max, o->oversubscribe, np, err);
}
