/* local.c - the local-process backend (torchelastic's LocalElasticAgent)
 *
 * Each worker is started into its own process group with
 * PR_SET_PDEATHSIG=SIGKILL (it dies with the agent) and registered with the
 * guardian (its group dies with the agent too).  Exits are seen through a
 * pidfd per worker, so the core wakes the moment a worker dies; with the
 * agent a child subreaper, SIGCHLD also reaps orphaned grandchildren.
 * Stopping sends the signal to whole process groups, waits up to the
 * timeout, then SIGKILLs the groups.
 *
 * Stopping for a restart (ELASTIC_AGENT_STOP_DETACH) need not wait: when the
 * stop signal is sure to end every survivor without running its code (its
 * default action, neither caught, ignored nor blocked, as in a Python
 * worker that installs no handler; or SIGKILL), the survivors are moved to
 * a drain list and the next attempt starts at once, while the kernel tears
 * the old processes down (drain.c).  torchelastic signals, waits up to its timeout
 * and SIGKILLs; here the same signals and the same --shutdown-timeout
 * apply, only the wait moved to the background: a drained worker that is
 * still alive at its deadline gets SIGKILL, each drained group is swept
 * and stays with the guardian until it is empty, and the agent's shutdown
 * waits for the drain list.  The dying processes are reniced to 19, so
 * that their teardown does not take the CPUs from the next attempt's
 * start.  The attempts cannot collide: each has its own process groups,
 * directories (attempt_N) and MASTER_PORT (machine.c detaches only when the
 * port is picked per attempt), and a backend that shares state with its
 * workers (a hosted PMIx namespace with connected ranks) turns detaching
 * off (local_allow_detach).  A worker that handles the signal (libelastic
 * writes a snapshot on SIGTERM) is waited for as before, so a new attempt
 * never reads state an old one is still writing.
 *
 * Binding (with hwloc, when asked: see spec_binding_wanted): every start
 * computes a fresh plan for the node's local ranks (this agent's workers,
 * or the launcher's local size in wrapper mode), logs it, binds each child
 * between fork and exec, gives it CUDA_VISIBLE_DEVICES as planned, and
 * frees the plan once the children are forked.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eventlog.h"
#include "local_impl.h"
#include "spec.h"
#include "binding.h"
#include "common/log.h"
#include "errorfile.h"
#include "guardian.h"
#include "output.h"
#include "template.h"
#include "util.h"

extern char **environ;

void *local_backend_create (elastic_agent_t *agent, elastic_error_t *err)
{
    struct local *l;

    if (!(l = calloc (1, sizeof (*l)))) {
        errprintf (err, "out of memory");
        return NULL;
    }
    l->agent = agent;
    l->spec = agent_spec (agent);
    l->n = l->nslots = l->lwcap = elastic_agent_worker_count (agent);
    l->dup_out_fd = l->dup_err_fd = -1;
    if (!(l->lw = calloc ((size_t)l->n, sizeof (*l->lw)))) {
        free (l);
        errprintf (err, "out of memory");
        return NULL;
    }
    for (int i = 0; i < l->n; i++)
        l->lw[i].pidfd = -1;
    return l;
}

void local_set_wireup (void *ctx, const struct local_wireup *w)
{
    struct local *l = ctx;

    if (w)
        l->wu = *w;
    else
        memset (&l->wu, 0, sizeof (l->wu));
}

struct guardian *local_guardian (void *ctx)
{
    return ((struct local *)ctx)->guard;
}

static void local_destroy (void *ctx)
{
    struct local *l = ctx;

    if (l) {
#if HAVE_HWLOC
        binding_plan_destroy (l->plan);
#endif
        while (l->drains) {
            struct ldrain *d = l->drains;
            l->drains = d->next;
            if (!d->reaped)
                kill (-d->pid, SIGKILL);
            drain_free (l, d);
        }
        guardian_stop (l->guard);
        if (l->dup_out_fd >= 0)
            close (l->dup_out_fd);
        if (l->dup_err_fd >= 0)
            close (l->dup_err_fd);
        free (l->lw);
        free (l);
    }
}

/* ---- output routing ------------------------------------------------------- */

/* 1 if fd is a terminal or /dev/null (or cannot be looked at): a worker
 * that inherits it needs no pty. */
static int terminal_or_null (int fd)
{
    struct stat st, null;

    if (isatty (fd) || fstat (fd, &st) < 0)
        return 1;
    return S_ISCHR (st.st_mode) && stat ("/dev/null", &null) == 0 &&
           st.st_rdev == null.st_rdev;
}

