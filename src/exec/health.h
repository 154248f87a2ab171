/* health.h - the agent's HTTP health and metrics server (--health-port)
 *
 * libmicrohttpd in its own thread, bound to 127.0.0.1 unless told
 * otherwise:
 *   GET /healthz  200 while the agent's loop makes progress within
 *                 --health-timeout, else 503 (a stalled agent)
 *   GET /metrics  Prometheus text format (see metrics.c)
 * Only GET and HEAD; request bodies are never read; headers are bounded
 * (16 KiB), idle or slow connections time out (5 s) and connections are
 * limited, so garbage or slow clients never block or crash the agent.
 * Without libmicrohttpd the functions fail with a clear message.
 */
#ifndef ELASTIC_EXEC_HEALTH_H
#define ELASTIC_EXEC_HEALTH_H

#include <stddef.h>

#include "elastic/agent.h"

struct health;

/* Listen on addr:port (0: any free port).  Returns NULL with one line in
 * err (address in use, bad address, no HTTP support). */
struct health *
health_start (elastic_agent_t *agent, const char *addr, int port, elastic_error_t *err);

/* The port listened on. */
int health_port (struct health *h);

/* The answer to a request for url by method: the HTTP status, the content
 * type (static) and the body (malloc'ed, the caller frees it).  Only GET
 * and HEAD of /healthz and /metrics are served (405, 404 otherwise).
 * Used by the server's handler; without libmicrohttpd too (tests, fuzzing).
 * Returns 0, or -1 when out of memory. */
int health_answer (elastic_agent_t *agent,
                   const char *method,
                   const char *url,
                   unsigned int *status,
                   const char **type,
                   char **body);

/* Stop the server (NULL-safe). */
void health_stop (struct health *h);

#endif /* ELASTIC_EXEC_HEALTH_H */
