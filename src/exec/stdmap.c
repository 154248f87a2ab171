/* stdmap.c - torchrun's --redirects/--tee values: "3" or "0:3,1:0" */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "stdmap.h"

static int parse_uint (const char **sp, long max, long *out)
{
    const char *s = *sp;
    long v = 0;

    if (!isdigit ((unsigned char)*s))
        return -1;
    while (isdigit ((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v > max)
            return -1;
        s++;
    }
    *sp = s;
    *out = v;
    return 0;
}

int stdmap_parse (const char *what, const char *s, struct stdmap *m, elastic_error_t *err)
{
    const char *p = s;
    long r, v;

    memset (m, 0, sizeof (*m));
    if (!s || *s == '\0')
        goto bad;
    if (strchr (s, ':') == NULL) {
        if (parse_uint (&p, 3, &v) < 0 || *p != '\0')
            goto bad;
        m->value = (int)v;
        return 0;
    }
    m->is_map = 1;
    for (;;) {
        if (parse_uint (&p, 1000000, &r) < 0 || *p++ != ':')
            goto bad;
        if (parse_uint (&p, 3, &v) < 0)
            goto bad;
        for (int i = 0; i < m->n; i++) {
            if (m->rank[i] == r)
                return errprintf (err, "%s: '%s' names local rank %ld twice", what, s, r);
        }
        if (m->n == STDMAP_MAX)
            return errprintf (
                err, "%s: '%s' has more than %d entries", what, s, STDMAP_MAX);
        m->rank[m->n] = (int)r;
        m->val[m->n] = (int)v;
        m->n++;
        if (*p == '\0')
            return 0;
        if (*p++ != ',')
            goto bad;
    }
bad:
    return errprintf (
        err,
        "%s: '%s' is not a value or a per-local-rank map (expected 0-3, "
        "0=none 1=stdout 2=stderr 3=both, or LOCAL_RANK:VALUE,... such as 0:3,1:0)",
        what,
        s ? s : "");
}

int stdmap_get (const struct stdmap *m, int local_rank)
{
    if (!m->is_map)
        return m->value;
    for (int i = 0; i < m->n; i++)
        if (m->rank[i] == local_rank)
            return m->val[i];
    return STD_NONE;
}

void stdmap_format (const struct stdmap *m, char *buf, size_t size)
{
    size_t n = 0;

    if (!m->is_map) {
        snprintf (buf, size, "%d", m->value);
        return;
    }
    buf[0] = '\0';
    for (int i = 0; i < m->n; i++) {
        int len =
            snprintf (buf + n, size - n, "%s%d:%d", i ? "," : "", m->rank[i], m->val[i]);
        if (len < 0 || (size_t)len >= size - n)
            break;
        n += (size_t)len;
    }
}

int ranklist_parse (const char *what, const char *s, int **out, elastic_error_t *err)
{
    const char *p = s;
    int *a = NULL, n = 0;
    long v;

    if (!s || *s == '\0')
        goto bad;
    for (;;) {
        int *tmp;
        while (*p == ' ')
            p++;
        if (parse_uint (&p, 1000000, &v) < 0)
            goto bad;
        while (*p == ' ')
            p++;
        if (!(tmp = realloc (a, (size_t)(n + 1) * sizeof (*a)))) {
            errprintf (err, "%s: out of memory", what);
            free (a);
            return -1;
        }
        a = tmp;
        a[n++] = (int)v;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            goto bad;
    }
    *out = a;
    return n;
bad:
    free (a);
    return errprintf (
        err,
        "%s: '%s' is not a list of local ranks (expected comma-separated integers such "
        "as 0,2)",
        what,
        s ? s : "");
}