static void plan_stream (const struct elastic_agent_spec *spec,
                         const struct worker *w,
                         int bit,
                         struct output_plan *p)
{
    int redir = stdmap_get (&spec->redirects, w->local_rank) & bit;
    int tee = stdmap_get (&spec->tee, w->local_rank) & bit;
    int nfilters = bit == STD_OUT ? spec->ndup_out : spec->ndup_err;
    int console = (!redir || tee) && spec_rank_on_console (spec, w->local_rank);

    memset (p, 0, sizeof (*p));
    p->want_file = redir || tee;
    p->console_fd = console ? (bit == STD_OUT ? STDOUT_FILENO : STDERR_FILENO) : -1;
    p->want_dup = console && nfilters > 0;
    if (spec->prefix_template)
        template_expand (spec->prefix_template,
                         spec->role,
                         w->local_rank,
                         w->rank,
                         host_name (),
                         p->prefix,
                         sizeof (p->prefix));
    else if (tee)
        template_expand ("[${role_name}${local_rank}]:",
                         spec->role,
                         w->local_rank,
                         w->rank,
                         host_name (),
                         p->prefix,
                         sizeof (p->prefix));
    if (console && (p->prefix[0] || p->want_file || p->want_dup))
        p->mode = OUTPUT_PIPE;
    else if (console)
        p->mode = OUTPUT_INHERIT;
    else if (p->want_file)
        p->mode = OUTPUT_FILE;
    else
        p->mode = OUTPUT_NULL;
    /* stdout that does not go to a terminal goes through the agent's pty
     * (open_stream), so that the worker line-buffers it as under mpirun */
    if (bit == STD_OUT && (p->mode == OUTPUT_FILE || (p->mode == OUTPUT_INHERIT &&
                                                      !terminal_or_null (p->console_fd))))
        p->mode = OUTPUT_PIPE;
}

/* Descriptors for one stream: *child_fd for the worker (-1: inherit),
 * *stream for the agent side. */
