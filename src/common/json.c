/* json.c - JSON string literals (see json.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <string.h>

#include "json.h"

/* The escape for c, or NULL when c is written as itself; \u00XX forms are
 * written into tmp. */
static const char *escape (unsigned char c, char tmp[8])
{
    switch (c) {
        case '"':
            return "\\\"";
        case '\\':
            return "\\\\";
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
    }
    if (c < 0x20 || c == 0x7f) {
        snprintf (tmp, 8, "\\u%04x", c);
        return tmp;
    }
    return NULL;
}

size_t json_quote (char *buf, size_t size, const char *s)
{
    size_t n = 0;
    char tmp[8];

#define PUT(ch)                                                                          \
    do {                                                                                 \
        if (n + 1 < size)                                                                \
            buf[n] = (ch);                                                               \
        n++;                                                                             \
    } while (0)
    PUT ('"');
    for (; s && *s; s++) {
        const char *e = escape ((unsigned char)*s, tmp);
        if (!e)
            PUT (*s);
        else
            for (; *e; e++)
                PUT (*e);
    }
    PUT ('"');
#undef PUT
    if (size > 0)
        buf[n < size ? n : size - 1] = '\0';
    return n;
}

void json_fputs (FILE *f, const char *s)
{
    char tmp[8];

    fputc ('"', f);
    for (; s && *s; s++) {
        const char *e = escape ((unsigned char)*s, tmp);
        if (e)
            fputs (e, f);
        else
            fputc (*s, f);
    }
    fputc ('"', f);
}
