/* growmsg.c - growth messages between mesh members (growmsg.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "growmsg.h"

static void say (char *why, size_t whysz, const char *text)
{
    if (why && whysz)
        snprintf (why, whysz, "%s", text);
}

/* The compact text of o (taken); NULL when out of memory. */
static char *text_of (json_t *o)
{
    char *t = o ? json_dumps (o, JSON_COMPACT) : NULL;

    json_decref (o);
    return t;
}

static json_t *load (const void *data, size_t len, char *why, size_t whysz)
{
    json_error_t e;
    json_t *o = len > 0 ? json_loadb (data, len, JSON_REJECT_DUPLICATES, &e) : NULL;

    if (!o)
        say (why, whysz, len ? e.text : "an empty message");
    else if (!json_is_object (o)) {
        say (why, whysz, "not a JSON object");
        json_decref (o);
        o = NULL;
    }
    return o;
}

char *growmsg_room_encode (unsigned long long seq, int free_slots, const char *host)
{
    if (host && host[0])
        return text_of (json_pack (
            "{s:I s:i s:s}", "seq", (json_int_t)seq, "free", free_slots, "host", host));
    return text_of (json_pack ("{s:I s:i}", "seq", (json_int_t)seq, "free", free_slots));
}

/* 1 if h is a host name as Slurm and DNS spell them (1-255 of A-Z a-z 0-9
 * . - _). */