static int open_stream (struct local *l,
                        const struct worker *w,
                        int bit,
                        int *child_fd,
                        struct ostream **stream,
                        elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = l->spec;
    struct output_plan p;
    char path[PATH_MAX];
    int file_fd = -1, pfd[2];

    *child_fd = -1;
    *stream = NULL;
    plan_stream (spec, w, bit, &p);
    if (p.want_file) {
        if (pathfmt (path,
                     sizeof (path),
                     "%s/%s",
                     w->dir,
                     bit == STD_OUT ? "stdout.log" : "stderr.log") < 0 ||
            (file_fd = open (
                 path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644)) < 0) {
            return errprintf (err, "cannot create %s: %s", path, strerror (errno));
        }
    }
    switch (p.mode) {
        case OUTPUT_INHERIT:
            return 0;
        case OUTPUT_NULL:
            if ((*child_fd = open ("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
                return errprintf (err, "/dev/null: %s", strerror (errno));
            }
            return 0;
        case OUTPUT_FILE:
            *child_fd = file_fd;
            return 0;
        case OUTPUT_PIPE:
            break;
    }
    if (bit == STD_OUT) {
        if (output_pty (&pfd[0], &pfd[1]) < 0) {
            errprintf (err, "pseudo-terminal for stdout: %s", strerror (errno));
            goto error;
        }
    } else if (pipe2 (pfd, O_CLOEXEC) < 0) {
        errprintf (err, "pipe: %s", strerror (errno));
        goto error;
    } else
        fcntl (pfd[0], F_SETFL, fcntl (pfd[0], F_GETFL) | O_NONBLOCK);
    if (!(*stream = ostream_create (
              pfd[0],
              file_fd,
              p.console_fd,
              p.want_dup ? (bit == STD_OUT ? l->dup_out_fd : l->dup_err_fd) : -1,
              bit == STD_OUT ? spec->dup_out : spec->dup_err,
              bit == STD_OUT ? spec->ndup_out : spec->ndup_err,
              p.prefix))) {
        errprintf (err, "out of memory");
        close (pfd[0]);
        close (pfd[1]);
        goto error;
    }
    *child_fd = pfd[1];
    return 0;
error:
    if (file_fd >= 0)
        close (file_fd);
    return -1;
}

void local_on_output (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct ostream **sp = arg;

    if (*sp && ostream_read (*sp, 16) != 1) {
        elastic_agent_unwatch (agent, fd);
        ostream_destroy (*sp);
        *sp = NULL;
    }
}

static void close_streams (struct local *l, struct lworker *lw)
{
    if (lw->out) {
        elastic_agent_unwatch (l->agent, ostream_fd (lw->out));
        ostream_destroy (lw->out);
        lw->out = NULL;
    }
    if (lw->err) {
        elastic_agent_unwatch (l->agent, ostream_fd (lw->err));
        ostream_destroy (lw->err);
        lw->err = NULL;
    }
}

/* ---- reaping -------------------------------------------------------------- */

static void worker_reaped (struct local *l, int i, int status)
{
    struct lworker *lw = &l->lw[i];

    lw->reaped = 1;
    if (lw->pidfd >= 0) {
        elastic_agent_unwatch (l->agent, lw->pidfd);
        close (lw->pidfd);
        lw->pidfd = -1;
    }
    /* the output written before the exit comes first */
    if (lw->out)
        local_on_output (l->agent, ostream_fd (lw->out), 0, &lw->out);
    if (lw->err)
        local_on_output (l->agent, ostream_fd (lw->err), 0, &lw->err);
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0 && l->spec->fn) {
        char path[PATH_MAX];
        size_t len;
        char *buf;
        if (pathfmt (path,
                     sizeof (path),
                     "%s/return.bin",
                     elastic_agent_worker_dir (l->agent, i)) == 0 &&
            (buf = read_file (path, 64u << 20, &len))) {
            elastic_agent_worker_set_return (l->agent, i, buf, len);
            free (buf);
        }
    }
    if (l->wu.reaped)
        l->wu.reaped (l->wu.arg, i, status);
    else if (WIFSIGNALED (status))
        elastic_agent_worker_exited (l->agent, i, 0, WTERMSIG (status));
    else
        elastic_agent_worker_exited (l->agent, i, WEXITSTATUS (status), 0);
}

static int index_of (struct local *l, pid_t pid)
{
    for (int i = 0; i < l->n; i++)
        if (l->lw[i].pid == pid && !l->lw[i].reaped)
            return i;
    return -1;
}

/* Reap workers that exited and, as a subreaper, orphans. */
void local_reap (struct local *l)
{
    int status;
    pid_t pid;

    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        if (lw->pid <= 0 || lw->reaped)
            continue;
        pid = waitpid (lw->pid, &status, WNOHANG);
        if (pid == lw->pid)
            worker_reaped (l, i, status);
        else if (pid < 0 && errno == ECHILD) {
            /* someone else reaped it: its status is lost */
            log_warn ("worker pid %d was reaped elsewhere", (int)lw->pid);
            worker_reaped (l, i, 1 << 8);
        }
    }
    drain_reap (l);
    if (!l->spec->subreaper)
        return;
    while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
        int i = index_of (l, pid);
        if (i >= 0)
            worker_reaped (l, i, status);
        else if (drain_reaped_pid (l, pid, status))
            ;
        else if (pid == guardian_pid (l->guard))
            log_err ("the guardian process %d exited unexpectedly", (int)pid);
        else
            log_debug ("reaped orphan %d", (int)pid);
    }
}

static void on_pidfd (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct local *l = arg;
    local_reap (l);
}

/* ---- start ------------------------------------------------------------------ */

/* 1 if the NULL-terminated list v sets the variable of "NAME=value" e. */
static int env_sets (char *const *v, const char *e)
{
    size_t len = strcspn (e, "=");

    for (; v && *v; v++)
        if (strncmp (*v, e, len) == 0 && (*v)[len] == '=')
            return 1;
    return 0;
}

/* The agent's environment (without what the wire-up drops) overlaid with
 * the NULL-terminated lists of layers, each winning over the ones before
 * it: the contract's variables, the wire-up's, the binding's. */
static char **build_environ (struct local *l, char *const *layers[], int nlayers)
{
    size_t n = 0, k = 0;
    char **env;

    for (char **e = environ; e && *e; e++)
        n++;
    for (int j = 0; j < nlayers; j++)
        for (char *const *a = layers[j]; a && *a; a++)
            n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return NULL;
    for (char **e = environ; e && *e; e++) {
        int over = l->wu.drop && l->wu.drop (l->wu.arg, *e);
        for (int j = 0; j < nlayers && !over; j++)
            over = env_sets (layers[j], *e);
        if (!over)
            env[k++] = *e;
    }
    for (int j = 0; j < nlayers; j++) {
        for (char *const *a = layers[j]; a && *a; a++) {
            int over = 0;
            for (int m = j + 1; m < nlayers && !over; m++)
                over = env_sets (layers[m], *a);
            if (!over)
                env[k++] = *a;
        }
    }
    env[k] = NULL;
    return env;
}

