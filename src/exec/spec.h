/* spec.h - the agent's settings (internal layout of elastic_agent_spec_t)
 *
 * The settings are set by name through the table of settings.h.
 */
#ifndef ELASTIC_EXEC_SPEC_H
#define ELASTIC_EXEC_SPEC_H

#include <signal.h>

#include "binding.h"
#include "common/error.h"
#include "elastic/agent.h"
#include "stdmap.h"

enum restart_policy {
    RESTART_AUTO = 0,     /* in-place with the hosted PMIx server, else group */
    RESTART_GROUP = 1,    /* stop every worker, start the group again */
    RESTART_IN_PLACE = 2, /* MPI ranks that die after MPI_Init are left
                             behind; the survivors go on (hosted PMIx only) */
};

/* How MPI ranks find each other (--wireup). */
enum wireup {
    WIREUP_AUTO = 0,    /* pmix in agent mode with a program entrypoint when
                           built with PMIx, else none (spec_wireup) */
    WIREUP_PMIX = 1,    /* the agent hosts the PMIx server of its ranks */
    WIREUP_NONE = 2,    /* the torchrun environment only */
    WIREUP_INHERIT = 3, /* the workers keep a launcher's PMIx variables */
};

/* Room for one text per row of the settings table (settings.c). */
#define SPEC_NKEYS 60

struct elastic_agent_spec {
    char *role;
    int nproc;
    char **argv; /* entrypoint, NULL-terminated, or NULL */
    int argc;
    elastic_agent_fn fn;
    void *fn_arg;
    int max_restarts;
    double monitor_interval;
    char *master_addr; /* NULL: the agent decides */
    int master_port;   /* 0: pick a free one per attempt */
    char *local_addr;
    struct stdmap redirects;
    struct stdmap tee;
    char *log_dir; /* NULL: a temporary directory, removed at exit */
    char *prefix_template;
    int *rank_filter; /* NULL: every local rank on the console */
    int nrank_filter;
    char **dup_out; /* duplicate-stdout-filters */
    int ndup_out;
    char **dup_err;
    int ndup_err;
    char *event_log;
    double exit_barrier_timeout;
    double shutdown_timeout;
    sigset_t handled;
    sigset_t preempt;
    int stop_signal;
    int virtual_local_rank;
    struct binding_opts binding; /* --bind, --numa-binding, --cpus-per-rank,
                                    --oversubscribe (policy none by default) */
    char *run_id;                /* NULL: generated */
    int file_timer;
    char *timer_file;
    double hang_timeout;  /* 0: off */
    double start_timeout; /* with hang_timeout: a worker stopped before it
                             attached, or MPI_Init (hosted PMIx); 0: off */
    int hang_signal;
    int health_port; /* -1: off, 0: any free port */
    char *health_addr;
    double health_timeout;
    enum restart_policy restart_policy;
    enum wireup wireup;
    int wrapper;          /* set by elastic-exec in wrapper mode */
    char *mpi_btl;        /* "sm" or "tcp" (hosted PMIx) */
    double init_timeout;  /* MPI_Init deadline per attempt (hosted PMIx); 0: off */
    double spawn_timeout; /* an MPI_Comm_spawn's processes must reach their
                             parents within it (hosted PMIx); 0: 600 s */
    int subreaper;
    double node_timeout;      /* the mesh's heartbeat timeout (seconds) */
    int nnodes;               /* --nnodes (torchrun's shape; MAX); 0: not given */
    int min_nodes;            /* --nnodes MIN:MAX's MIN (= nnodes for N) */
    int node_rank;            /* --node-rank; -1: not given */
    char *rdzv_endpoint;      /* --rdzv-endpoint */
    int rdzv_backend;         /* RDZV_* (--rdzv-backend) */
    double rdzv_join_timeout; /* --rdzv-conf join_timeout; 0: 300 s */
    double rdzv_last_call;    /* --rdzv-conf last_call_timeout; < 0: 30 s */
    char *status_file;        /* the job's agreed result is written here (mesh) */
    struct meshjob *mesh;     /* set by elastic-exec in mesh mode (borrowed) */
    int hosting;              /* elastic-exec --join: nproc 0 and no entrypoint;
                                 the agent runs the processes spawned onto this
                                 member until the job ends (agent_hosting_ends) */
    char *text[SPEC_NKEYS];   /* the values as set, for elastic_agent_spec_get */
};

enum { RDZV_AUTO = 0, RDZV_ELASTIC, RDZV_STATIC };

/* The wire-up in effect: the spec's, or for WIREUP_AUTO pmix (agent mode,
 * a program entrypoint, a build with PMIx) or inherit (wrapper mode) or
 * none.  Never WIREUP_AUTO. */
enum wireup spec_wireup (const struct elastic_agent_spec *spec);

/* The restart policy in effect: the spec's, or for RESTART_AUTO in-place
 * with the hosted PMIx server and group otherwise.  Never RESTART_AUTO. */
enum restart_policy spec_restart_policy (const struct elastic_agent_spec *spec);

/* The name of a wire-up or of a restart policy ("pmix", "in-place"). */
const char *spec_wireup_name (enum wireup w);
const char *spec_restart_policy_name (enum restart_policy p);

/* Check the settings against each other (wrapper mode and --wireup pmix,
 * --restart-policy in-place without the hosted server, ...).  Returns 0,
 * or -1 with one line in err. */
int spec_check (const struct elastic_agent_spec *spec, elastic_error_t *err);

/* Free the first n strings of a and a itself (NULL-safe). */
void spec_strv_free (char **a, int n);

/* 1 if local_rank's output may go to the console (--local-ranks-filter). */
int spec_rank_on_console (const struct elastic_agent_spec *spec, int local_rank);

/* 1 if the workers need a binding plan (and so the hwloc topology): a
 * policy other than none, --cpus-per-rank, or --virtual-local-rank when
 * there may be a GPU to choose (HWLOC_XMLFILE, or a /dev/nvidiaN); always
 * 0 in a build without hwloc. */
int spec_binding_wanted (const struct elastic_agent_spec *spec);

/* The plan options for an agent that runs nmine of its node's nlocal local
 * ranks: the spec's binding plus --virtual-local-rank; when other agents
 * share the node (nlocal > nmine: wrapper mode, one agent per launcher
 * task) a binding the launcher gave the task is kept, since the launcher
 * has already divided the node among its tasks. */
void spec_binding_opts (const struct elastic_agent_spec *spec,
                        int nlocal,
                        int nmine,
                        struct binding_opts *opts);

/* The line to report about plan for an agent whose first worker is local
 * rank `slot`: that the launcher's binding was kept (wrapper mode, with
 * what to do instead), else the plan's note; "" when there is nothing to
 * say.  Returns buf or a string of the plan (borrowed). */
const char *
spec_binding_note (const struct binding_plan *plan, int slot, char *buf, size_t size);

#endif /* ELASTIC_EXEC_SPEC_H */