static int host_ok (const char *h)
{
    size_t n = strlen (h);

    return n >= 1 && n <= GROWMSG_HOST_MAX &&
           strspn (h,
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
               n;
}

int growmsg_room_decode (const void *data,
                         size_t len,
                         unsigned long long *seq,
                         int *free_slots,
                         char *host,
                         size_t hostsz,
                         char *why,
                         size_t whysz)
{
    json_t *o = load (data, len, why, whysz);
    json_int_t s;
    const char *h = NULL;
    int f, rc = -1;
    json_error_t e;

    if (!o)
        return -1;
    if (json_unpack_ex (
            o, &e, JSON_STRICT, "{s:I s:i s?s}", "seq", &s, "free", &f, "host", &h) < 0)
        say (why, whysz, e.text);
    else if (s < 1 || f < 0 || f > 65535)
        say (why, whysz, "seq below 1 or free slots out of 0-65535");
    else if (h && (!host_ok (h) || strlen (h) >= hostsz))
        say (why, whysz, "host: not a host name (1-255 of A-Z a-z 0-9 . - _)");
    else {
        *seq = (unsigned long long)s;
        *free_slots = f;
        snprintf (host, hostsz, "%s", h ? h : "");
        rc = 0;
    }
    json_decref (o);
    return rc;
}

static json_t *strv_json (char *const *v)
{
    json_t *a = json_array ();

    for (size_t i = 0; a && v && v[i]; i++)
        if (json_array_append_new (a, json_string (v[i])) < 0) {
            json_decref (a);
            return NULL;
        }
    return a;
}

char *growmsg_spawn_encode (const struct growmsg_spawn *s)
{
    return text_of (json_pack ("{s:i s:i s:i s:i s:s s:i s:o* s:o* s:s s:s s:b}",
                               "attempt",
                               s->attempt,
                               "node",
                               s->node,
                               "k",
                               s->k,
                               "base",
                               s->base,
                               "pns",
                               s->pns,
                               "prank",
                               s->prank,
                               "argv",
                               strv_json (s->argv),
                               "env",
                               strv_json (s->env),
                               "requestor",
                               s->requestor,
                               "wdir",
                               s->wdir ? s->wdir : "",
                               "joined",
                               s->joined ? 1 : 0));
}

static void strv_free (char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free (v[i]);
    free (v);
}

/* A NULL-terminated copy of array a of strings; NULL with why. */
static char **strv_of (json_t *a, const char *what, char *why, size_t whysz)
{
    size_t n = json_array_size (a);
    char **v;

    if (n > GROWMSG_ARGS_MAX) {
        if (why && whysz)
            snprintf (why, whysz, "%s: more than %d entries", what, GROWMSG_ARGS_MAX);
        return NULL;
    }
    if (!(v = calloc (n + 1, sizeof (char *)))) {
        say (why, whysz, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *e = json_string_value (json_array_get (a, i));
        if (!e || !(v[i] = strdup (e))) {
            if (why && whysz)
                snprintf (why, whysz, "%s: entry %zu is not a string", what, i);
            strv_free (v);
            return NULL;
        }
    }
    return v;
}

void growmsg_spawn_clear (struct growmsg_spawn *s)
{
    strv_free (s->argv);
    strv_free (s->env);
    free (s->wdir);
    s->argv = s->env = NULL;
    s->wdir = NULL;
}

int growmsg_spawn_decode (const void *data,
                          size_t len,
                          int nmembers,
                          struct growmsg_spawn *s,
                          char *why,
                          size_t whysz)
{
    json_t *o = load (data, len, why, whysz), *argv, *env;
    const char *pns, *requestor, *wdir;
    json_error_t e;
    int rc = -1, joined = 0;

    memset (s, 0, sizeof (*s));
    if (!o)
        return -1;
    if (json_unpack_ex (o,
                        &e,
                        JSON_STRICT,
                        "{s:i s:i s:i s:i s:s s:i s:o s:o s:s s:s s?b}",
                        "attempt",
                        &s->attempt,
                        "node",
                        &s->node,
                        "k",
                        &s->k,
                        "base",
                        &s->base,
                        "pns",
                        &pns,
                        "prank",
                        &s->prank,
                        "argv",
                        &argv,
                        "env",
                        &env,
                        "requestor",
                        &requestor,
                        "wdir",
                        &wdir,
                        "joined",
                        &joined) < 0)
        say (why, whysz, e.text);
    else if (s->attempt < 1 || s->node < 0 || s->node >= nmembers || s->k < 1 ||
             s->k > 65535 || s->base < 0 || s->base > 0x7fffffff - s->k || s->prank < 0)
        say (why, whysz, "a number out of range (attempt, node, k, base or prank)");
    else if (!pns[0] || strlen (pns) > GROWMSG_NS_MAX ||
             strlen (requestor) >= sizeof (s->requestor))
        say (why, whysz, "a namespace or requestor empty or too long");
    else if (!json_is_array (argv) || json_array_size (argv) < 1 || !json_is_array (env))
        say (why, whysz, "argv (at least the program) or env is not an array");
    else if ((s->argv = strv_of (argv, "argv", why, whysz)) &&
             (s->env = strv_of (env, "env", why, whysz)) &&
             (!wdir[0] || (s->wdir = strdup (wdir)))) {
        if (!s->argv[0][0])
            say (why, whysz, "argv: an empty program");
        else {
            snprintf (s->pns, sizeof (s->pns), "%s", pns);
            snprintf (s->requestor, sizeof (s->requestor), "%s", requestor);
            s->joined = joined;
            rc = 0;
        }
    } else if (s->argv && s->env)
        say (why, whysz, "out of memory");
    if (rc < 0)
        growmsg_spawn_clear (s);
    json_decref (o);
    return rc;
}

char *growmsg_end_encode (const char *ns, int ok, const char *why_failed)
{
    return text_of (json_pack (
        "{s:s s:b s:s}", "ns", ns, "ok", ok, "why", why_failed ? why_failed : ""));
}

int growmsg_end_decode (const void *data,
                        size_t len,
                        char *ns,
                        size_t nssz,
                        int *ok,
                        char *why_failed,
                        size_t wfsz,
                        char *why,
                        size_t whysz)
{
    json_t *o = load (data, len, why, whysz);
    const char *n, *w;
    json_error_t e;
    int rc = -1;

    if (!o)
        return -1;
    if (json_unpack_ex (
            o, &e, JSON_STRICT, "{s:s s:b s:s}", "ns", &n, "ok", ok, "why", &w) < 0)
        say (why, whysz, e.text);
    else if (!n[0] || strlen (n) >= nssz)
        say (why, whysz, "a namespace empty or too long");
    else {
        snprintf (ns, nssz, "%s", n);
        snprintf (why_failed, wfsz, "%s", w);
        rc = 0;
    }
    json_decref (o);
    return rc;
}