/* ---- binding ---------------------------------------------------------------- */

#if HAVE_HWLOC
/* The local ranks of the node that this agent's workers are among: the
 * launcher's local size in wrapper mode, else this agent's workers. */
static int node_local_ranks (struct local *l)
{
    const struct elastic_agent_rdzv_info *ri = agent_rendezvous_info (l->agent);
    int n = ri->node_local_size > 0 ? ri->node_local_size : l->nslots;

    if (ri->local_rank_base + l->nslots > n)
        n = ri->local_rank_base + l->nslots;
    return n;
}
#endif

/* Compute this start's plan (none unless binding was asked for) and log
 * its note once.  Returns ELASTIC_OK, or ELASTIC_ERR_INVAL with err set
 * when the plan cannot be made. */
static int binding_prepare (struct local *l, elastic_error_t *err)
{
#if HAVE_HWLOC
    const struct elastic_agent_spec *spec = l->spec;
    struct binding_opts opts;
    char msg[1024];
    const char *note;
    int nlocal;

    binding_plan_destroy (l->plan);
    l->plan = NULL;
    if (!spec_binding_wanted (spec))
        return ELASTIC_OK;
    nlocal = node_local_ranks (l);
    spec_binding_opts (spec, nlocal, l->nslots, &opts);
    if (!(l->plan = binding_plan_create (&opts, nlocal, err)))
        return ELASTIC_ERR_INVAL;
    /* (a member that joined a running job has no workers of its own yet) */
    note = spec_binding_note (l->plan,
                              elastic_agent_worker_count (l->agent) > 0
                                  ? agent_worker (l->agent, 0)->local_rank
                                  : 0,
                              msg,
                              sizeof (msg));
    if (note[0] && strcmp (note, l->note) != 0) {
        if (spec->binding.policy != BINDING_NONE)
            log_warn ("binding: %s", note);
        else
            log_info ("binding: %s", note);
        snprintf (l->note, sizeof (l->note), "%s", note);
    }
#else
    (void)l;
    (void)err;
#endif
    return ELASTIC_OK;
}

/* The variables the plan sets for worker i: CUDA_VISIBLE_DEVICES when the
 * plan chose it, and CUDA_DEVICE_ORDER=PCI_BUS_ID (so that CUDA numbers
 * GPUs as hwloc did) when the plan found a GPU and the variable is unset.
 * v has room for 3 pointers; cvd holds the first string. */
static void binding_env (struct local *l, int i, char **v, char *cvd, size_t cvdsz)
{
    static char order[] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
    int k = 0;
#if HAVE_HWLOC
    const struct binding_slot *s =
        l->plan ? binding_plan_slot (l->plan, agent_worker (l->agent, i)->local_rank)
                : NULL;

    if (s && s->cuda_visible_devices[0] &&
        snprintf (cvd, cvdsz, "CUDA_VISIBLE_DEVICES=%s", s->cuda_visible_devices) <
            (int)cvdsz)
        v[k++] = cvd;
    if (s && s->gpu >= 0 && !getenv ("CUDA_DEVICE_ORDER"))
        v[k++] = order;
#else
    (void)l;
    (void)i;
    (void)cvd;
    (void)cvdsz;
    (void)order;
#endif
    v[k] = NULL;
}

/* In the child: bind as planned, or report why not (on the worker's
 * stderr and in its error file, so the failure report shows it) and exit
 * 126. */
static void binding_apply_or_exit (struct local *l, int i)
{
#if HAVE_HWLOC
    const struct worker *w = agent_worker (l->agent, i);
    elastic_error_t e;
    char line[1100];
    int n;

    if (!l->plan || binding_apply (l->plan, w->local_rank, &e) == 0)
        return;
    n = snprintf (line, sizeof (line), "elastic-exec: %s\n", e.text);
    if (n < 0 || n >= (int)sizeof (line))
        n = (int)strlen (line);
    (void)write_all (STDERR_FILENO, line, (size_t)n);
    (void)errorfile_write (w->error_file, e.text, wall_now ());
    _exit (126);
#else
    (void)l;
    (void)i;
#endif
}

