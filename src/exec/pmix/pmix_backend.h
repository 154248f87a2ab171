/* pmix_backend.h - the PMIx-hosting backend (with PMIx): the local backend
 * plus the PMIx server the agent hosts for its MPI ranks (pmix_host.h)
 */
#ifndef ELASTIC_EXEC_PMIX_BACKEND_H
#define ELASTIC_EXEC_PMIX_BACKEND_H

#include "elastic/agent.h"

/* The backend's table (ELASTIC_AGENT_BACKEND_ABI). */
extern const struct elastic_agent_backend pmix_backend;

/* Create its context for agent.  Returns NULL with err set. */
void *pmix_backend_create (elastic_agent_t *agent, elastic_error_t *err);

#endif /* ELASTIC_EXEC_PMIX_BACKEND_H */
