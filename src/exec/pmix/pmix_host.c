/* pmix_host.c - the PMIx server elastic-exec hosts for its local MPI ranks
 *
 * The caller's side: starting and stopping the server, jobs (namespaces),
 * the event queue, and what a rank's exit means.  State lives in struct
 * pmixhost and its jobs (pmix_host_impl.h), under one mutex; PMIx's
 * progress thread updates it from the upcalls in pmix_upcalls.c.  Every
 * PMIx call that may block (register, deregister, notify) is made from the
 * caller's thread, never with the mutex held, so neither side can wait for
 * the other.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>
#include <pmix_server.h>

#include "common/error.h"
#include "pmix_host.h"
#include "pmix_host_impl.h"
#include "exec/jobmap.h"
#include "pmix_jobinfo.h"
#include "pmix_nodelay.h"
#include "pmix_transport.h"

/* Open MPI 5.0's MPI_Init runs four fences over the whole namespace: a
 * modex and a barrier in ompi_mpi_instance_init, then again in
 * ompi_mpi_init (measured with 5.0.7). */
#define OMPI5_INIT_FENCES 4

/* PMIx upcalls carry no context pointer: the one server of this process,
 * and the upcalls that hold it (pmixhost_get). */
struct pmixhost *pmixhost_self;
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t self_idle = PTHREAD_COND_INITIALIZER;
static int self_users;

/* How long pmixhost_destroy waits for the upcalls in flight (they never
 * block, so only a thread that is not scheduled takes long). */
#define SELF_DRAIN_S 2

struct pmixhost *pmixhost_get (void)
{
    struct pmixhost *h;

    pthread_mutex_lock (&self_lock);
    if ((h = pmixhost_self))
        self_users++;
    pthread_mutex_unlock (&self_lock);
    return h;
}

void pmixhost_put (struct pmixhost *h)
{
    if (!h)
        return;
    pthread_mutex_lock (&self_lock);
    if (--self_users == 0)
        pthread_cond_broadcast (&self_idle);
    pthread_mutex_unlock (&self_lock);
}

/* Unpublish h and wait until no upcall holds it.  0 when none does, -1
 * when one still did after SELF_DRAIN_S (h must not be freed then). */
static int self_unpublish (struct pmixhost *h)
{
    struct timespec until;
    int rc = 0;

    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_sec += SELF_DRAIN_S;
    pthread_mutex_lock (&self_lock);
    if (pmixhost_self == h)
        pmixhost_self = NULL;
    while (self_users > 0 && rc == 0)
        rc = pthread_cond_timedwait (&self_idle, &self_lock, &until);
    rc = self_users > 0 ? -1 : 0;
    pthread_mutex_unlock (&self_lock);
    return rc;
}

double pmixhost_now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (flag == FTW_DP || flag == FTW_D)
        rmdir (path);
    else
        unlink (path);
    return 0;
}