/* Log worker i's placement and put it in the event log. */
static void binding_report (struct local *l, int i, pid_t pid)
{
#if HAVE_HWLOC
    elastic_agent_t *agent = l->agent;
    const struct worker *w = agent_worker (agent, i);
    const struct binding_slot *s =
        l->plan ? binding_plan_slot (l->plan, w->local_rank) : NULL;
    char line[2048];

    if (!s)
        return;
    if (binding_format (l->plan, w->local_rank, w->rank, line, sizeof (line)) >= 0)
        log_info ("binding: %s pid %d", line, (int)pid);
    eventlog_emit (agent_eventlog (agent),
                   "worker_binding",
                   json_pack ("{s:i s:i s:i s:i s:s s:i s:b s:s s:b s:i s:s s:s}",
                              "rank",
                              w->rank,
                              "local_rank",
                              w->local_rank,
                              "pid",
                              (int)pid,
                              "attempt",
                              agent_attempt (agent),
                              "cpus",
                              s->cpus,
                              "ncores",
                              s->ncores,
                              "kept",
                              s->kept,
                              "numa",
                              s->mems,
                              "membind",
                              s->membind,
                              "gpu",
                              s->gpu,
                              "gpu_busid",
                              s->gpu_busid,
                              "cuda_visible_devices",
                              s->cuda_visible_devices));
#else
    (void)l;
    (void)i;
    (void)pid;
#endif
}

/* Write the function's result where the agent reads it. */
static void save_return (const char *dir, const void *buf, size_t len)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    int fd;

    if (pathfmt (path, sizeof (path), "%s/return.bin", dir) < 0 ||
        pathfmt (tmp, sizeof (tmp), "%s/.return.bin.tmp", dir) < 0)
        return;
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return;
    if (write_all (fd, buf, len) == 0 && close (fd) == 0)
        rename (tmp, path);
    else
        unlink (tmp);
}

/* The child between fork or vfork and exec.  After a vfork it shares the
 * agent's memory while the agent's other threads run: up to the exec it
 * makes system calls and reads the agent's state, never allocates (the
 * placement, which does, and a function entrypoint take the fork path). */
static void __attribute__ ((noreturn))
child (struct local *l, int i, char **env, int out_fd, int err_fd, pid_t parent)
{
    elastic_agent_t *agent = l->agent;
    const struct elastic_agent_spec *spec = l->spec;
    char *const *argv = elastic_agent_worker_argv (agent, i);

    setpgid (0, 0);
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (127); /* the agent died before we got here */
    elastic_agent_child_reset (agent);
    /* an MPI rank (the PMIx backend's, or a wrapper's under mpirun or
     * srun): Open MPI's TCP transport writes to a peer that went away with
     * writev, and SIGPIPE's default would kill a survivor (under
     * elastic-mpirun, when a new process of a growth that was rolled back
     * exits: t7013 join-dies, ranks 1 and 7 dead of SIGPIPE, the job hung)
     * where EPIPE reports the peer failed */
    if (l->wu.ignore_sigpipe || spec->wrapper)
        signal (SIGPIPE, SIG_IGN); /* stays ignored across exec */
    if (out_fd >= 0 && dup2 (out_fd, STDOUT_FILENO) < 0)
        _exit (127);
    if (err_fd >= 0 && dup2 (err_fd, STDERR_FILENO) < 0)
        _exit (127);
    binding_apply_or_exit (l, i);
    if (l->lw[i].cwd && chdir (l->lw[i].cwd) < 0) {
        char msg[PATH_MAX + 128];
        int n = snprintf (msg,
                          sizeof (msg),
                          "elastic-exec: cannot change to the directory %s: %s\n",
                          l->lw[i].cwd,
                          strerror (errno));
        if (n < 0 || n >= (int)sizeof (msg))
            n = (int)strlen (msg);
        (void)write_all (STDERR_FILENO, msg, (size_t)n);
        _exit (127);
    }
    if (argv && l->wu.close_fds) {
        /* a PMIx server's accepted sockets are not close-on-exec: the
         * program gets 0, 1 and 2 only */
#ifdef SYS_close_range
        if (syscall (SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) < 0)
#endif
            for (int fd = 3; fd < 65536; fd++)
                fcntl (fd, F_SETFD, FD_CLOEXEC);
    }
    if (argv) {
        execvpe (argv[0], argv, env);
        char msg[PATH_MAX + 128];
        int n = snprintf (msg,
                          sizeof (msg),
                          "elastic-exec: cannot run %s: %s\n",
                          argv[0],
                          strerror (errno));
        if (n < 0 || n >= (int)sizeof (msg))
            n = (int)strlen (msg);
        (void)write_all (STDERR_FILENO, msg, (size_t)n);
        _exit (127);
    }
    /* a function entrypoint: its environment is the worker's */
    for (int k = 0; k < l->n; k++) {
        if (l->lw[k].out)
            close (ostream_fd (l->lw[k].out));
        if (l->lw[k].err)
            close (ostream_fd (l->lw[k].err));
        if (l->lw[k].pidfd >= 0)
            close (l->lw[k].pidfd);
    }
    for (struct ldrain *d = l->drains; d; d = d->next) {
        if (d->out)
            close (ostream_fd (d->out));
        if (d->err)
            close (ostream_fd (d->err));
        if (d->pidfd >= 0)
            close (d->pidfd);
    }
    environ = env;
    void *ret = NULL;
    size_t retlen = 0;
    int rc = spec->fn (spec->fn_arg, &ret, &retlen);
    if (ret) {
        save_return (elastic_agent_worker_dir (agent, i), ret, retlen);
        free (ret);
    }
    fflush (NULL);
    _exit (rc & 0xff);
}

