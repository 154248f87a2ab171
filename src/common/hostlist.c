/* hostlist.c - Slurm's compact host lists and task-count lists */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

struct names {
    char **v;
    size_t n, cap, max;
    const char *list; /* the whole list, for errors */
};

void hostlist_names_free (char **names)
{
    int saved = errno;

    for (size_t i = 0; names && names[i]; i++)
        free (names[i]);
    free (names);
    errno = saved;
}

static int push (struct names *nm, const char *s, size_t len, elastic_error_t *err)
{
    char *copy;

    if (nm->n >= nm->max)
        return errprintf (
            err, "host list '%s' names more than %zu hosts", nm->list, nm->max);
    if (nm->n + 1 >= nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 16;
        char **p = realloc (nm->v, cap * sizeof (*p));
        if (!p)
            return errprintf (err, "out of memory expanding a host list");
        nm->v = p;
        nm->cap = cap;
    }
    if (!(copy = strndup (s, len)))
        return errprintf (err, "out of memory expanding a host list");
    nm->v[nm->n++] = copy;
    nm->v[nm->n] = NULL;
    return 0;
}

static int bad (struct names *nm, const char *why, elastic_error_t *err)
{
    return errprintf (err,
                      "'%s' is not a Slurm host list (%s; expected e.g. n[1-3,5],gpu07)",
                      nm->list,
                      why);
}

/* A number of at most 9 digits at s: its value, *width its digits. */
static int number (const char *s, size_t len, long *v, int *width)
{
    size_t i = 0;

    *v = 0;
    while (i < len && isdigit ((unsigned char)s[i]) && i < 9)
        *v = *v * 10 + (s[i++] - '0');
    *width = (int)i;
    return i;
}

static int expand (struct names *nm, const char *e, size_t len, elastic_error_t *err);

/* One item "lo" or "lo-hi" of the bracket group of `e` (prefix e[0..plen),
 * rest after the group): each value expanded with the rest. */
static int expand_item (struct names *nm,
                        const char *e,
                        size_t plen,
                        const char *item,
                        size_t ilen,
                        const char *rest,
                        size_t rlen,
                        elastic_error_t *err)
{
    long lo, hi;
    int wlo, whi;
    size_t k = (size_t)number (item, ilen, &lo, &wlo);
    char buf[1024];

    if (k == 0)
        return bad (nm, "a range needs numbers", err);
    hi = lo;
    if (k < ilen) {
        if (item[k] != '-' ||
            (size_t)number (item + k + 1, ilen - k - 1, &hi, &whi) != ilen - k - 1 ||
            whi == 0)
            return bad (nm, "a range is lo-hi with digits", err);
        if (hi < lo)
            return bad (nm, "a range goes up", err);
    }
    if ((size_t)(hi - lo) >= nm->max - nm->n)
        return errprintf (
            err, "host list '%s' names more than %zu hosts", nm->list, nm->max);
    for (long v = lo; v <= hi; v++) {
        int n = snprintf (
            buf, sizeof (buf), "%.*s%0*ld%.*s", (int)plen, e, wlo, v, (int)rlen, rest);
        if (n < 0 || (size_t)n >= sizeof (buf))
            return bad (nm, "a name is longer than 1023 characters", err);
        if (expand (nm, buf, (size_t)n, err) < 0)
            return -1;
    }
    return 0;
}

/* Expand one entry (no top-level comma) of length len. */
static int expand (struct names *nm, const char *e, size_t len, elastic_error_t *err)
{
    const char *lb = memchr (e, '[', len), *rb, *item, *end;

    if (!lb) {
        for (size_t i = 0; i < len; i++)
            if (!isalnum ((unsigned char)e[i]) && !strchr ("-._", e[i]))
                return bad (nm,
                            e[i] == ']' ? "']' without '['"
                                        : "a character not in "
                                          "A-Z a-z 0-9 - . _",
                            err);
        return push (nm, e, len, err);
    }
    if (!(rb = memchr (lb, ']', len - (size_t)(lb - e))))
        return bad (nm, "'[' without ']'", err);
    if (memchr (lb + 1, '[', (size_t)(rb - lb - 1)))
        return bad (nm, "brackets do not nest", err);
    if (rb == lb + 1)
        return bad (nm, "empty brackets", err);
    for (item = lb + 1; item < rb; item = end + 1) {
        if (!(end = memchr (item, ',', (size_t)(rb - item))))
            end = rb;
        if (expand_item (nm,
                         e,
                         (size_t)(lb - e),
                         item,
                         (size_t)(end - item),
                         rb + 1,
                         len - (size_t)(rb + 1 - e),
                         err) < 0)
            return -1;
    }
    return 0;
}

int hostlist_expand (const char *list, size_t max, char ***names, elastic_error_t *err)
{
    struct names nm = {.max = max ? max : HOSTLIST_MAX, .list = list ? list : ""};
    const char *p = nm.list;

    *names = NULL;
    if (!*p)
        return errprintf (err, "empty host list (expected e.g. n[1-3,5],gpu07)");
    while (*p) {
        const char *q = p;
        int depth = 0;

        /* an entry ends at a comma outside brackets */
        for (; *q && (depth || *q != ','); q++) {
            if (*q == '[')
                depth++;
            else if (*q == ']' && depth)
                depth--;
        }
        if (q == p) {
            bad (&nm, "an empty name", err);
            goto error;
        }
        if (expand (&nm, p, (size_t)(q - p), err) < 0)
            goto error;
        p = *q ? q + 1 : q;
        if (*q && !*p) {
            bad (&nm, "an empty name", err);
            goto error;
        }
    }
    *names = nm.v;
    return (int)nm.n;
error:
    hostlist_names_free (nm.v);
    return -1;
}

int slurm_expand_counts (const char *s, int *counts, int n, elastic_error_t *err)
{
    const char *p = s;
    int k = 0;

    if (!s || !*s)
        return errprintf (err, "empty Slurm count list (expected e.g. 2(x3),1)");
    while (*p) {
        char *end;
        long v, rep = 1;

        errno = 0;
        v = strtol (p, &end, 10);
        if (errno || end == p || v < 0 || v > 1000000 || !isdigit ((unsigned char)*p))
            goto bad;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x' || !isdigit ((unsigned char)p[2]))
                goto bad;
            rep = strtol (p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep < 1 || rep > 1000000)
                goto bad;
            p = end + 1;
        }
        for (long i = 0; i < rep; i++) {
            if (k >= n)
                return errprintf (
                    err, "Slurm count list '%s' has more than %d entries", s, n);
            counts[k++] = (int)v;
        }
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            goto bad;
    }
    return k;
bad:
    return errprintf (err, "'%s' is not a Slurm count list (expected e.g. 2(x3),1)", s);
}