/* rm -rf path (errors ignored: what is left shows up in the tests). */
static void remove_tree (const char *path)
{
    if (path[0])
        nftw (path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the event queue (caller holds h->lock) ------------------------------ */

void pmixhost_push_event (struct pmixhost *h,
                          struct pmixhost_job *job,
                          int type,
                          int rank,
                          int status,
                          const char *msg)
{
    struct event_item *it = calloc (1, sizeof (*it));
    char c = 1;

    if (!it)
        return; /* the state is recorded; only the notice is lost */
    it->ev.type = type;
    it->ev.job = job;
    it->ev.rank = rank;
    it->ev.status = status;
    it->ev.time = pmixhost_now ();
    if (msg)
        snprintf (it->ev.message, sizeof (it->ev.message), "%s", msg);
    if (h->tail)
        h->tail->next = it;
    else
        h->head = it;
    h->tail = it;
    if (write (h->pipefd[1], &c, 1) < 0) {
        /* EAGAIN: the pipe is already readable */
    }
}

void pmixhost_push_spawn_event (struct pmixhost *h,
                                struct pmixhost_job *job,
                                int type,
                                struct pmixhost_spawn *sp)
{
    pmixhost_push_event (h, job, type, -1, 0, NULL);
    if (h->tail && h->tail->ev.type == type && !h->tail->ev.spawn)
        h->tail->ev.spawn = sp;
}

static void drain_pipe (struct pmixhost *h)
{
    char buf[256];

    while (read (h->pipefd[0], buf, sizeof (buf)) > 0)
        ;
}

/* Drop the queued events of job (its pointer is about to die). */
static void drop_events (struct pmixhost *h, struct pmixhost_job *job)
{
    struct event_item **pp = &h->head, *it;

    h->tail = NULL;
    while ((it = *pp)) {
        if (it->ev.job == job) {
            *pp = it->next;
            free (it);
        } else {
            h->tail = it;
            pp = &it->next;
        }
    }
}

/* ---- lookups (caller holds h->lock) -------------------------------------- */

struct pmixhost_job *pmixhost_find_job (struct pmixhost *h, const char *nspace)
{
    for (struct pmixhost_job *j = h->jobs; j; j = j->next)
        if (PMIX_CHECK_NSPACE (j->nspace, nspace))
            return j;
    return NULL;
}

struct rank_state *pmixhost_find_rank (struct pmixhost *h,
                                       const pmix_proc_t *proc,
                                       struct pmixhost_job **jobp)
{
    struct pmixhost_job *job;

    if (!h || !proc || !(job = pmixhost_find_job (h, proc->nspace)))
        return NULL;
    if (proc->rank >= (pmix_rank_t)job->nranks)
        return NULL;
    *jobp = job;
    return &job->r[proc->rank];
}

/* ---- the server ----------------------------------------------------------- */

static const char *env_localonly = "PMIX_MCA_pmix_server_fence_localonly_opt";
static const char *env_gds = "PMIX_MCA_gds";

/* Set name=value for the duration of PMIx_server_init; *saved gets the old
 * value (malloc'ed) or NULL. */
static void env_push (const char *name, const char *value, char **saved)
{
    const char *old = getenv (name);

    *saved = old ? strdup (old) : NULL;
    setenv (name, value, 1);
}

static void env_pop (const char *name, char *saved)
{
    if (saved)
        setenv (name, saved, 1);
    else
        unsetenv (name);
    free (saved);
}

struct pmixhost *pmixhost_create (const struct pmixhost_opts *opts, elastic_error_t *err)
{
    struct pmixhost *h;
    const char *tmp = opts && opts->tmpdir ? opts->tmpdir : getenv ("TMPDIR");
    char *saved_lo, *saved_gds;
    sigset_t all, old;
    pmix_info_t info[6];
    pmix_status_t rc, code = PMIX_ERR_LOST_CONNECTION;
    pmix_rank_t myrank = 0;
    bool yes = true;
    struct nodelay_set before;
    char name[64];
    int n;

    pthread_mutex_lock (&self_lock);
    n = pmixhost_self != NULL;
    pthread_mutex_unlock (&self_lock);
    if (n) {
        errprintf (err, "a PMIx server already runs in this process (one per process)");
        errno = EBUSY;
        return NULL;
    }
    /* sockets and small files: in memory unless TMPDIR says otherwise (on
     * a disk file system with online discard, removing each directory of
     * a job costs a synchronous discard, in the restart path) */
    if (!tmp || !tmp[0])
        tmp = access ("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    if (!(h = calloc (1, sizeof (*h)))) {
        errprintf (err, "out of memory");
        return NULL;
    }
    pthread_mutex_init (&h->lock, NULL);
    h->pipefd[0] = h->pipefd[1] = -1;
    h->tp = opts && opts->transport ? opts->transport : &pmixhost_transport_local;
    h->tp_ctx = opts ? opts->transport_ctx : NULL;
    if (pipe2 (h->pipefd, O_NONBLOCK | O_CLOEXEC) < 0) {
        errprintf (err, "pipe: %s", strerror (errno));
        goto error;
    }
    n = snprintf (h->dir, sizeof (h->dir), "%s/elastic-pmix.XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof (h->dir) - 64) {
        errprintf (err,
                   "tmpdir: '%s' is too long (at most %zu characters)",
                   tmp,
                   sizeof (h->dir) - 96);
        h->dir[0] = '\0';
        errno = ENAMETOOLONG;
        goto error;
    }
    if (!mkdtemp (h->dir)) {
        errprintf (
            err, "tmpdir: cannot create a directory in '%s': %s", tmp, strerror (errno));
        h->dir[0] = '\0';
        goto error;
    }

    snprintf (name, sizeof (name), "elastic-exec.%d", (int)getpid ());
    PMIX_LOAD_PROCID (&h->myproc, name, 0);
    PMIX_INFO_LOAD (&info[0], PMIX_SERVER_NSPACE, name, PMIX_STRING);
    PMIX_INFO_LOAD (&info[1], PMIX_SERVER_RANK, &myrank, PMIX_PROC_RANK);
    PMIX_INFO_LOAD (&info[2], PMIX_SERVER_TMPDIR, h->dir, PMIX_STRING);
    PMIX_INFO_LOAD (&info[3], PMIX_SYSTEM_TMPDIR, h->dir, PMIX_STRING);
    PMIX_INFO_LOAD (&info[4], PMIX_TCP_DISABLE_IPV6, &yes, PMIX_BOOL);
    /* The ranks adopt the server's topology (hwloc shared memory in the
     * server's directory) instead of each probing the machine: Open MPI's
     * own discovery binds to every core in turn, tens of milliseconds of
     * MPI_Init on a loaded node. */
    PMIX_INFO_LOAD (&info[5], PMIX_SERVER_SHARE_TOPOLOGY, &yes, PMIX_BOOL);

    /* Every fence goes to the host (the transport seam, and the end of
     * MPI_Init is seen); the hash store is the one Open MPI 5's client has. */
    env_push (env_localonly, "0", &saved_lo);
    env_push (env_gds, "hash", &saved_gds);
    if (nodelay_listeners (&before) < 0)
        memset (&before, 0, sizeof (before));
    /* PMIx's threads inherit this mask: they must never take a signal. */
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, &old);
    pthread_mutex_lock (&self_lock);
    pmixhost_self = h;
    pthread_mutex_unlock (&self_lock);
    rc = PMIx_server_init (&pmixhost_module, info, 6);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    env_pop (env_localonly, saved_lo);
    env_pop (env_gds, saved_gds);
    for (int i = 0; i < 6; i++)
        PMIX_INFO_DESTRUCT (&info[i]);
    if (rc != PMIX_SUCCESS) {
        errprintf (err, "PMIx_server_init failed: %s", PMIx_Error_string (rc));
        goto error;
    }
    h->pmix_up = 1;
    /* Not fatal: without it events are slower (pmixhost_nodelay_check
     * then returns -1, and callers can say so). */
    if (!(opts && opts->no_nodelay) && nodelay_apply (&before, &h->listeners) < 0)
        memset (&h->listeners, 0, sizeof (h->listeners));
    rc = PMIx_Register_event_handler (
        &code, 1, NULL, 0, pmixhost_lost_connection, NULL, NULL);
    if (rc < 0) {
        errprintf (err,
                   "cannot register for PMIx lost-connection events: %s",
                   PMIx_Error_string (rc));
        goto error;
    }
    h->lost_ref = (size_t)rc;
    h->lost_registered = 1;
    return h;
error:
    pmixhost_destroy (h);
    return NULL;
}

void pmixhost_destroy (struct pmixhost *h)
{
    int saved_errno = errno;

    if (!h)
        return;
    while (h->jobs)
        pmixhost_job_destroy (h->jobs);
    /* a torn namespace can leave PMIx's progress thread deadlocked (on a
     * mutex of its own, after the deaths in a fence): a blocking call
     * into it would wait for ever, and the process is about to exit */
    if (h->lost_registered && !h->tainted)
        PMIx_Deregister_event_handler (h->lost_ref, NULL, NULL);
    /* finalizing walks every namespace, a torn one too (job_may_be_torn):
     * the process is about to exit, and our directory goes below */
    if (h->pmix_up && !h->tainted)
        PMIx_server_finalize ();
    /* with PMIx finalized no upcall can come; in a tainted process PMIx's
     * progress thread runs on and may be inside one now */
    if (self_unpublish (h) < 0) {
        fprintf (stderr,
                 "elastic-exec: a PMIx upcall still ran %d s after the server "
                 "was stopped: its memory is left to the process's exit\n",
                 SELF_DRAIN_S);
        remove_tree (h->dir);
        errno = saved_errno;
        return;
    }
    if (h->tp && h->tp->destroy)
        h->tp->destroy (h->tp_ctx);
    pubsub_free_all (h);
    while (h->spawns) {
        h->spawns->cbfunc = NULL; /* PMIx is gone: nobody to answer */
        pmixhost_spawn_release (h->spawns);
    }
    remove_tree (h->dir);
    while (h->head) {
        struct event_item *it = h->head;
        h->head = it->next;
        free (it);
    }
    if (h->pipefd[0] >= 0)
        close (h->pipefd[0]);
    if (h->pipefd[1] >= 0)
        close (h->pipefd[1]);
    pthread_mutex_destroy (&h->lock);
    free (h);
    errno = saved_errno;
}

int pmixhost_fd (struct pmixhost *h)
{
    return h->pipefd[0];
}

const char *pmixhost_dir (struct pmixhost *h)
{
    return h->dir;
}

int pmixhost_nodelay_check (struct pmixhost *h, int *total)
{
    if (!h || h->listeners.n == 0) {
        errno = ENOENT;
        return -1;
    }
    return nodelay_check (&h->listeners, total);
}

/* Deregister a dead rank whose lost connection PMIx reported: only then is
 * it safe (earlier, the survivors' finalize fence waits for it forever).
 * PMIx then runs the rank's cleanups (its /dev/shm segment). */
static void deregister_rank (struct pmixhost_job *job, int rank)
{
    pmix_proc_t proc;

    PMIX_LOAD_PROCID (&proc, job->nspace, (pmix_rank_t)rank);
    PMIx_server_deregister_client (&proc, NULL, NULL);
}

int pmixhost_next_event (struct pmixhost *h, struct pmixhost_event *ev)
{
    struct event_item *it;
    struct rank_state *r;
    int dereg = -1;

    pthread_mutex_lock (&h->lock);
    if (!(it = h->head)) {
        drain_pipe (h);
        pthread_mutex_unlock (&h->lock);
        return 0;
    }
    if (!(h->head = it->next))
        h->tail = NULL;
    *ev = it->ev;
    if (ev->type == PMIXHOST_EV_LOST && ev->rank >= 0) {
        r = &ev->job->r[ev->rank];
        if (r->exited && !r->deregistered) {
            r->deregistered = 1;
            ev->job->nderegistered++;
            dereg = ev->rank;
        }
    }
    pthread_mutex_unlock (&h->lock);
    free (it);
    if (dereg >= 0)
        deregister_rank (ev->job, dereg);
    return 1;
}

/* ---- jobs ------------------------------------------------------------------ */

static int usable_cpus (void)
{
    cpu_set_t set;
    long n;

    if (sched_getaffinity (0, sizeof (set), &set) == 0)
        return CPU_COUNT (&set);
    n = sysconf (_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int valid_run_id (const char *s)
{
    size_t n = 0;

    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return n > 0 && n <= 200;
}

/* Append "name=value" to a malloc'ed argv-style array. */
static int env_add (char ***envp, const char *name, const char *value)
{
    size_t n = 0, len = strlen (name) + strlen (value) + 2;
    char **env = *envp, *s;

    while (env && env[n])
        n++;
    if (!(s = malloc (len)))
        return -1;
    snprintf (s, len, "%s=%s", name, value);
    if (!(env = realloc (env, (n + 2) * sizeof (*env)))) {
        free (s);
        return -1;
    }
    env[n] = s;
    env[n + 1] = NULL;
    *envp = env;
    return 0;
}

static void env_free (char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free (env[i]);
    free (env);
}

/* A job map this server can host: its node's leader, 1..65535 ranks in
 * all, opts->nranks 0 or the same.  Returns 0, or -1 with err and errno
 * EINVAL. */
static int job_map_check (const struct pmixhost_job_opts *opts, elastic_error_t *err)
{
    const struct jobmap *m = opts->map;
    int saved = errno;

    errno = EINVAL;
    if (m->world_size < 1 || m->world_size > 65535)
        return errprintf (
            err, "job map: %d ranks are not accepted (1-65535)", m->world_size);
    if (opts->nranks != 0 && opts->nranks != m->world_size)
        return errprintf (err,
                          "ranks: %d is not the job map's world size %d (give 0 or %d)",
                          opts->nranks,
                          m->world_size,
                          m->world_size);
    /* (-1: a member that joined the running job, with none of its ranks) */
    if (m->node_id < -1 || m->node_id >= m->nnodes)
        return errprintf (
            err, "job map: node %d is not one of its %d nodes", m->node_id, m->nnodes);
    if (!m->leader)
        return errprintf (err,
                          "job map: task %d of node %d is not the node's leader (task 0 "
                          "hosts the node's PMIx server)",
                          m->local_id,
                          m->node_id);
    errno = saved;
    return 0;
}

/* Check a job's options; *btl is Open MPI's BTL list for opts->btl.
 * Returns 0, or -1 with err and errno EINVAL. */
static int job_opts_check (const struct pmixhost_job_opts *opts,
                           const char **btl,
                           elastic_error_t *err)
{
    if (!opts->run_id || !valid_run_id (opts->run_id)) {
        errprintf (err,
                   "run id: '%s' is not accepted (1-200 characters of A-Z a-z 0-9 _ . -)",
                   opts->run_id ? opts->run_id : "");
        errno = EINVAL;
        return -1;
    }
    if (opts->attempt < 0) {
        errprintf (err, "attempt: %d is not accepted (>= 0)", opts->attempt);
        errno = EINVAL;
        return -1;
    }
    if (opts->map) {
        if (job_map_check (opts, err) < 0)
            return -1;
    } else if (opts->nranks < 1 || opts->nranks > 65535) {
        errprintf (err, "ranks: %d is not accepted (1-65535)", opts->nranks);
        errno = EINVAL;
        return -1;
    }
    if (!opts->btl || !strcmp (opts->btl, "sm"))
        *btl = "self,sm";
    else if (!strcmp (opts->btl, "tcp"))
        *btl = "self,tcp";
    else if (!strcmp (opts->btl, "sm,tcp"))
        *btl = "self,sm,tcp";
    else {
        errprintf (err, "btl: '%s' is not accepted (sm, tcp, sm,tcp)", opts->btl);
        errno = EINVAL;
        return -1;
    }
    if (opts->init_fences < 0) {
        errprintf (err, "init fences: %d is not accepted (>= 0)", opts->init_fences);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

/* The job's session directories: <server dir>/<nspace>/<rank>.  Returns 0,
 * or -1 with err. */
static int job_make_dirs (struct pmixhost_job *job, elastic_error_t *err)
{
    char path[PATH_MAX + PMIX_MAX_NSLEN + 32];

    snprintf (job->dir, sizeof (job->dir), "%s/%s", job->h->dir, job->nspace);
    if (mkdir (job->dir, 0700) < 0) {
        errprintf (err, "cannot create '%s': %s", job->dir, strerror (errno));
        job->dir[0] = '\0';
        return -1;
    }
    for (int r = 0; r < job->nranks; r++) {
        if (!job->r[r].local)
            continue;
        snprintf (path, sizeof (path), "%s/%d", job->dir, r);
        if (mkdir (path, 0700) < 0)
            return errprintf (err, "cannot create '%s': %s", path, strerror (errno));
    }
    return 0;
}

/* Register the namespace with its job data (map: the job's map, NULL for
 * one node).  Returns 0, or -1 with err and errno EINVAL. */
static int
job_register (struct pmixhost_job *job, const struct jobmap *map, elastic_error_t *err)
{
    struct jobinfo_params jp;
    pmix_info_t *info = NULL;
    size_t ninfo = 0;
    pmix_status_t rc;
    char host[256], cwd[PATH_MAX];

    if (gethostname (host, sizeof (host)) < 0)
        snprintf (host, sizeof (host), "localhost");
    host[sizeof (host) - 1] = '\0';
    jp.nspace = job->nspace;
    jp.nranks = job->nranks;
    jp.hostname = host;
    jp.tmpdir = job->h->dir;
    jp.nsdir = job->dir;
    jp.wdir = getcwd (cwd, sizeof (cwd)) ? cwd : NULL;
    jp.oversubscribed = job->oversubscribed;
    jp.map = map;
    jp.parent = job->spawned_by   ? &job->spawned_by->requestor
                : job->has_parent ? &job->parent
                                  : NULL;
    jp.node_id = job->spawn_node > 0 ? job->spawn_node : 0;
    jp.remote = job->remote;
    if (job->spawn_node >= 0)
        jp.hostname = job->spawn_host;
    if (job->spawned_by && job->spawned_by->req.wdir)
        jp.wdir = job->spawned_by->req.wdir;
    if (jobinfo_build (&jp, &info, &ninfo, err) < 0) {
        errno = EINVAL;
        return -1;
    }
    /* the count PMIx wants is the ranks that will connect to this server */
    rc = PMIx_server_register_nspace (job->nspace, job->nlocal, info, ninfo, NULL, NULL);
    jobinfo_free (info, ninfo);
    if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
        errprintf (
            err, "PMIx refused namespace '%s': %s", job->nspace, PMIx_Error_string (rc));
        errno = EINVAL;
        return -1;
    }
    job->registered = 1;
    return 0;
}

/* Register each rank and build its environment (btl: Open MPI's BTL
 * list).  Returns 0, or -1 with err. */
static int
job_register_ranks (struct pmixhost_job *job, const char *btl, elastic_error_t *err)
{
    pmix_status_t rc;
    char cutoff[16];
    struct statfs fs;
    /* Open MPI's shared-memory segments in the job's own directory:
     * their names hold a 16-bit hash of the namespace and a process's node
     * rank only, so two jobs of one user on one node whose hashes collide
     * (1 in 65536 pairs; two CI tests did, 2026-12-07) shared one
     * segment per node rank, removed each other's and crashed in
     * mca_btl_sm_poll_handle_frag.  In memory only (tmpfs), else where
     * Open MPI puts them; the user's choice stays. */
    int own_sm = !getenv ("OMPI_MCA_btl_sm_backing_directory") && job->dir[0] &&
                 statfs (job->dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC;

    snprintf (cutoff, sizeof (cutoff), "%d", job->nranks + 1);

    for (int r = 0; r < job->nranks; r++) {
        pmix_proc_t proc;

        if (!job->r[r].local)
            continue; /* another node's server registers it */
        PMIX_LOAD_PROCID (&proc, job->nspace, (pmix_rank_t)r);
        rc =
            PMIx_server_register_client (&proc, geteuid (), getegid (), NULL, NULL, NULL);
        if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
            errprintf (err,
                       "PMIx refused rank %d of '%s': %s",
                       r,
                       job->nspace,
                       PMIx_Error_string (rc));
            errno = EINVAL;
            return -1;
        }
        if ((rc = PMIx_server_setup_fork (&proc, &job->r[r].env)) != PMIX_SUCCESS) {
            errprintf (err,
                       "PMIx cannot set up the environment of rank %d: %s",
                       r,
                       PMIx_Error_string (rc));
            errno = EINVAL;
            return -1;
        }
        /* ULFM needs ft_enable and the ob1 PML; HAN's collectives deadlock
         * in MPIX_Comm_agree.  add_procs_cutoff above the world size makes
         * Open MPI create every rank's proc at MPI_Init: below it, a rank of
         * another node never talked to stays a placeholder in the
         * communicators' groups, ompi_comm_is_proc_active takes it for alive
         * after its fault event (5.0.7 records the failure in the group only
         * in debug builds), and MPIX_Comm_shrink's agreement waits for it
         * forever (doc/mesh.md). */
        if (env_add (&job->r[r].env, "OMPI_MCA_mpi_add_procs_cutoff", cutoff) < 0 ||
            env_add (&job->r[r].env, "OMPI_MCA_mpi_ft_enable", "1") < 0 ||
            env_add (&job->r[r].env, "OMPI_MCA_pml", "ob1") < 0 ||
            env_add (&job->r[r].env, "OMPI_MCA_btl", btl) < 0 ||
            env_add (&job->r[r].env, "OMPI_MCA_coll", "^han") < 0 ||
            (own_sm &&
             env_add (&job->r[r].env, "OMPI_MCA_btl_sm_backing_directory", job->dir) < 0))
            return errprintf (err, "out of memory");
    }
    return 0;
}

struct pmixhost_job *pmixhost_job_create (struct pmixhost *h,
                                          const struct pmixhost_job_opts *opts,
                                          elastic_error_t *err)
{
    struct pmixhost_job *job = NULL;
    const char *btl;
    int n, nranks;

    if (!h || !opts) {
        errprintf (err, "pmixhost_job_create: no server or options");
        errno = EINVAL;
        return NULL;
    }
    if (job_opts_check (opts, &btl, err) < 0)
        return NULL;
    nranks = opts->map ? opts->map->world_size : opts->nranks;
    if (!(job = calloc (1, sizeof (*job))) ||
        !(job->r = calloc ((size_t)nranks, sizeof (job->r[0])))) {
        errprintf (err, "out of memory");
        goto error;
    }
    job->h = h;
    job->nranks = nranks;
    job->nnodes = opts->map ? opts->map->nnodes : 1;
    job->node = opts->map ? opts->map->node_id : 0;
    job->spawn_node = -1;
    if (opts->spawn_host) {
        if (opts->map || opts->spawn_node < 0 || !opts->spawn_host[0]) {
            errprintf (err,
                       "a namespace spawned into a mesh needs a node (%d) and its host "
                       "name, and no job map",
                       opts->spawn_node);
            errno = EINVAL;
            goto error;
        }
        job->spawn_node = opts->spawn_node;
        snprintf (job->spawn_host, sizeof (job->spawn_host), "%s", opts->spawn_host);
        job->remote = opts->remote_ranks != 0;
    }
    for (int r = 0; r < nranks; r++) {
        job->r[r].local = opts->map ? opts->map->rank_node[r] == job->node : !job->remote;
        job->nlocal += job->r[r].local;
    }
    job->init_fences = opts->init_fences ? opts->init_fences : OMPI5_INIT_FENCES;
    job->family = job;
    if ((job->spawned_by = opts->spawned_by)) {
        struct pmixhost_job *parent = opts->spawned_by->req.parent;
        if (opts->map) {
            errprintf (err, "a spawned job runs on this node only (no job map)");
            errno = EINVAL;
            goto error;
        }
        job->family = parent ? parent->family : job;
    } else if (opts->parent_nspace) {
        job->has_parent = 1;
        PMIX_LOAD_PROCID (
            &job->parent, opts->parent_nspace, (pmix_rank_t)opts->parent_rank);
        job->family = opts->family ? opts->family->family : job;
    }
    job->abort_rank = job->restart_rank = -1;
    job->oversubscribed = opts->oversubscribed < 0 ? job->nlocal > usable_cpus ()
                                                   : opts->oversubscribed != 0;
    snprintf (
        job->nspace, sizeof (job->nspace), "elastic.%s.%d", opts->run_id, opts->attempt);
    pthread_mutex_lock (&h->lock);
    n = pmixhost_find_job (h, job->nspace) != NULL;
    pthread_mutex_unlock (&h->lock);
    if (n) {
        errprintf (err,
                   "namespace '%s' is already in use (a new attempt needs a new number)",
                   job->nspace);
        errno = EEXIST;
        goto error;
    }
    if (job_make_dirs (job, err) < 0 || job_register (job, opts->map, err) < 0 ||
        job_register_ranks (job, btl, err) < 0)
        goto error;
    pthread_mutex_lock (&h->lock);
    job->next = h->jobs;
    h->jobs = job;
    pthread_mutex_unlock (&h->lock);
    return job;
error:
    if (job) {
        /* not on the list yet: tear down by hand */
        int saved_errno = errno;
        if (job->registered)
            PMIx_server_deregister_nspace (job->nspace, NULL, NULL);
        remove_tree (job->dir);
        for (int r = 0; job->r && r < job->nranks; r++)
            env_free (job->r[r].env);
        free (job->r);
        free (job);
        errno = saved_errno;
    }
    return NULL;
}

/* Whether PMIx's records of job may be torn, so that deregistering it or
 * finalizing the server is unsafe.  Two ways, each for a rank that ended
 * otherwise than by a clean exit 0:
 * - it died in the middle of its connection handshake (started, never
 *   reported connected): PMIx (4.2.2 and 5.0) then takes an error path that
 *   releases the rank's record twice while it stays on the namespace's
 *   list ("PMIX ERROR: UNREACHABLE in ptl_base_connection_hdlr.c");
 *   deregistering that namespace, or finalizing the server, walks the list
 *   and can deadlock the server's progress thread (seen here: about 1 run
 *   in 15 of a rank killed before MPI_Init);
 * - it connected and died, without finalizing, before the namespace's
 *   MPI_Init fences all completed (a preemption's stop, a kill inside
 *   MPI_Init): its peers on this node may be inside a fence, whose tracker
 *   PMIx 4.2.2 leaves behind broken; deregistering the namespace then
 *   deadlocked the progress thread (the deregistration timed out, and
 *   PMIx_Deregister_event_handler waited for ever), or
 *   PMIx_server_finalize dereferenced a NULL destructor array (SIGSEGV at
 *   PMIx_server_finalize+2824): doc/reliability.md, defect 14.
 * Such a namespace is left registered: its records stay in this process
 * until it exits, and the server is not finalized. */
static int job_may_be_torn (struct pmixhost_job *job)
{
    for (int r = 0; r < job->nranks; r++) {
        const struct rank_state *rs = &job->r[r];
        if (rs->pid <= 0 || !rs->exited ||
            (WIFEXITED (rs->wstatus) && WEXITSTATUS (rs->wstatus) == 0))
            continue;
        if (!rs->connected)
            return 1;
        if (!rs->finalized && !job->initialized)
            return 1;
    }
    return 0;
}

/* A deregistration PMIx completes in its progress thread.  The waiter may
 * give up first; the last of the two frees it. */
struct dereg_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    int gave_up;
};

static void dereg_free (struct dereg_wait *w)
{
    pthread_mutex_destroy (&w->lock);
    pthread_cond_destroy (&w->cond);
    free (w);
}

static void dereg_done (pmix_status_t status, void *cbdata)
{
    struct dereg_wait *w = cbdata;

    (void)status;
    pthread_mutex_lock (&w->lock);
    if (w->gave_up) {
        pthread_mutex_unlock (&w->lock);
        dereg_free (w);
        return;
    }
    w->done = 1;
    pthread_cond_signal (&w->cond);
    pthread_mutex_unlock (&w->lock);
}

/* Deregister job's namespace and wait (10 s at most) until PMIx has run the
 * cleanups its clients registered (Open MPI's /dev/shm segments, a killed
 * rank's too): PMIx does that in its progress thread, and a process that
 * exits right after the call would leave them behind. */
static void deregister_nspace (struct pmixhost_job *job)
{
    struct dereg_wait *w = calloc (1, sizeof (*w));
    struct timespec until;
    int done;

    if (!w) {
        PMIx_server_deregister_nspace (job->nspace, NULL, NULL);
        return;
    }
    pthread_mutex_init (&w->lock, NULL);
    pthread_cond_init (&w->cond, NULL);
    PMIx_server_deregister_nspace (job->nspace, dereg_done, w);
    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock (&w->lock);
    while (!w->done && pthread_cond_timedwait (&w->cond, &w->lock, &until) != ETIMEDOUT)
        ;
    done = w->done;
    w->gave_up = !done;
    pthread_mutex_unlock (&w->lock);
    if (done)
        dereg_free (w);
    else
        fprintf (stderr,
                 "elastic: warn: PMIx did not finish deregistering %s within 10 s\n",
                 job->nspace);
}

void pmixhost_job_destroy (struct pmixhost_job *job)
{
    struct pmixhost *h;
    struct pmixhost_job **pp;
    int saved_errno = errno;

    if (!job)
        return;
    h = job->h;
    pthread_mutex_lock (&h->lock);
    for (pp = &h->jobs; *pp; pp = &(*pp)->next) {
        if (*pp == job) {
            *pp = job->next;
            break;
        }
    }
    drop_events (h, job);
    for (struct pmixhost_job *j = h->jobs; j; j = j->next)
        if (j->family == job)
            j->family = j; /* its spawns outlive it: a family of their own */
    for (struct pmixhost_spawn *sp = h->spawns; sp; sp = sp->next) {
        if (sp->req.parent == job)
            sp->req.parent = NULL;
        if (sp->child == job)
            sp->child = NULL;
    }
    pthread_mutex_unlock (&h->lock);
    {
        pmix_proc_t all;
        PMIX_LOAD_PROCID (&all, job->nspace, PMIX_RANK_WILDCARD);
        pubsub_forget (h, &all, PMIX_ERR_LOST_CONNECTION, 1);
    }
    /* deregisters every client left and runs the cleanups they registered */
    if (job->registered && job_may_be_torn (job))
        h->tainted = 1;
    else if (job->registered)
        deregister_nspace (job);
    remove_tree (job->dir);
    for (int r = 0; r < job->nranks; r++)
        env_free (job->r[r].env);
    free (job->r);
    free (job);
    errno = saved_errno;
}

const char *pmixhost_job_nspace (struct pmixhost_job *job)
{
    return job->nspace;
}

char *const *pmixhost_job_env (struct pmixhost_job *job, int rank)
{
    if (!job || rank < 0 || rank >= job->nranks || !job->r[rank].local)
        return NULL;
    return job->r[rank].env;
}

int pmixhost_job_started (struct pmixhost_job *job, int rank, pid_t pid)
{
    if (!job || rank < 0 || rank >= job->nranks || !job->r[rank].local) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock (&job->h->lock);
    job->r[rank].pid = pid;
    pthread_mutex_unlock (&job->h->lock);
    return 0;
}

struct notify_op {
    pmix_info_t info[2];
};

static void notify_done (pmix_status_t status, void *cbdata)
{
    struct notify_op *op = cbdata;

    PMIX_INFO_DESTRUCT (&op->info[0]);
    PMIX_INFO_DESTRUCT (&op->info[1]);
    free (op);
}

/* Send the fault event ULFM acts on to every rank of the namespace: source
 * is the dead rank (never the server), and the dead rank goes in one info
 * of type PMIX_PROC (ULFM ignores a PMIX_EVENT_AFFECTED_PROCS array). */
static int notify_failure (struct pmixhost_job *job, int rank, pmix_status_t code)
{
    struct notify_op *op;
    pmix_proc_t proc;
    pmix_status_t rc;
    pmix_data_array_t *range = NULL;
    size_t n = 0;

    if (!(op = calloc (1, sizeof (*op))))
        return -1;
    PMIX_LOAD_PROCID (&proc, job->nspace, (pmix_rank_t)rank);
    PMIX_INFO_LOAD (&op->info[0], PMIX_EVENT_AFFECTED_PROC, &proc, PMIX_PROC);
    /* a job with spawns (or spawned): its relatives' ranks may share
     * communicators with the dead one (MPI_Intercomm_merge) */
    pthread_mutex_lock (&job->h->lock);
    for (struct pmixhost_job *j = job->h->jobs; j; j = j->next)
        n += j->family == job->family;
    if (n > 1 && (range = calloc (1, sizeof (*range))) &&
        (range->array = calloc (n, sizeof (pmix_proc_t)))) {
        pmix_proc_t *procs = range->array;
        range->type = PMIX_PROC;
        for (struct pmixhost_job *j = job->h->jobs; j; j = j->next) {
            if (j->family != job->family)
                continue;
            /* (PMIX_LOAD_PROCID evaluates its arguments more than once) */
            PMIX_LOAD_PROCID (&procs[range->size], j->nspace, PMIX_RANK_WILDCARD);
            range->size++;
        }
    } else if (range) {
        free (range);
        range = NULL;
    }
    pthread_mutex_unlock (&job->h->lock);
    if (range) {
        PMIX_INFO_LOAD (&op->info[1], PMIX_EVENT_CUSTOM_RANGE, range, PMIX_DATA_ARRAY);
        free (range->array);
        free (range);
        rc = PMIx_Notify_event (
            code, &proc, PMIX_RANGE_CUSTOM, op->info, 2, notify_done, op);
    } else
        rc = PMIx_Notify_event (
            code, &proc, PMIX_RANGE_NAMESPACE, op->info, 1, notify_done, op);
    if (rc != PMIX_SUCCESS) {
        notify_done (rc, op);
        if (rc != PMIX_OPERATION_SUCCEEDED) {
            errno = EIO;
            return -1;
        }
    }
    return 0;
}

int pmixhost_job_exited (struct pmixhost_job *job, int rank, int wstatus)
{
    struct pmixhost *h;
    struct rank_state *r;
    int verdict, dereg = 0;
    pmix_status_t code = PMIX_ERR_PROC_TERM_WO_SYNC;

    if (!job || rank < 0 || rank >= job->nranks || !job->r[rank].local) {
        errno = EINVAL;
        return -1;
    }
    h = job->h;
    r = &job->r[rank];
    pthread_mutex_lock (&h->lock);
    if (r->exited) {
        pthread_mutex_unlock (&h->lock);
        errno = EINVAL;
        return -1;
    }
    r->exited = 1;
    r->wstatus = wstatus;
    job->nexited++;
    if (job->aborting)
        verdict = PMIXHOST_EXIT_ABORTED;
    else if (job->stopping)
        verdict = PMIXHOST_EXIT_STOPPED;
    else if (r->finalized)
        verdict = PMIXHOST_EXIT_DONE;
    else if (!r->connected && WIFEXITED (wstatus) && WEXITSTATUS (wstatus) == 0)
        verdict = PMIXHOST_EXIT_DONE;
    else if (!job->initialized || job->restart_needed) {
        verdict = PMIXHOST_EXIT_RESTART;
        if (!job->restart_needed) {
            job->restart_needed = 1;
            job->restart_rank = rank;
        }
    } else {
        verdict = PMIXHOST_EXIT_RECOVERABLE;
        job->failed++;
        if (WIFSIGNALED (wstatus))
            code = PMIX_ERR_PROC_ABORTED_BY_SIG;
    }
    if (r->lost && !r->deregistered) {
        r->deregistered = 1;
        job->nderegistered++;
        dereg = 1;
    }
    pthread_mutex_unlock (&h->lock);

    {
        pmix_proc_t dead;
        PMIX_LOAD_PROCID (&dead, job->nspace, (pmix_rank_t)rank);
        pubsub_forget (h, &dead, PMIX_ERR_LOST_CONNECTION, 0);
    }
    if (verdict == PMIXHOST_EXIT_RECOVERABLE) {
        notify_failure (job, rank, code);
        h->tp->failure (h->tp_ctx, job->nspace, rank, code);
    }
    if (dereg)
        deregister_rank (job, rank);
    return verdict;
}

void pmixhost_job_stop (struct pmixhost_job *job)
{
    if (!job)
        return;
    pthread_mutex_lock (&job->h->lock);
    job->stopping = 1;
    pthread_mutex_unlock (&job->h->lock);
}

int pmixhost_job_remote_failure (struct pmixhost_job *job, int rank, int signaled)
{
    int skip;

    if (!job || rank < 0 || rank >= job->nranks) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock (&job->h->lock);
    skip = job->aborting || job->stopping;
    if (!skip)
        job->failed++;
    pthread_mutex_unlock (&job->h->lock);
    if (skip)
        return 0;
    return notify_failure (
        job, rank, signaled ? PMIX_ERR_PROC_ABORTED_BY_SIG : PMIX_ERR_PROC_TERM_WO_SYNC);
}

int pmixhost_job_info (struct pmixhost_job *job, struct pmixhost_job_info *info)
{
    if (!job || !info) {
        errno = EINVAL;
        return -1;
    }
    memset (info, 0, sizeof (*info));
    pthread_mutex_lock (&job->h->lock);
    info->nranks = job->nranks;
    info->nlocal = job->nlocal;
    info->nnodes = job->nnodes;
    info->node = job->node;
    for (int r = 0; r < job->nranks; r++) {
        info->connected += job->r[r].connected;
        info->finalized += job->r[r].finalized;
        info->lost += job->r[r].lost;
    }
    info->exited = job->nexited;
    info->failed = job->failed;
    info->deregistered = job->nderegistered;
    info->fences = job->fences;
    info->initialized = job->initialized;
    info->oversubscribed = job->oversubscribed;
    info->aborted = job->aborting;
    info->abort_rank = job->abort_rank;
    info->abort_status = job->abort_status;
    snprintf (info->abort_message, sizeof (info->abort_message), "%s", job->abort_msg);
    info->restart_needed = job->restart_needed;
    info->restart_rank = job->restart_rank;
    info->stopping = job->stopping;
    pthread_mutex_unlock (&job->h->lock);
    return 0;
}

const char *pmixhost_exit_name (int verdict)
{
    switch (verdict) {
        case PMIXHOST_EXIT_DONE:
            return "done";
        case PMIXHOST_EXIT_RECOVERABLE:
            return "recoverable";
        case PMIXHOST_EXIT_RESTART:
            return "restart";
        case PMIXHOST_EXIT_ABORTED:
            return "aborted";
        case PMIXHOST_EXIT_STOPPED:
            return "stopped";
    }
    return "?";
}