static int start_one (struct local *l, int i, const char *cwd, elastic_error_t *err)
{
    elastic_agent_t *agent = l->agent;
    struct lworker *lw = &l->lw[i];
    const struct worker *w = agent_worker (agent, i);
    int out_fd = -1, err_fd = -1, rc = ELASTIC_ERR_IO;
    elastic_error_t e = {{0}};
    char cvd[1100], *extra[3];
    char *const *layers[3];
    char **env = NULL;
    pid_t pid;

    memset (lw, 0, sizeof (*lw));
    lw->pidfd = -1;
    lw->cwd = cwd;
    if (open_stream (l, w, STD_OUT, &out_fd, &lw->out, &e) < 0 ||
        open_stream (l, w, STD_ERR, &err_fd, &lw->err, &e) < 0)
        goto out;
    binding_env (l, i, extra, cvd, sizeof (cvd));
    layers[0] = elastic_agent_worker_env (agent, i);
    layers[1] = l->wu.env ? l->wu.env (l->wu.arg, i) : NULL;
    layers[2] = extra;
    if (!(env = build_environ (l, layers, 3))) {
        errprintf (&e, "out of memory");
        goto out;
    }
    fflush (NULL);
    /* A program that needs no placement starts from a vfork: no copy of the
     * agent's page tables and no copy-on-write faults in either process
     * (B7: about a third of a wrapper's start).  The child makes only
     * system calls until its exec (see child()); a placement (hwloc) or a
     * function entrypoint needs a real fork. */
    if (elastic_agent_worker_argv (agent, i) && !l->plan)
        pid = vfork ();
    else
        pid = fork ();
    if (pid < 0) {
        errprintf (&e, "fork: %s", strerror (errno));
        goto out;
    }
    if (pid == 0)
        child (l, i, env, out_fd, err_fd, l->agent_pid);
    setpgid (pid, pid);
    lw->pid = pid;
    lw->cwd = NULL;
    if (l->wu.started)
        l->wu.started (l->wu.arg, i, pid);
    if (l->guard && guardian_add (l->guard, pid) < 0)
        log_warn ("guardian: %s", strerror (errno));
    lw->pidfd = (int)syscall (SYS_pidfd_open, pid, 0);
    if (lw->pidfd >= 0) {
        fcntl (lw->pidfd, F_SETFD, FD_CLOEXEC);
        if (elastic_agent_watch (agent, lw->pidfd, on_pidfd, l) != ELASTIC_OK) {
            close (lw->pidfd);
            lw->pidfd = -1;
        }
    }
    if (lw->out)
        elastic_agent_watch (agent, ostream_fd (lw->out), local_on_output, &lw->out);
    if (lw->err)
        elastic_agent_watch (agent, ostream_fd (lw->err), local_on_output, &lw->err);
    elastic_agent_worker_started (agent, i, pid);
    binding_report (l, i, pid);
    rc = ELASTIC_OK;
out:
    free (env);
    if (out_fd >= 0)
        close (out_fd);
    if (err_fd >= 0)
        close (err_fd);
    if (rc != ELASTIC_OK) {
        close_streams (l, lw);
        errprintf (err, "starting rank %d: %s", w->rank, e.text);
    }
    return rc;
}

static int
open_dup_file (struct local *l, const char *name, int *fd, elastic_error_t *err)
{
    char path[PATH_MAX];

    if (*fd >= 0)
        close (*fd);
    if (pathfmt (path, sizeof (path), "%s/%s", agent_attempt_dir (l->agent), name) < 0 ||
        (*fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) <
            0) {
        return errprintf (err, "cannot create %s: %s", path, strerror (errno));
    }
    return 0;
}

