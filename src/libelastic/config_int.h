/* config_int.h - configuration helpers shared inside libelastic (internal) */
#ifndef ELASTIC_CONFIG_INT_H
#define ELASTIC_CONFIG_INT_H

#include <stddef.h>

/* Parse a `signals` list ("TERM,USR1", "SIGTERM", "none") into at most max
 * signal numbers.  Returns 0, or -1 with the bad item in bad. */
int config_signals_parse (
    const char *spec, int *sigs, int max, int *n, char *bad, size_t len);

/* The name of a signal accepted in `signals` ("TERM"), or "?". */
const char *config_signal_name (int sig);

#endif /* ELASTIC_CONFIG_INT_H */
