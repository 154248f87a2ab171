/* template.h - --log-line-prefix-template: "[${role_name}${local_rank}]:"
 *
 * Variables: ${role_name}, ${local_rank}, ${rank}, ${hostname}.  A "$" not
 * followed by "{" is literal.
 */
#ifndef ELASTIC_EXEC_TEMPLATE_H
#define ELASTIC_EXEC_TEMPLATE_H

#include <stddef.h>

#include "common/error.h"

/* Check a template.  Returns 0, or -1 with one line in err naming the
 * problem (unclosed "${", unknown variable) and the accepted variables. */
int template_check (const char *what, const char *tmpl, elastic_error_t *err);

/* Expand a checked template into buf (truncated to size). */
void template_expand (const char *tmpl,
                      const char *role,
                      int local_rank,
                      int rank,
                      const char *hostname,
                      char *buf,
                      size_t size);

#endif /* ELASTIC_EXEC_TEMPLATE_H */
