/* main.c - elastic-exec: start, watch and restart application processes
 *
 *   elastic-exec [options] [--] program [args...]
 *
 * Agent mode (--nproc-per-node N, --standalone, or no launcher): start N
 * local workers, like `torchrun --standalone`; MPI workers are the ranks of
 * a PMIx server the agent hosts (--wireup pmix, pmix_backend.c).  Wrapper
 * mode (under mpirun or srun, without --nproc-per-node): supervise one
 * worker whose rank is this task's, and die by the worker's signal when it
 * died by one (so the launcher tells the other ranks).  Every option may
 * also come from ELASTIC_<OPTION> (upper case, '-' as '_'); flags win over
 * the environment.  Bad input prints one line and exits 2.  See
 * elastic-exec(1).
 *
 * Binding (--bind, --numa-binding, with hwloc): the plan is computed here
 * once before anything starts, so that a request that does not fit is a
 * usage error, and printed by --print-binding; the local backend computes
 * it again for every start and applies it.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "binding.h"
#include "cli.h"
#include "common/log.h"
#include "elastic/agent.h"
#include "errorfile.h"
#include "launcher.h"
#if HAVE_PMIX && HAVE_SODIUM
#include "jobmap.h"
#include "meshjob.h"
#include "rdzv_mesh.h"
#endif
#include "spec.h"
#include "util.h"

#define EXIT_USAGE 2

static const char *prog = "elastic-exec";

#if HAVE_HWLOC
/* CUDA_VISIBLE_DEVICES under --virtual-local-rank when hwloc chose no GPU,
 * as the worker gets it (group.c): the local_rank-th entry of ours, or the
 * local rank. */
static void vlr_device (int local_rank, char *buf, size_t size)
{
    const char *p = getenv ("CUDA_VISIBLE_DEVICES");

    snprintf (buf, size, "%d", local_rank);
    if (!p || !*p)
        return;
    for (int i = 0; p && i < local_rank; i++)
        if ((p = strchr (p, ',')))
            p++;
    if (p && *p)
        snprintf (buf, size, "%.*s", (int)strcspn (p, ","), p);
}
#endif

/* Compute the binding plan the workers will get (li: wrapper mode, this
 * task's place among the launcher's local tasks; NULL: agent mode) and,
 * with print, write one line per worker of this agent with its
 * CUDA_VISIBLE_DEVICES.  Returns 0, or EXIT_USAGE after one line on stderr
 * when the plan cannot be made. */
static int binding_preflight (const struct elastic_agent_spec *spec,
                              const struct launcher_info *li,
                              int print)
{
#if HAVE_HWLOC
    struct binding_plan *plan;
    struct binding_opts o;
    elastic_error_t err;
    char note_buf[1024], line[2048], dev[64];
    int n = spec->nproc, base = li ? li->local_rank : 0, rank0 = li ? li->rank : 0;
    int nlocal = li ? li->local_size : n;

    if (base + n > nlocal)
        nlocal = base + n;
    spec_binding_opts (spec, nlocal, n, &o);
    if (!(plan = binding_plan_create (&o, nlocal, &err))) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        return EXIT_USAGE;
    }
    if (!print && !binding_plan_is_this_system (plan)) {
        for (int i = 0; i < n; i++) {
            const struct binding_slot *s = binding_plan_slot (plan, base + i);
            if (s && s->cpus[0] && !s->kept) {
                fprintf (stderr,
                         "%s: HWLOC_XMLFILE=%s is another machine's topology: its plan "
                         "can be printed (--print-binding) but not applied here (use "
                         "--bind none to choose GPUs only, or HWLOC_THISSYSTEM=1 to bind "
                         "by it)\n",
                         prog,
                         getenv ("HWLOC_XMLFILE") ? getenv ("HWLOC_XMLFILE") : "");
                binding_plan_destroy (plan);
                return EXIT_USAGE;
            }
        }
    }
    if (print) {
        const char *note = spec_binding_note (plan, base, note_buf, sizeof (note_buf));
        if (note[0])
            fprintf (stderr, "%s: note: %s\n", prog, note);
        for (int i = 0; i < n; i++) {
            const struct binding_slot *s = binding_plan_slot (plan, base + i);
            if (!s || binding_format (plan, base + i, rank0 + i, line, sizeof (line)) < 0)
                continue;
            if (s->cuda_visible_devices[0])
                printf ("%s CUDA_VISIBLE_DEVICES=%s\n", line, s->cuda_visible_devices);
            else if (spec->virtual_local_rank) {
                vlr_device (base + i, dev, sizeof (dev));
                printf ("%s CUDA_VISIBLE_DEVICES=%s\n", line, dev);
            } else
                printf ("%s CUDA_VISIBLE_DEVICES unchanged\n", line);
        }
        fflush (stdout);
    }
    binding_plan_destroy (plan);
    return 0;
