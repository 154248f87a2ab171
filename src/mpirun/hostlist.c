/* hostlist.c - the hosts of an elastic-mpirun job, and who runs on them */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostlist.h"

struct hostlist {
    struct host *h;
    size_t n, cap;
};

struct hostlist *hostlist_create (void)
{
    return calloc (1, sizeof (struct hostlist));
}

void hostlist_destroy (struct hostlist *hl)
{
    int saved = errno;

    if (hl) {
        for (size_t i = 0; i < hl->n; i++)
            free (hl->h[i].name);
        free (hl->h);
        free (hl);
    }
    errno = saved;
}

size_t hostlist_count (const struct hostlist *hl)
{
    return hl ? hl->n : 0;
}

const struct host *hostlist_get (const struct hostlist *hl, size_t i)
{
    return hl && i < hl->n ? &hl->h[i] : NULL;
}

const char *hostlist_state_name (enum host_state st)
{
    switch (st) {
        case HOST_ACTIVE:
            return "active";
        case HOST_SPARE:
            return "spare";
        case HOST_FAILED:
            return "failed";
        case HOST_DOWN:
            return "down";
    }
    return "unknown";
}

int hostlist_match (const char *a, const char *b)
{
    size_t la, lb;

    if (!a || !b || !*a || !*b)
        return 0;
    if (strcasecmp (a, b) == 0)
        return 1;
    la = strcspn (a, ".");
    lb = strcspn (b, ".");
    /* "n1" matches "n1.cluster"; two different FQDNs do not match */
    if (a[la] && b[lb])
        return 0;
    return la == lb && strncasecmp (a, b, la) == 0;
}

static struct host *find (const struct hostlist *hl, const char *name)
{
    for (size_t i = 0; i < hl->n; i++)
        if (hostlist_match (hl->h[i].name, name))
            return &hl->h[i];
    return NULL;
}

static int valid_name (const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isalnum ((unsigned char)*s) && !strchr ("-._[]", *s))
            return 0;
    return 1;
}

int hostlist_add (
    struct hostlist *hl, const char *name, int slots, int spare, elastic_error_t *err)
{
    struct host *h;

    if (!valid_name (name))
        return errprintf (
            err, "'%s' is not a host name (letters, digits, '-', '.', '_')", name);
    if (slots < 0)
        return errprintf (
            err, "host %s: slots %d is negative (expected 1 or more)", name, slots);
    if ((h = find (hl, name))) {
        /* Open MPI adds the slots of repeated lines */
        if (h->slots > 0 && slots > INT_MAX - h->slots)
            return errprintf (
                err, "host %s: its slots add up to more than %d", name, INT_MAX);
        if (h->slots > 0 && slots > 0)
            h->slots += slots;
        else if (slots > 0)
            h->slots = slots;
        return 0;
    }
    if (hl->n == hl->cap) {
        size_t cap = hl->cap ? hl->cap * 2 : 8;
        struct host *p = realloc (hl->h, cap * sizeof (*p));
        if (!p)
            return errprintf (err, "out of memory");
        hl->h = p;
        hl->cap = cap;
    }
    h = &hl->h[hl->n];
    memset (h, 0, sizeof (*h));
    if (!(h->name = strdup (name)))
        return errprintf (err, "out of memory");
    h->slots = slots;
    h->state = spare ? HOST_SPARE : HOST_ACTIVE;
    h->was_active = !spare;
    hl->n++;
    return 0;
}

/* Parse "key=N" with N in 1..1e6 into *out. */
static int parse_count (
    const char *what, const char *v, const char *where, int *out, elastic_error_t *err)
{
    char *end;
    long n;

    errno = 0;
    n = strtol (v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > 1000000)
        return errprintf (
            err, "%s: %s '%s' is not a count (expected 1..1000000)", where, what, v);
    *out = (int)n;
    return 0;
}