static int local_start (elastic_agent_t *agent, void *ctx, elastic_error_t *err)
{
    struct local *l = ctx;
    const struct elastic_agent_spec *spec = l->spec;
    const char *tmp = agent_temp_dir (agent);
    elastic_error_t gerr;
    int rc;

    l->agent_pid = getpid ();
    if (!l->guard) {
        if (!(l->guard = guardian_start (&gerr)))
            log_warn ("%s: worker process groups will not be cleaned up if the agent is "
                      "killed",
                      gerr.text);
        else if (tmp)
            guardian_add_dir (l->guard, tmp); /* if the agent is killed */
    }
    if (spec->ndup_out > 0 &&
        open_dup_file (l, "filtered_stdout.log", &l->dup_out_fd, err) < 0)
        return ELASTIC_ERR_IO;
    if (spec->ndup_err > 0 &&
        open_dup_file (l, "filtered_stderr.log", &l->dup_err_fd, err) < 0)
        return ELASTIC_ERR_IO;
    if ((rc = binding_prepare (l, err)) != ELASTIC_OK)
        return rc;
    /* the workers spawned into the last attempt went with it */
    l->n = l->nslots;
    for (int i = 0; i < l->n; i++)
        if ((rc = start_one (l, i, NULL, err)) != ELASTIC_OK)
            break;
#if HAVE_HWLOC
    /* the children have their copies */
    binding_plan_destroy (l->plan);
    l->plan = NULL;
#endif
    return rc;
}

int local_start_extra (void *ctx, int index, const char *cwd, elastic_error_t *err)
{
    struct local *l = ctx;
    int rc;

    if (index != l->n || index >= elastic_agent_worker_count (l->agent)) {
        errprintf (err, "worker %d is not the next record to start", index);
        return ELASTIC_ERR_INVAL;
    }
    if (l->n == l->lwcap) {
        int cap = l->lwcap * 2 + 4;
        struct lworker *nl = realloc (l->lw, (size_t)cap * sizeof (*nl));
        if (!nl) {
            errprintf (err, "out of memory");
            return ELASTIC_ERR_NOMEM;
        }
        /* the output watches point at the streams' slots: move them */
        for (int i = 0; i < l->n; i++) {
            if (nl[i].out)
                elastic_agent_unwatch (l->agent, ostream_fd (nl[i].out));
            if (nl[i].err)
                elastic_agent_unwatch (l->agent, ostream_fd (nl[i].err));
        }
        l->lw = nl;
        l->lwcap = cap;
        for (int i = 0; i < l->n; i++) {
            if (nl[i].out)
                elastic_agent_watch (
                    l->agent, ostream_fd (nl[i].out), local_on_output, &nl[i].out);
            if (nl[i].err)
                elastic_agent_watch (
                    l->agent, ostream_fd (nl[i].err), local_on_output, &nl[i].err);
        }
    }
    memset (&l->lw[index], 0, sizeof (l->lw[index]));
    l->lw[index].pidfd = -1;
    l->n++;
    if ((rc = binding_prepare (l, err)) == ELASTIC_OK)
        rc = start_one (l, index, cwd, err);
#if HAVE_HWLOC
    binding_plan_destroy (l->plan);
    l->plan = NULL;
#endif
    /* a record that could not start keeps its place (pid 0): the core's
     * and the backend's indexes stay one */
    return rc;
}

/* ---- monitor, stop, shutdown ----------------------------------------------- */

static int local_monitor (elastic_agent_t *agent, void *ctx)
{
    local_reap (ctx);
    drain_check (ctx);
    return ELASTIC_OK;
}

static void local_child_event (elastic_agent_t *agent, void *ctx)
{
    local_reap (ctx);
}

static int all_reaped (elastic_agent_t *agent, void *arg)
{
    struct local *l = arg;

    local_reap (l);
    drain_check (l); /* their deadlines run during any wait */
    for (int i = 0; i < l->n; i++)
        if (l->lw[i].pid > 0 && !l->lw[i].reaped)
            return 0;
    return 1;
}

static void signal_groups (struct local *l, int signum, int only_live)
{
    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        if (lw->pid <= 0 || (only_live && lw->reaped))
            continue;
        if (kill (-lw->pid, signum) < 0 && errno == ESRCH && !lw->reaped)
            kill (lw->pid, signum);
    }
}

/* SIGKILL what is left in the workers' process groups and, as the
 * subreaper that inherits those orphans, reap them (bounded wait). */