#else
    (void)spec;
    (void)li;
    if (print) {
        fprintf (stderr,
                 "%s: --print-binding needs hwloc, which this build does not have "
                 "(configure found no libhwloc)\n",
                 prog);
        return EXIT_USAGE;
    }
    return 0;
#endif
}

/* Wrapper mode: die by the signal that killed the worker, so that the
 * launcher (PRRTE) sees a death by signal and tells the other ranks (an
 * exit 128+N is a normal termination to it, and ULFM survivors wait
 * forever).  No core dump for this re-raise.  Returns only if the signal
 * did not end the process. */
static void die_by_signal (int sig)
{
    struct rlimit no_core = {0, 0};
    struct sigaction dfl;
    sigset_t set;

    fflush (NULL);
    setrlimit (RLIMIT_CORE, &no_core);
    memset (&dfl, 0, sizeof (dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction (sig, &dfl, NULL);
    sigemptyset (&set);
    sigaddset (&set, sig);
    sigprocmask (SIG_UNBLOCK, &set, NULL);
    raise (sig);
}

/* What a rank's failure means when Slurm's PMIx plugin wired the job up. */
#define SLURM_PMIX_NOTE                                                                  \
    "Slurm's PMIx plugin ends the whole job step when one of its processes is "          \
    "lost, so the ranks can neither be restarted nor recover in place; for that, "       \
    "run elastic-mpirun inside the allocation (see doc/slurm.md)"

static void late_signal (int sig)
{
    (void)sig;
}

/* The agent blocks the signals it handles while it runs and restores the
 * mask when it returns.  A preemption notice can arrive twice (Slurm
 * signals every process of the step, the agent relays it as well): one
 * that lands after the run must not kill this process before it reports
 * the status the run decided.  A handler that does nothing is reset to
 * the default by exec, so the workers are not affected; signals ignored
 * on entry stay ignored. */
static void catch_late_signals (const elastic_agent_spec_t *spec)
{
    struct sigaction sa, old;

    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = late_signal;
    sigemptyset (&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember (&spec->handled, sig) != 1 &&
            sigismember (&spec->preempt, sig) != 1)
            continue;
        if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction (sig, &sa, NULL);
    }
}

/* Wrapper mode (1) when a launcher started us and no agent-mode flag was
 * given, else agent mode (0); li is filled either way when a launcher is
 * found.  -1 after one line on stderr when the launcher's variables do
 * not add up. */
static int detect_mode (const struct cli *cli, struct launcher_info *li)
{
    elastic_error_t err;
    int found;

    if (!cli->standalone && !cli->nproc_given) {
        if ((found = launcher_detect (li, &err)) < 0)
            fprintf (stderr, "%s: %s\n", prog, err.text);
        return found;
    }
    if (!cli->print_binding && launcher_detect (li, &err) > 0 && li->size > 1)
        log_warn ("agent mode under %s with %d tasks (--standalone, or --wireup "
                  "inherit/none): each task runs its own single-node group",
                  li->name,
                  li->size);
    return 0;
}

/* The run id of wrapper mode without --run-id: the launcher's job id,
 * made a file name. */
static void set_run_id_from_job (elastic_agent_spec_t *spec,
                                 const struct launcher_info *li)
{
    char id[101];
    size_t n = 0;

    for (const char *p = li->job_id; *p && n < sizeof (id) - 1; p++)
        id[n++] =
            (*p == '/' || isspace ((unsigned char)*p) || !isprint ((unsigned char)*p))
                ? '_'
                : *p;
    id[n] = '\0';
    elastic_agent_spec_set (spec, "run-id", id, NULL);
}

/* Wrapper mode: this task is one rank of the launcher's world. */
static int set_wrapper_rendezvous (elastic_agent_t *agent,
                                   const struct launcher_info *li,
                                   const struct cli *cli,
                                   elastic_error_t *err)
{
    struct elastic_agent_rdzv_info info = {
        .group_rank = li->rank,
        .group_world_size = li->size,
        .rank_base = li->rank,
        .world_size = li->size,
        .local_rank_base = li->local_rank,
        .node_local_size = li->local_size,
        .master_port = cli->master_given ? 0 : -1,
    };

    if (elastic_agent_set_static_rendezvous (agent, &info, err) != ELASTIC_OK)
        return -1;
    log_info ("wrapper mode (%s): rank %d of %d, local rank %d of %d",
              li->name,
              li->rank,
              li->size,
              li->local_rank,
              li->local_size);
    return 0;
}

/* What a finished run says: the exit status; on a failure the report on
 * stderr, our own error file for an enclosing agent, and in wrapper mode
 * the signal to die by (*reraise) when the worker died by one. */
static int finish_run (const elastic_agent_result_t *result,
                       int wrapper,
                       const char *own_error_file,
                       int *reraise)
{
    struct elastic_agent_failure f;
    int root_rank, status = elastic_agent_result_exit_status (result);

    if (elastic_agent_result_failures (result, &root_rank) <= 0 ||
        elastic_agent_result_state (result) != ELASTIC_AGENT_FAILED)
        return status;
    elastic_agent_result_report (result, STDERR_FILENO);
    if (own_error_file[0] &&
        elastic_agent_result_failure (result, root_rank, &f) == ELASTIC_OK) {
        char text[1024];
        snprintf (text, sizeof (text), "rank %d: %s", f.rank, f.message);
        if (errorfile_write (own_error_file, text, f.timestamp) < 0)
            log_warn ("cannot write %s: %s", own_error_file, strerror (errno));
    }
    if (wrapper && elastic_agent_result_failure (result, root_rank, &f) == ELASTIC_OK &&
        f.signal > 0 && status == 128 + f.signal && signal_default_terminates (f.signal))
        *reraise = f.signal;
    return status;
}

#if HAVE_PMIX && HAVE_SODIUM
/* Across nodes, which rendezvous: 1 for torchrun's elastic one over the
 * mesh (rdzv_mesh.h: workers that are not MPI ranks, --wireup none; a
 * range MIN:MAX implies it), 0 for the MPI job the hosted PMIx servers
 * wire up (--wireup pmix), -1 after one line on stderr. */
static int rdzv_mode (elastic_agent_spec_t *spec)
{
    int range = spec->min_nodes > 0 && spec->min_nodes < spec->nnodes;

    if (range && spec->rdzv_backend == RDZV_STATIC) {
        fprintf (stderr,
                 "%s: --nnodes %d:%d: --rdzv-backend static takes a fixed --nnodes N\n",
                 prog,
                 spec->min_nodes,
                 spec->nnodes);
        return -1;
    }
    if (spec->wireup == WIREUP_NONE ||
        ((range || spec->rdzv_backend != RDZV_AUTO) && spec->wireup == WIREUP_AUTO)) {
        spec->wireup = WIREUP_NONE;
        return 1;
    }
    if (spec->rdzv_backend == RDZV_ELASTIC) {
        fprintf (stderr,
                 "%s: --rdzv-backend elastic is for workers that are not MPI ranks "
                 "(--wireup none); MPI ranks across nodes recover in place with "
                 "--wireup pmix\n",
                 prog);
        return -1;
    }
    if (spec->wireup != WIREUP_AUTO && spec->wireup != WIREUP_PMIX) {
        fprintf (stderr,
                 "%s: --nnodes %d: a job across nodes takes --wireup pmix (MPI ranks) "
                 "or none (other workers; given: %s)\n",
                 prog,
                 spec->nnodes,
                 spec_wireup_name (spec->wireup));
        return -1;
    }
    if (range) {
        fprintf (stderr,
                 "%s: --nnodes %d:%d: a range of sizes is for workers that are not MPI "
                 "ranks (--wireup none); MPI ranks recover in place with a fixed "
                 "--nnodes N\n",
                 prog,
                 spec->min_nodes,
                 spec->nnodes);
        return -1;
    }
    return 0;
}

/* Mesh mode: this task is one of several of a launcher that is not mpirun
 * (srun), or torchrun's flags name several nodes: the nodes' elastic-exec
 * join in one job (meshjob.h).  Returns 1 and *mjp for an MPI job the
 * hosted PMIx servers wire up, 2 and *mjp for torchrun's elastic
 * rendezvous (rdzv_mesh.h), 0 when the mode does not apply, -1 after one
 * line on stderr. */
static int
mesh_mode (elastic_agent_spec_t *spec, const struct cli *cli, struct meshjob **mjp)
{
    struct meshjob_opts o = {.nproc_per_node = cli->nproc_given ? spec->nproc : 0,
                             .node_timeout = spec->node_timeout};
    const struct jobmap *m;
    const struct jobmap_node *me;
    elastic_error_t err;
    struct meshjob *mj;
    int rc, slurm;

    *mjp = NULL;
    slurm = !cli->standalone && !cli->print_binding && meshjob_detect (NULL);
    if (spec->node_rank >= 0 || spec->rdzv_endpoint || (spec->nnodes > 0 && !slurm)) {
        /* torchrun's shape: the flags say it, under any launcher */
        struct meshjob_torchrun_opts t = {
            .nnodes = spec->nnodes,
            .node_rank = spec->node_rank,
            .nproc_per_node = spec->nproc,
            .endpoint = spec->rdzv_endpoint,
            .run_id = cli->run_id_given ? spec->run_id : NULL,
            .node_timeout = spec->node_timeout,
            .join_timeout = spec->rdzv_join_timeout > 0 ? spec->rdzv_join_timeout : 300,
            .last_call = spec->rdzv_last_call,
        };
        int static_rdzv = spec->rdzv_backend == RDZV_STATIC;

        if (spec->nnodes == 1 && spec->node_rank <= 0)
            return 0; /* one node: agent mode */
        /* --node-rank: torchrun's static rendezvous needs it; elsewhere
         * it orders the nodes, and without it the rendezvous places them */
        if (spec->nnodes < 1 || !spec->rdzv_endpoint ||
            (static_rdzv && spec->node_rank < 0)) {
            const char *miss[3];
            int n = 0;

            if (spec->nnodes < 1)
                miss[n++] = "--nnodes";
            if (!spec->rdzv_endpoint)
                miss[n++] = "--rdzv-endpoint";
            if (static_rdzv && spec->node_rank < 0)
                miss[n++] = "--node-rank";
            fprintf (stderr,
                     "%s: --nnodes and --rdzv-endpoint go together (a multi-node job "
                     "without Slurm)%s; missing: %s%s%s%s%s\n",
                     prog,
                     static_rdzv ? ", and --node-rank with --rdzv-backend static" : "",
                     miss[0],
                     n > 1 ? " " : "",
                     n > 1 ? miss[1] : "",
                     n > 2 ? " " : "",
                     n > 2 ? miss[2] : "");
            return -1;
        }
        if ((rc = rdzv_mode (spec)) < 0)
            return -1;
        t.min_nodes = static_rdzv ? 0 : spec->min_nodes;
        t.joins = rc == 1 && !static_rdzv; /* the elastic rendezvous admits nodes */
        if (!(mj = meshjob_create_torchrun (&t, &err))) {
            fprintf (stderr, "%s: %s\n", prog, err.text);
            return -1;
        }
        *mjp = mj;
        return rc ? 2 : 1;
    }
    if (spec->nnodes > 0) {
        /* torchrun's --nnodes under srun (slurm): the map from Slurm */
        if ((rc = rdzv_mode (spec)) < 0)
            return -1;
        if (!(mj = meshjob_create (&o, &err))) {
            fprintf (stderr, "%s: %s\n", prog, err.text);
            return -1;
        }
        if (mj->map->nnodes > spec->nnodes || mj->map->nnodes < spec->min_nodes) {
            fprintf (stderr,
                     "%s: --nnodes %d:%d: the Slurm step has %d nodes\n",
                     prog,
                     spec->min_nodes,
                     spec->nnodes,
                     mj->map->nnodes);
            meshjob_destroy (mj);
            return -1;
        }
        *mjp = mj;
        return rc ? 2 : 1;
    }
    if (cli->standalone || cli->print_binding || !meshjob_detect (NULL) ||
        (spec->wireup != WIREUP_AUTO && spec->wireup != WIREUP_PMIX))
        return 0;
    if (!(mj = meshjob_create (&o, &err))) {
        fprintf (stderr,
                 "%s: %s (or run with --wireup inherit for one wrapper per "
                 "rank, without recovery across nodes)\n",
                 prog,
                 err.text);
        return -1;
    }
    m = mj->map;
    me = &m->node[m->node_id];
    for (int i = 1; i < me->nranks; i++)
        if (me->ranks[i] != me->ranks[0] + i) {
            fprintf (stderr,
                     "%s: mesh: the ranks of node %s are not consecutive (Slurm's "
                     "distribution is not block): use srun --distribution=block\n",
                     prog,
                     me->name);
            meshjob_destroy (mj);
            return -1;
        }
    *mjp = mj;
    return 1;
}

/* torchrun's elastic rendezvous over the mesh (rdzv_mesh.h). */
static int set_rdzv_mesh (elastic_agent_t *agent,
                          struct meshjob *mj,
                          const elastic_agent_spec_t *spec,
                          elastic_error_t *err)
{
    struct rdzv_mesh_opts o = {
        .mj = mj,
        /* 0: every node (static), and the module's default join timeout */
        .min_nodes = spec->rdzv_backend == RDZV_STATIC ? 0 : spec->min_nodes,
        .join_timeout = spec->rdzv_join_timeout,
    };
    void *ctx;
    char desc[1024];

    if (!(ctx = rdzv_mesh_create (&o, err)))
        return -1;
    if (elastic_agent_set_rendezvous (agent, &rdzv_mesh_ops, ctx) != ELASTIC_OK) {
        rdzv_mesh_ops.destroy (ctx);
        return errprintf (err, "cannot set the rendezvous");
    }
    if (mj->joins.slots) {
        log_info ("elastic rendezvous over the mesh (at least %d of at most %d nodes; "
                  "nodes may join the running job: %d member slots)",
                  o.min_nodes,
                  mj->max_nodes,
                  mj->map->nnodes);
        return 0;
    }
    jobmap_describe (mj->map, desc, sizeof (desc));
    log_info ("elastic rendezvous over the mesh (at least %d of %d nodes): %s",
              o.min_nodes > 0 ? o.min_nodes : mj->map->nnodes,
              mj->map->nnodes,
              desc);
    return 0;
}

/* Mesh mode, this node's leader: its ranks are the node's ranks of the map. */
static int set_mesh_rendezvous (elastic_agent_t *agent,
                                const struct meshjob *mj,
                                const struct cli *cli,
                                elastic_error_t *err)
{
    const struct jobmap *m = mj->map;
    const struct jobmap_node *me = &m->node[m->node_id];
    struct elastic_agent_rdzv_info info = {
        .group_rank = m->node_id,
        .group_world_size = m->nnodes,
        .rank_base = me->ranks[0],
        .world_size = m->world_size,
        .local_rank_base = 0,
        .node_local_size = me->nranks,
        .master_port = cli->master_given ? 0 : -1,
    };
    char desc[1024];

    if (elastic_agent_set_static_rendezvous (agent, &info, err) != ELASTIC_OK)
        return -1;
    jobmap_describe (m, desc, sizeof (desc));
    log_info ("mesh mode: %s", desc);
    return 0;
}

/* A member that joined the running job (--join): no ranks of its own; the
 * ranks spawned onto it come after the job's (pmix/pmix_grow.c). */
static int set_join_rendezvous (elastic_agent_t *agent,
                                const struct meshjob *mj,
                                elastic_error_t *err)
{
    struct elastic_agent_rdzv_info info = {
        .group_rank = (int)mj->member,
        .group_world_size = (int)mj->nslots,
        .rank_base = mj->map->world_size,
        .world_size = 0,
        .local_rank_base = 0,
        .node_local_size = mj->free_slots,
        .master_port = -1,
    };

    if (elastic_agent_set_static_rendezvous (agent, &info, err) != ELASTIC_OK)
        return -1;
    log_info ("mesh mode: joined job %s (%d ranks on %d nodes) as member %u, with "
              "room for %d ranks",
              mj->map->key,
              mj->map->world_size,
              mj->map->nnodes,
              mj->member,
              mj->free_slots);
    return 0;
}
#endif

int main (int argc, char **argv)
{
    elastic_agent_spec_t *spec;
    elastic_agent_t *agent = NULL;
    elastic_agent_result_t *result = NULL;
    struct launcher_info li = {0};
    struct cli cli = {0};
    elastic_error_t err = {{0}};
    char own_error_file[PATH_MAX] = "";
    const char *v;
    int wrapper = 0, rc, status = EXIT_USAGE, reraise = 0, slurm_pmix = 0, mesh = 0;
#if HAVE_PMIX && HAVE_SODIUM
    struct meshjob *mj = NULL;
#endif

    if (!(spec = elastic_agent_spec_create ())) {
        fprintf (stderr, "%s: out of memory\n", prog);
        return 1;
    }
    /* An enclosing agent's error file (we are its worker): read it before
     * our own ELASTIC_* settings are applied. */
    if (((v = getenv ("ELASTIC_ERROR_FILE")) && *v) ||
        ((v = getenv ("TORCHELASTIC_ERROR_FILE")) && *v))
        snprintf (own_error_file, sizeof (own_error_file), "%s", v);
    if ((rc = cli_parse (argc, argv, spec, &cli, &err)) != 0) {
        if (rc < 0)
            fprintf (stderr, "%s: %s\n", prog, err.text);
        status = rc < 0 ? EXIT_USAGE : 0;
        goto out;
    }
    log_init (prog,
              cli.verbosity < 0    ? LOG_ERROR
              : cli.verbosity == 0 ? LOG_WARN
              : cli.verbosity == 1 ? LOG_INFO
                                   : LOG_DEBUG);

#if HAVE_PMIX && HAVE_SODIUM
    if (cli.join) {
        /* a member with no ranks of the job: the processes the job spawns
         * onto it are its workers (meshjoin.c) */
        struct meshjob_join_opts jo = {
            .target = cli.join,
            .nproc_per_node = cli.nproc_given ? spec->nproc : 0,
            .node_timeout = spec->node_timeout,
        };
        char jb[64], st[32];

        if (cli.entry < argc &&
            meshjob_join_parse (cli.join, jb, sizeof (jb), st, sizeof (st), &err) == 0) {
            fprintf (stderr,
                     "%s: --join %s: a joining member runs no program of its own (the "
                     "job starts its new processes there); drop '%s'\n",
                     prog,
                     cli.join,
                     argv[cli.entry]);
            goto out;
        }
        if (!meshjob_join_admit (&jo, &mj, &status))
            goto out;
        status = 1;
        mesh = 3;
        spec->nproc = 0;
        spec->hosting = 1;
        spec->wireup = WIREUP_PMIX;
        spec->mesh = mj;
        spec->max_restarts = 0;
        if (!cli.run_id_given)
            elastic_agent_spec_set (spec, "run-id", mj->map->key, NULL);
    }
#else
    if (cli.join) {
        fprintf (
            stderr, "%s: --join: built without PMIx or libsodium (no mesh mode)\n", prog);
        goto out;
    }
#endif
    if (cli.entry >= argc && !cli.print_binding && !mesh) {
        fprintf (stderr,
                 "%s: no program to run (usage: %s [options] program [args...])\n",
                 prog,
                 prog);
        goto out;
    }
#if HAVE_PMIX && HAVE_SODIUM
    if (!mesh && (mesh = mesh_mode (spec, &cli, &mj)) < 0)
        goto out;
    if (mesh && !meshjob_is_leader (mj)) {
        status = meshjob_follow (mj);
        goto out;
    }
    if (mesh == 1 || mesh == 2) {
        const struct jobmap_node *me = &mj->map->node[mj->map->node_id];
        if (meshjob_lead (mj, &err) < 0) {
            fprintf (stderr, "%s: %s\n", prog, err.text);
            goto out;
        }
        spec->nproc = me->nranks;
        if (mesh == 1) { /* the elastic rendezvous (2) restarts as on one node */
            spec->wireup = WIREUP_PMIX;
            spec->mesh = mj;
            if (spec->max_restarts > 0)
                log_warn ("--max-restarts %d: a job across nodes restarts nothing yet "
                          "(a rank lost after MPI_Init is recovered in place; before, "
                          "the job fails)",
                          spec->max_restarts);
            spec->max_restarts = 0;
        }
        if (!cli.run_id_given)
            elastic_agent_spec_set (spec, "run-id", mj->map->key, NULL);
    } else
#endif
        if (!mesh && (wrapper = detect_mode (&cli, &li)) < 0)
        goto out;
    if (cli.print_binding) {
        status = binding_preflight (spec, wrapper ? &li : NULL, 1);
        goto out;
    }
    if (mesh != 3 && elastic_agent_spec_set_entrypoint (
                         spec, argc - cli.entry, argv + cli.entry, &err) != ELASTIC_OK) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        goto out;
    }
    spec->wrapper = wrapper;
    if (spec_check (spec, &err) < 0) {
        fprintf (stderr, "%s: --%s\n", prog, err.text);
        goto out;
    }
    if (spec_binding_wanted (spec) && binding_preflight (spec, wrapper ? &li : NULL, 0))
        goto out;
    if (wrapper && !cli.run_id_given && li.job_id[0])
        set_run_id_from_job (spec, &li);
    slurm_pmix = wrapper && strcmp (li.name, "Slurm") == 0 && getenv ("PMIX_RANK");
    if (slurm_pmix && spec->max_restarts > 0) {
        if (li.rank == 0)
            log_warn ("--max-restarts %d has no effect under srun --mpi=pmix: %s",
                      spec->max_restarts,
                      SLURM_PMIX_NOTE);
        spec->max_restarts = 0;
    }
    if (!(agent = elastic_agent_create (spec, &err)) ||
#if HAVE_PMIX && HAVE_SODIUM
        (mesh == 1 && set_mesh_rendezvous (agent, mj, &cli, &err) < 0) ||
        (mesh == 2 && set_rdzv_mesh (agent, mj, spec, &err) < 0) ||
        (mesh == 3 && set_join_rendezvous (agent, mj, &err) < 0) ||
#endif
        (wrapper && set_wrapper_rendezvous (agent, &li, &cli, &err) < 0)) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        goto out;
    }

    if (slurm_pmix) {
        /* said as the rank fails: Slurm's PMIx plugin kills this process
         * too within milliseconds, before the run's end could say it */
        char note[1024];
        snprintf (note,
                  sizeof (note),
                  "%s: rank %d failed under srun --mpi=pmix: %s",
                  prog,
                  li.rank,
                  SLURM_PMIX_NOTE);
        elastic_agent_set_failure_note (agent, note);
    }
    catch_late_signals (spec);
    rc = elastic_agent_run (agent, &result, &err);
    if (rc != ELASTIC_OK) {
        fprintf (stderr, "%s: %s\n", prog, err.text);
        status = rc == ELASTIC_ERR_INVAL ? EXIT_USAGE : 1;
    } else
        status = finish_run (result, wrapper, own_error_file, &reraise);
