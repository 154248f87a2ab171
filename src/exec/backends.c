/* backends.c - the built-in backends (flux-core's src/shell/builtins.c)
 *
 * The only file of the core that names a backend.  elastic_agent_create
 * loads one of these by name (the spec's wireup); another backend is set
 * with elastic_agent_set_backend.  Either way the core checks its ABI.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <string.h>

#include "agent_impl.h"
#include "common/error.h"
#include "local.h"
#if HAVE_PMIX
#include "pmix/pmix_backend.h"
#endif

struct builtin {
    const char *name;
    const struct elastic_agent_backend *ops;
    /* the backend's context for agent, NULL with err set */
    void *(*create) (elastic_agent_t *agent, elastic_error_t *err);
};

static const struct builtin builtins[] = {
    {"local", &local_backend, local_backend_create},
#if HAVE_PMIX
    {"pmix", &pmix_backend, pmix_backend_create},
#endif
};

int agent_backend_load (elastic_agent_t *agent, const char *name, elastic_error_t *err)
{
    for (size_t i = 0; i < sizeof (builtins) / sizeof (builtins[0]); i++) {
        const struct builtin *b = &builtins[i];
        void *ctx;
        int rc;
        if (strcmp (b->name, name) != 0)
            continue;
        if ((rc = agent_backend_check (b->ops, err)) != ELASTIC_OK)
            return rc;
        if (!(ctx = b->create (agent, err)))
            return ELASTIC_ERR_NOMEM;
        if ((rc = elastic_agent_set_backend (agent, b->ops, ctx)) != ELASTIC_OK) {
            if (b->ops->destroy)
                b->ops->destroy (ctx);
            return errcodef (err, rc, "backend '%s' cannot be set", name);
        }
        return ELASTIC_OK;
    }
    return errcodef (
        err, ELASTIC_ERR_UNSUPPORTED, "backend '%s' is not built in this agent", name);
}