int hostlist_parse_hostfile (struct hostlist *hl,
                             const char *text,
                             const char *source,
                             elastic_error_t *err)
{
    const char *p = text;
    int lineno = 0, added = 0;

    while (p && *p) {
        const char *eol = strchr (p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen (p);
        char line[1024], where[1200], *save = NULL, *tok, *name;
        int slots = 0, max_slots = 0, spare = 0;

        lineno++;
        snprintf (where, sizeof (where), "%s:%d", source ? source : "hostfile", lineno);
        if (len >= sizeof (line))
            return errprintf (err,
                              "%s: line too long (at most %zu characters)",
                              where,
                              sizeof (line) - 1);
        memcpy (line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : NULL;
        if (strchr (line, '#'))
            *strchr (line, '#') = '\0';
        if (!(name = strtok_r (line, " \t\r", &save)))
            continue;
        while ((tok = strtok_r (NULL, " \t\r", &save))) {
            char *eq = strchr (tok, '=');
            if (strcasecmp (tok, "spare") == 0) {
                spare = 1;
                continue;
            }
            if (!eq)
                return errprintf (
                    err,
                    "%s: unknown word '%s' (expected slots=N, max_slots=N or spare)",
                    where,
                    tok);
            *eq = '\0';
            if (strcasecmp (tok, "slots") == 0 || strcasecmp (tok, "count") == 0 ||
                strcasecmp (tok, "cpu") == 0) {
                if (parse_count ("slots", eq + 1, where, &slots, err) < 0)
                    return -1;
            } else if (strcasecmp (tok, "max_slots") == 0 ||
                       strcasecmp (tok, "max-slots") == 0) {
                if (parse_count ("max_slots", eq + 1, where, &max_slots, err) < 0)
                    return -1;
            } else
                return errprintf (
                    err,
                    "%s: unknown key '%s' (expected slots=N, max_slots=N or spare)",
                    where,
                    tok);
        }
        if (max_slots > 0 && (slots == 0 || slots > max_slots))
            slots = max_slots;
        if (hostlist_add (hl, name, slots, spare, err) < 0) {
            errprefix (err, "%s", where);
            return -1;
        }
        added++;
    }
    return added;
}

int hostlist_parse_hosts (struct hostlist *hl, const char *list, elastic_error_t *err)
{
    char *copy, *save = NULL, *tok;
    int added = 0;

    if (!list || !*list)
        return errprintf (err, "--host: empty list (expected host[:slots],...)");
    if (!(copy = strdup (list)))
        return errprintf (err, "out of memory");
    for (tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        char *colon = strrchr (tok, ':');
        int slots = 1;
        if (colon) {
            *colon = '\0';
            if (parse_count ("slots", colon + 1, "--host", &slots, err) < 0)
                goto error;
        }
        if (hostlist_add (hl, tok, slots, 0, err) < 0)
            goto error;
        added++;
    }
    free (copy);
    return added;
error:
    free (copy);
    return -1;
}

int hostlist_add_slurm (struct hostlist *hl,
                        const char *hostnames,
                        const char *counts,
                        elastic_error_t *err)
{
    char *copy, *save = NULL, *tok;
    int *c = NULL, nc = 0, added = 0;

    if (!(copy = strdup (hostnames ? hostnames : "")))
        return errprintf (err, "out of memory");
    if (counts && *counts) {
        if (!(c = calloc (65536, sizeof (int)))) {
            errprintf (err, "out of memory");
            goto error;
        }
        if ((nc = slurm_expand_counts (counts, c, 65536, err)) < 0)
            goto error;
    }
    for (tok = strtok_r (copy, " \t\r\n", &save); tok;
         tok = strtok_r (NULL, " \t\r\n", &save)) {
        char **names;
        int nn;

        /* one name per line from scontrol, or a compact list such as
         * SLURM_JOB_NODELIST's "n[1-3,5]" (src/common/hostlist.c) */
        if ((nn = hostlist_expand (tok, 65536, &names, err)) < 0)
            goto error;
        for (int i = 0; i < nn; i++) {
            /* one count for all hosts, or one per host; a repeated name
             * adds its count to the host it repeats (hostlist_add), so the
             * counts are given here and not patched into the list
             * afterwards */
            int slots = !c ? 0 : nc == 1 ? c[0] : added < nc ? c[added] : 0;
            if (hostlist_add (hl, names[i], slots, 0, err) < 0) {
                hostlist_names_free (names);
                goto error;
            }
            added++;
        }
        hostlist_names_free (names);
    }
    if (c && nc != 1 && nc != added) {
        errprintf (
            err, "Slurm count list '%s' has %d entries for %d hosts", counts, nc, added);
        goto error;
    }
    free (c);
    free (copy);
    return added;
error:
    free (c);
    free (copy);
    return -1;
}

static int slurm_state_down (const char *st)
{
    static const char *bad[] = {"down",
                                "drain",
                                "drng",
                                "drained",
                                "draining",
                                "fail",
                                "failg",
                                "failing",
                                "no_respond",
                                "maint",
                                "unk",
                                "unknown",
                                "boot",
                                "power_down",
                                "powered_down",
                                "pow_dn",
                                "inval"};
    size_t len = strlen (st);

    if (len && (st[len - 1] == '*' || st[len - 1] == '~' || st[len - 1] == '#'))
        return 1;
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
        if (strncasecmp (st, bad[i], strlen (bad[i])) == 0)
            return 1;
    return 0;
}

int hostlist_mark_slurm_down (struct hostlist *hl, const char *sinfo_text)
{
    const char *p = sinfo_text;
    int marked = 0;

    while (p && *p) {
        const char *eol = strchr (p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen (p);
        char line[512], name[256], st[128];
        struct host *h;

        if (len < sizeof (line)) {
            memcpy (line, p, len);
            line[len] = '\0';
            if (sscanf (line, "%255s %127s", name, st) == 2 && slurm_state_down (st) &&
                (h = find (hl, name)) && h->state != HOST_DOWN &&
                h->state != HOST_FAILED) {
                h->state = HOST_DOWN;
                snprintf (h->why, sizeof (h->why), "Slurm state %s", st);
                marked++;
            }
        }
        p = eol ? eol + 1 : NULL;
    }
    return marked;
}

int hostlist_set_spares (struct hostlist *hl, int n, elastic_error_t *err)
{
    int usable = 0;

    for (size_t i = 0; i < hl->n; i++)
        if (hl->h[i].state == HOST_ACTIVE)
            usable++;
    if (n < 0 || n >= usable)
        return errprintf (
            err,
            "--spares: %d leaves no host to run on (%d host%s not already spare; "
            "expected 0..%d)",
            n,
            usable,
            usable == 1 ? "" : "s",
            usable > 0 ? usable - 1 : 0);
    for (size_t i = hl->n; i-- > 0 && n > 0;) {
        if (hl->h[i].state == HOST_ACTIVE) {
            hl->h[i].state = HOST_SPARE;
            hl->h[i].was_active = 0;
            n--;
        }
    }
    return 0;
}

int hostlist_fail (struct hostlist *hl, const char *name, const char *why)
{
    struct host *h = find (hl, name);

    if (!h || h->state == HOST_FAILED)
        return 0;
    if (h->state == HOST_DOWN)
        return 0;
    h->state = HOST_FAILED;
    snprintf (h->why, sizeof (h->why), "%s", why ? why : "its processes died");
    return 1;
}

int hostlist_replace_failed (struct hostlist *hl, char *log, size_t logsz)
{
    size_t used = 0;
    int promoted = 0;

    if (log && logsz)
        log[0] = '\0';
    for (size_t i = 0; i < hl->n; i++) {
        struct host *dead = &hl->h[i];
        if ((dead->state != HOST_FAILED && dead->state != HOST_DOWN) ||
            !dead->was_active || dead->replaced)
            continue;
        for (size_t j = 0; j < hl->n; j++) {
            struct host *s = &hl->h[j];
            if (s->state != HOST_SPARE)
                continue;
            s->state = HOST_ACTIVE;
            s->was_active = 1;
            dead->replaced = 1;
            promoted++;
            if (log && used < logsz) {
                int k = snprintf (log + used,
                                  logsz - used,
                                  "%sspare %s replaces %s",
                                  used ? "; " : "",
                                  s->name,
                                  dead->name);
                used += k > 0 ? (size_t)k : 0;
            }
            break;
        }
    }
    return promoted;
}

int hostlist_count_state (const struct hostlist *hl, enum host_state st, int *slots)
{
    int n = 0, s = 0;

    for (size_t i = 0; i < hl->n; i++) {
        if (hl->h[i].state == st) {
            n++;
            s += hl->h[i].slots;
        }
    }
    if (slots)
        *slots = s;
    return n;
}

int hostlist_plan_np (const struct hostlist *hl,
                      int desired,
                      int np_min,
                      int np_max,
                      int oversubscribe,
                      int *np,
                      elastic_error_t *err)
{
    int nactive = 0, nunknown = 0, known = 0, ever = 0, target;

    for (size_t i = 0; i < hl->n; i++) {
        const struct host *h = &hl->h[i];
        if (h->state == HOST_ACTIVE || h->was_active)
            ever++;
        if (h->state != HOST_ACTIVE)
            continue;
        nactive++;
        if (h->slots > 0)
            known += h->slots;
        else
            nunknown++;
    }
    if (hl->n > 0 && nactive == 0) {
        int nf = hostlist_count_state (hl, HOST_FAILED, NULL);
        int nd = hostlist_count_state (hl, HOST_DOWN, NULL);
        return errprintf (
            err, "no usable host left (%d failed, %d down, no spare left)", nf, nd);
    }
    target = desired > 0 ? desired : np_max;
    if (nunknown == 0 && hl->n > 0) {
        if (target == 0 || (!oversubscribe && target > known))
            target = known;
    } else if (nunknown > 0 && target > 0 && ever > 0 && nactive < ever) {
        /* slots unknown: every host holds an equal share of the job */
        int share = (int)((long)target * nactive / ever);
        if (known > 0 && !oversubscribe)
            share = (int)((long)target * (nactive - nunknown) / ever) + known;
        if (share < target)
            target = share;
    }
    if (np_max > 0 && target > np_max)
        target = np_max;
    if (target == 0 && np_min <= 0) {
        *np = 0;
        return 0;
    }
    if (target < (np_min > 0 ? np_min : 1)) {
        int nf = hostlist_count_state (hl, HOST_FAILED, NULL);
        int nd = hostlist_count_state (hl, HOST_DOWN, NULL);
        return errprintf (
            err,
            "world size %d is below --np-min %d: %d usable host%s with %d slot%s "
            "(%d failed, %d down, %d spare%s left)",
            target,
            np_min > 0 ? np_min : 1,
            nactive,
            nactive == 1 ? "" : "s",
            known,
            known == 1 ? "" : "s",
            nf,
            nd,
            hostlist_count_state (hl, HOST_SPARE, NULL),
            hostlist_count_state (hl, HOST_SPARE, NULL) == 1 ? "" : "s");
    }
    *np = target;
    return 0;
}

int hostlist_write (const struct hostlist *hl, FILE *f)
{
    for (size_t i = 0; i < hl->n; i++) {
        const struct host *h = &hl->h[i];
        if (h->state != HOST_ACTIVE)
            continue;
        if (h->slots > 0)
            fprintf (f, "%s slots=%d\n", h->name, h->slots);
        else
            fprintf (f, "%s\n", h->name);
    }
    return ferror (f) ? -1 : 0;
}

void hostlist_describe (const struct hostlist *hl, char *buf, size_t size)
{
    static const enum host_state order[] = {
        HOST_ACTIVE, HOST_SPARE, HOST_FAILED, HOST_DOWN};
    size_t used = 0;

    if (!size)
        return;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof (order) / sizeof (order[0]); k++) {
        int first = 1;
        for (size_t i = 0; i < hl->n && used < size; i++) {
            const struct host *h = &hl->h[i];
            char slots[32] = "";
            int n;
            if (h->state != order[k])
                continue;
            if (h->slots > 0)
                snprintf (slots, sizeof (slots), ":%d", h->slots);
            n = snprintf (buf + used,
                          size - used,
                          "%s%s%s%s%s%s%s",
                          first ? (used ? "; " : "") : " ",
                          first && k > 0 ? hostlist_state_name (order[k]) : "",
                          first && k > 0 ? ": " : "",
                          h->name,
                          slots,
                          h->why[0] ? " (" : "",
                          h->why[0] ? h->why : "");
            used += n > 0 ? (size_t)n : 0;
            if (h->why[0] && used < size) {
                n = snprintf (buf + used, size - used, ")");
                used += n > 0 ? (size_t)n : 0;
            }
            first = 0;
        }
    }
    if (used >= size)
        buf[size - 1] = '\0';
}