static void sweep_groups (struct local *l)
{
    double deadline = mono_now () + 2.0;
    int left;

    signal_groups (l, SIGKILL, 0);
    if (!l->spec->subreaper)
        return;
    do {
        left = 0;
        local_reap (l);
        for (int i = 0; i < l->n; i++)
            if (l->lw[i].pid > 0 && kill (-l->lw[i].pid, 0) == 0)
                left++;
        if (left)
            usleep (1000);
    } while (left && mono_now () < deadline);
}

static int local_stop (elastic_agent_t *agent, void *ctx, struct elastic_agent_stop *req)
{
    struct local *l = ctx;
    int signum = req->signum, rc = ELASTIC_OK, detach;
    double timeout = req->timeout;

    req->detached = 0;
    if (!all_reaped (agent, l)) {
        /* decided before the signal: who handles it is visible only then */
        detach = (req->flags & ELASTIC_AGENT_STOP_DETACH) && !l->no_detach &&
                 signum > 0 && drain_stops_promptly (l, signum);
        /* their teardown (unmapping what may be gigabytes) needs no hurry:
         * the next attempt's processes get the CPUs first */
        for (int i = 0; detach && i < l->n; i++)
            if (l->lw[i].pid > 0 && !l->lw[i].reaped)
                setpriority (PRIO_PGRP, (id_t)l->lw[i].pid, 19);
        if (signum > 0)
            signal_groups (l, signum, 1);
        /* a stopped worker (SIGSTOP, a tracer gone) acts on no signal but
         * SIGKILL until it runs again: continue it, as systemd does after
         * its stop signal, so that it ends now and not at the timeout */
        if (signum > 0 && signum != SIGKILL && signum != SIGCONT)
            signal_groups (l, SIGCONT, 1);
        if (detach) {
            req->detached = drain_detach_live (l, timeout);
            log_debug ("%d stopped worker%s left to exit in the background",
                       req->detached,
                       req->detached == 1 ? "" : "s");
        }
        /* what was not detached (a failed worker, whose exit the core
         * still reports) is waited for */
        if (signum != SIGKILL &&
            elastic_agent_wait (agent, timeout, all_reaped, l) != ELASTIC_OK) {
            int left = 0;
            for (int i = 0; i < l->n; i++)
                if (l->lw[i].pid > 0 && !l->lw[i].reaped)
                    left++;
            log_warn ("%d worker%s still running after %.1f s: sending SIGKILL",
                      left,
                      left == 1 ? "" : "s",
                      timeout);
            eventlog_emit (agent_eventlog (agent),
                           "kill",
                           json_pack ("{s:i s:f}", "workers", left, "after_s", timeout));
        }
        signal_groups (l, SIGKILL, 1);
        if (elastic_agent_wait (agent, 10.0, all_reaped, l) != ELASTIC_OK) {
            log_err ("workers did not die within 10 s of SIGKILL");
            rc = ELASTIC_ERR_STATE;
        }
    }
    /* whatever the workers left behind in their groups goes too */
    sweep_groups (l);
    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        close_streams (l, lw);
        if (lw->pid > 0 && l->guard)
            guardian_remove (l->guard, lw->pid);
        if (lw->pidfd >= 0) {
            elastic_agent_unwatch (agent, lw->pidfd);
            close (lw->pidfd);
            lw->pidfd = -1;
        }
    }
    local_reap (l);
    return rc;
}

static void local_shutdown (elastic_agent_t *agent, void *ctx, int signum, double timeout)
{
    struct local *l = ctx;

    struct elastic_agent_stop req = {.signum = signum, .timeout = timeout};

    /* stops what still runs; sweeps the groups of what exited */
    local_stop (agent, ctx, &req);
    drain_finish (l);
    /* the guardian removes the temporary directory as it stops: forgotten
     * here and removed by the agent later, it was left behind whenever
     * the agent was killed in between (a wrapper that mpirun SIGKILLs
     * 0.25 s after its SIGTERM) */
    guardian_stop (l->guard);
    l->guard = NULL;
    if (l->dup_out_fd >= 0)
        close (l->dup_out_fd);
    if (l->dup_err_fd >= 0)
        close (l->dup_err_fd);
    l->dup_out_fd = l->dup_err_fd = -1;
}

const struct elastic_agent_backend local_backend = {
    .abi = ELASTIC_AGENT_BACKEND_ABI,
    .name = "local",
    .start_workers = local_start,
    .monitor_workers = local_monitor,
    .stop_workers = local_stop,
    .shutdown = local_shutdown,
    .child_event = local_child_event,
    .destroy = local_destroy,
};
