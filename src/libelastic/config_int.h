/* config_int.h - configuration helpers shared inside libelastic (internal) */
#ifndef ELASTIC_CONFIG_INT_H
#define ELASTIC_CONFIG_INT_H

#include <stddef.h>
#include <elastic.h>

/* Parse a `signals` list ("TERM,USR1", "SIGTERM", "none") into at most max
 * signal numbers.  Returns ELASTIC_OK, or ELASTIC_ERR_INVAL with err naming
 * `what` (the field or variable), the bad item and what is accepted. */
int config_signals_parse (
    const char *what, const char *spec, int *sigs, int max, int *n, elastic_error_t *err);

/* The name of a signal accepted in `signals` ("TERM"), or "?". */
const char *config_signal_name (int sig);

#endif /* ELASTIC_CONFIG_INT_H */