#if HAVE_PMIX && HAVE_SODIUM
    if (mesh == 2) {
        /* each node's own result, as torchrun's agents (the followers of a
         * task-per-rank step print it too) */
        snprintf (mj->summary,
                  sizeof (mj->summary),
                  "job %s: node %s: %s (exit %d)",
                  mj->map->key,
                  mj->map->node[mj->map->node_id].name,
                  status == 0    ? "completed"
                  : status == 75 ? "suspended"
                                 : "FAILED",
                  status);
        fprintf (stderr, "%s: %s\n", prog, mj->summary);
        meshjob_publish (mj, status, NULL);
    } else if (mesh) {
        if (mj->decided)
            status = mj->status;
        else
            snprintf (mj->summary,
                      sizeof (mj->summary),
                      "job %s: this node's result only (exit %d): the members did not "
                      "agree on one",
                      mj->map->key,
                      status);
        fprintf (stderr, "%s: %s\n", prog, mj->summary);
        /* the status file is the job's: only a member that heard every
         * live member's outcome writes it (a member cut off from the
         * others must not overwrite the survivors' result) */
        if (spec->status_file && !mj->agreed)
            log_warn ("status-file %s: not written (this member's result is not the "
                      "job's)",
                      spec->status_file);
        meshjob_publish (mj, status, mj->agreed ? spec->status_file : NULL);
    }
#endif
out:
    elastic_agent_result_destroy (result);
    elastic_agent_destroy (agent);
    elastic_agent_spec_destroy (spec);
#if HAVE_PMIX && HAVE_SODIUM
    meshjob_destroy (mj);
#endif
    (void)mesh;
    if (reraise) {
        log_info ("the worker died by %s: so does this wrapper", signal_name (reraise));
        die_by_signal (reraise);
    }
    return status;
}
