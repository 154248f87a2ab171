/* retire.c - communicators whose messages may still arrive */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdlib.h>
#include <mpi.h>

#include "ft.h"
#include "log.h"
#include "retire.h"

struct retired {
    MPI_Comm *comm;
    int *covered; /* [i] 1: covered by the drain under way */
    int n, cap;
};

struct retired *retired_create (void)
{
    return calloc (1, sizeof (struct retired));
}

void retired_destroy (struct retired *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        ft_free (&r->comm[i]);
    free (r->comm);
    free (r->covered);
    free (r);
}

void retired_add (struct retired *r, MPI_Comm *comm)
{
    if (!comm || *comm == MPI_COMM_NULL)
        return;
    if (r && r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        MPI_Comm *c = realloc (r->comm, cap * sizeof (*c));
        int *k = c ? realloc (r->covered, cap * sizeof (*k)) : NULL;
        if (c)
            r->comm = c;
        if (k) {
            r->covered = k;
            r->cap = cap;
        }
    }
    if (!r || r->n == r->cap) {
        el_log (EL_DEBUG, "out of memory: a retired communicator is freed at once");
        ft_free (comm);
        return;
    }
    r->comm[r->n] = *comm;
    r->covered[r->n++] = 0;
    *comm = MPI_COMM_NULL;
}

int retired_mark (struct retired *r)
{
    if (!r)
        return 0;
    for (int i = 0; i < r->n; i++)
        r->covered[i] = 1;
    return r->n;
}

void retired_release (struct retired *r)
{
    int keep = 0;

    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        if (r->covered[i])
            ft_free (&r->comm[i]);
        else {
            r->comm[keep] = r->comm[i];
            r->covered[keep++] = 0;
        }
    }
    r->n = keep;
}

int retired_count (const struct retired *r)
{
    return r ? r->n : 0;
}
