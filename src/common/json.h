/* json.h - JSON string literals for code that writes JSON by hand
 *
 * libelastic writes its few JSON lines without a JSON library (it stays
 * dependency-light); the tools use jansson.  Both escape strings here.
 */
#ifndef ELASTIC_COMMON_JSON_H
#define ELASTIC_COMMON_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Write s (NULL: "") as a JSON string literal, quotes included, into buf
 * (NUL-terminated when size > 0).  Returns the length the whole literal
 * needs, excluding the NUL, as snprintf does: a result >= size means it
 * was truncated. */
size_t json_quote (char *buf, size_t size, const char *s);

/* Write s (NULL: "") as a JSON string literal, quotes included, to f. */
void json_fputs (FILE *f, const char *s);

#endif /* ELASTIC_COMMON_JSON_H */
