/* template.c - --log-line-prefix-template expansion */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "template.h"

static const char *vars[] = {"role_name", "local_rank", "rank", "hostname"};

static int var_index (const char *name, size_t len)
{
    for (int i = 0; i < 4; i++)
        if (strlen (vars[i]) == len && strncmp (vars[i], name, len) == 0)
            return i;
    return -1;
}

int template_check (const char *what, const char *tmpl, elastic_error_t *err)
{
    const char *p = tmpl;

    while ((p = strstr (p, "${"))) {
        const char *end = strchr (p + 2, '}');
        if (!end) {
            return errprintf (
                err,
                "%s: '%s' has an unclosed '${' (expected ${role_name}, ${local_rank}, "
                "${rank}, ${hostname})",
                what,
                tmpl);
        }
        if (var_index (p + 2, (size_t)(end - p - 2)) < 0) {
            return errprintf (
                err,
                "%s: '%s' uses unknown variable '%.*s' (expected ${role_name}, "
                "${local_rank}, ${rank}, ${hostname})",
                what,
                tmpl,
                (int)(end - p + 1),
                p);
        }
        p = end + 1;
    }
    return 0;
}

void template_expand (const char *tmpl,
                      const char *role,
                      int local_rank,
                      int rank,
                      const char *hostname,
                      char *buf,
                      size_t size)
{
    size_t n = 0;
    const char *p = tmpl;

    if (size == 0)
        return;
    while (*p && n < size - 1) {
        const char *end;
        int idx;
        if (p[0] == '$' && p[1] == '{' && (end = strchr (p + 2, '}')) &&
            (idx = var_index (p + 2, (size_t)(end - p - 2))) >= 0) {
            char val[300];
            switch (idx) {
                case 0:
                    snprintf (val, sizeof (val), "%s", role);
                    break;
                case 1:
                    snprintf (val, sizeof (val), "%d", local_rank);
                    break;
                case 2:
                    snprintf (val, sizeof (val), "%d", rank);
                    break;
                default:
                    snprintf (val, sizeof (val), "%s", hostname);
                    break;
            }
            for (const char *v = val; *v && n < size - 1; v++)
                buf[n++] = *v;
            p = end + 1;
        } else
            buf[n++] = *p++;
    }
    buf[n] = '\0';
}
