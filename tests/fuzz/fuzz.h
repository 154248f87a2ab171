/* fuzz.h - small helpers shared by the libFuzzer harnesses (tests/fuzz/)
 *
 * A harness turns libFuzzer's bytes into the text a parser reads: one
 * NUL-terminated copy, or parts separated by a line "%%" (so that seeds
 * stay plain text files), or lines.  Each helper returns malloc'ed memory
 * the harness frees before it returns, so that LeakSanitizer sees only
 * what the code under test leaked.
 */
#ifndef ELASTIC_FUZZ_H
#define ELASTIC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The input as a NUL-terminated string (bytes after a NUL are kept but
 * invisible to C string functions, as they would be to the real reader). */
static inline char *fuzz_str (const uint8_t *data, size_t size)
{
    char *s = malloc (size + 1);

    if (!s)
        abort ();
    memcpy (s, data, size);
    s[size] = '\0';
    return s;
}

/* Split s in place at lines "%%" into at most max parts; the parts that
 * are missing are "".  Returns the number of parts found. */
static inline int fuzz_parts (char *s, char **part, int max)
{
    int n = 0;
    char *p = s;

    for (int i = 0; i < max; i++)
        part[i] = (char *)"";
    part[n++] = p;
    while (n < max && (p = strstr (p, "\n%%\n"))) {
        *p = '\0';
        p += 4;
        part[n++] = p;
    }
    return n;
}

/* Split s in place into lines (without their '\n'); *n gets the count.
 * Returns a malloc'ed array of pointers into s. */
static inline char **fuzz_lines (char *s, int *n)
{
    size_t count = 1;
    char **v;
    int i = 0;

    for (const char *p = s; *p; p++)
        count += *p == '\n';
    if (!(v = calloc (count + 1, sizeof (*v))))
        abort ();
    v[i++] = s;
    for (char *p = s; *p; p++) {
        if (*p == '\n') {
            *p = '\0';
            v[i++] = p + 1;
        }
    }
    *n = i;
    return v;
}

#endif /* ELASTIC_FUZZ_H */
