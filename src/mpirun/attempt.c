/* attempt.c - the attempts of a job, and the relaunch policy
 *
 * One attempt: plan its size and hosts (spares replace failed hosts),
 * prepare RUNDIR/attempt-N (hostfile, the ranks' environment), run mpirun,
 * read what happened (mpirun's exit report and the event log), and ask the
 * policy what comes next.  The policy (policy_after_attempt,
 * policy_between_attempts) decides; the loop only acts on its decision.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "attempt.h"
#include "command.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"
#include "elastic.h"
#include "events.h"
#include "initwatch.h"
#include "launch.h"
#include "report.h"

/* One attempt being run: what it needs beyond its struct attempt. */
struct attempt_run {
    int k;      /* 0: the first launch of this elastic-mpirun */
    int resume; /* the ranks resume from the newest L3 snapshot */
    int np;
    char dir[PATH_MAX];
    char hostfile[PATH_MAX + 16];
    const char *hf; /* hostfile, or NULL: a local launch */
    char evlog[PATH_MAX + 16];
    off_t ev_from; /* where this attempt's events start in evlog */
    char num[32];  /* ELASTIC_ATTEMPT */
    char line[8192];
    int exit_code; /* mpirun's */
};

/* ---- the policy -------------------------------------------------------- */

/* Fill d: what comes next, the attempt's outcome, and how the job ends. */
static void vdecide (struct decision *d,
                     enum next_action next,
                     enum outcome outcome,
                     const char *state,
                     int status,
                     const char *fmt,
                     va_list ap)
{
    d->next = next;
    d->outcome = outcome;
    d->end.state = state;
    d->end.status = status;
    vsnprintf (d->end.why, sizeof (d->end.why), fmt, ap);
}

static void decide (struct decision *d,
                    enum next_action next,
                    enum outcome outcome,
                    const char *state,
                    int status,
                    const char *fmt,
                    ...) __attribute__ ((format (printf, 6, 7)));

static void decide (struct decision *d,
                    enum next_action next,
                    enum outcome outcome,
                    const char *state,
                    int status,
                    const char *fmt,
                    ...)
{
    va_list ap;

    va_start (ap, fmt);
    vdecide (d, next, outcome, state, status, fmt, ap);
    va_end (ap);
}

void policy_after_attempt (const struct attempt_facts *f, struct decision *d)
{
    memset (d, 0, sizeof (*d));
    /* PRRTE 3.0 under --with-ft ulfm exits 0 after it lost a daemon and
     * terminated the job, so a lost host is a failure whatever mpirun's
     * exit code */
    /* nor is mpirun's 0 when libelastic gave up on a rank (seen after the
     * ranks' wrappers were killed: mpirun exited 0, no rank completed) */
    /* an mpirun that stayed after its ranks and was killed lost its code:
     * the ranks' own account says whether they completed */
    /* nor after the MPI_Init deadline stopped the attempt (whatever
     * mpirun's code then): a failure, relaunched as any other */
    /* and the ranks' own word that the job completed is worth more than
     * mpirun's code: PRRTE counts a new process of a growth (a spawned job
     * without ULFM's fault tolerance) that died as the job's failure */
    if (f->job_completed && !f->suspended && !f->library_fatal)
        decide (d, NEXT_DONE, OUT_COMPLETED, "completed", 0, "%s", "");
    else if ((f->exit_code == 0 || (f->lingered && f->ranks_completed)) &&
             !f->lost_host && !f->library_fatal && !(f->lingered && f->suspended) &&
             !f->init_stopped)
        decide (d, NEXT_DONE, OUT_COMPLETED, "completed", 0, "%s", "");
    else if (f->preempt_signal && f->before_init && !f->init_stopped)
        /* no rank had computed anything: nothing was lost, and the job
         * ends as a preemption between attempts does (the wrappers' 75s
         * then mean no snapshot) */
        decide (d,
                NEXT_SUSPEND_EXIT,
                OUT_SUSPENDED,
                "suspended",
                ELASTIC_EXIT_SUSPENDED,
                "preempted (%s) before any rank finished MPI_Init: nothing to save; "
                "rerun the same command to resume from the newest L3 snapshot, if any",
                strsignal (f->preempt_signal));
    else if (f->suspended && !f->init_stopped)
        decide (d,
                NEXT_SUSPEND_EXIT,
                OUT_SUSPENDED,
                "suspended",
                ELASTIC_EXIT_SUSPENDED,
                "the ranks suspended to an L3 snapshot; rerun the same command to "
                "resume");
    else if (f->interrupt_signal)
        decide (d,
                NEXT_INTERRUPT_EXIT,
                OUT_INTERRUPTED,
                "interrupted",
                128 + f->interrupt_signal,
                "stopped by %s",
                strsignal (f->interrupt_signal));
    else if (f->preempt_signal)
        decide (d,
                NEXT_FAIL,
                OUT_FAILED,
                "failed",
                EXIT_FAILED,
                "preempted (%s), but the ranks did not suspend (mpirun exit %d%s): "
                "a rerun "
                "resumes from the newest L3 snapshot, if any",
                strsignal (f->preempt_signal),
                f->exit_code,
                f->forced ? ", stopped after --suspend-timeout" : "");
    else if (f->not_relaunchable) {
        decide (d,
                NEXT_FAIL,
                OUT_FAILED,
                "failed",
                EXIT_FAILED,
                "not relaunched: %s",
                f->why);
        d->log_error = 1;
    } else if (f->relaunch > f->max_relaunches) {
        decide (d,
                NEXT_FAIL,
                OUT_FAILED,
                "failed",
                EXIT_FAILED,
                "giving up: %d relaunch%s exhausted (--max-relaunches %d); last "
                "failure: %s",
                f->max_relaunches,
                f->max_relaunches == 1 ? "" : "es",
                f->max_relaunches,
                f->why);
        d->exclude_hosts = 1;
        d->log_error = 1;
    } else {
        decide (d, NEXT_RELAUNCH, OUT_RELAUNCH, "failed", EXIT_FAILED, "%s", "");
        d->exclude_hosts = 1;
    }
}

void policy_between_attempts (int sig, struct decision *d)
{
    memset (d, 0, sizeof (*d));
    if (sig == SIGTERM || sig == SIGUSR1)
        decide (d,
                NEXT_SUSPEND_EXIT,
                OUT_RELAUNCH,
                "suspended",
                ELASTIC_EXIT_SUSPENDED,
                "preempted (%s) between attempts: not relaunched; rerun the same "
                "command to resume from the newest L3 snapshot",
                strsignal (sig));
    else if (sig)
        decide (d,
                NEXT_INTERRUPT_EXIT,
                OUT_RELAUNCH,
                "interrupted",
                128 + sig,
                "stopped by %s between attempts",
                strsignal (sig));
    else
        decide (d, NEXT_RELAUNCH, OUT_RELAUNCH, "failed", EXIT_FAILED, "%s", "");
}

/* An attempt that could not be launched ends the job as failed. */
static void cannot_launch (struct decision *d, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void cannot_launch (struct decision *d, const char *fmt, ...)
{
    va_list ap;

    memset (d, 0, sizeof (*d));
    va_start (ap, fmt);
    vdecide (d, NEXT_FAIL, OUT_FAILED, "failed", EXIT_FAILED, fmt, ap);
    va_end (ap);
}

/* ---- what happened ----------------------------------------------------- */

/* Hosts to exclude: failures that mean a bad host, with a known host. */
static void exclude_hosts (struct job *j, struct attempt *at, const struct report *rep)
{
    size_t used = strlen (at->excluded);
    int node_lost = 0;

    for (int i = 0; i < rep->n; i++)
        if (rep->f[i].kind == FAIL_NODE_LOST)
            node_lost = 1;
    for (int i = 0; i < rep->n; i++) {
        const struct failure *f = &rep->f[i];
        char why[160], d[256];
        if (!failure_host_is_bad (f->kind) || !f->host[0])
            continue;
        /* A lost node ends the whole job: what else failed is its
         * consequence (ranks whose peers vanished, the ranks libelastic
         * gave up on, the teardown), not a fault of those hosts.  A rank
         * killed by SIGPIPE wrote to a dead peer's connection. */
        if ((node_lost && f->kind != FAIL_NODE_LOST) || f->signal == SIGPIPE) {
            failure_describe (f, d, sizeof (d));
            log_info (
                "not excluding host %s: %s follows from another failure", f->host, d);
            continue;
        }
        failure_describe (f, d, sizeof (d));
        snprintf (why, sizeof (why), "attempt %d: %s", at->number, d);
        if (j->local) {
            log_info ("host %s had a failed process, but it is the only host: it stays",
                      f->host);
            continue;
        }
        if (hostlist_fail (j->hl, f->host, why) == 1) {
            log_warn ("excluding host %s from the next launch (%s)", f->host, d);
            if (used < sizeof (at->excluded)) {
                int n = snprintf (at->excluded + used,
                                  sizeof (at->excluded) - used,
                                  "%s%s",
                                  used ? " " : "",
                                  f->host);
                used += n > 0 ? (size_t)n : 0;
            }
        }
    }
}

static void merge_reports (struct report *into, const struct report *from)
{
    for (int i = 0; i < from->n; i++)
        report_add (into, &from->f[i]);
}

static void
describe_failures (const struct report *rep, int exit_code, char *buf, size_t size)
{
    size_t used = 0;
    int shown = 0;

    buf[0] = '\0';
    /* the causes first: signals and lost hosts, then exit codes */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rep->n && shown < 4; i++) {
            const struct failure *f = &rep->f[i];
            char d[256];
            if ((pass == 0) != (failure_host_is_bad (f->kind) ||
                                f->kind == FAIL_NO_EXEC || f->kind == FAIL_NO_SLOTS))
                continue;
            failure_describe (f, d, sizeof (d));
            int n = snprintf (buf + used, size - used, "%s%s", used ? "; " : "", d);
            used += n > 0 ? (size_t)n : 0;
            shown++;
            if (used >= size)
                return;
        }
    if (rep->n > shown && used < size) {
        int n = snprintf (buf + used, size - used, "; %d more", rep->n - shown);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used == 0 && exit_code == ELASTIC_EXIT_RELAUNCH)
        snprintf (
            buf, size, "the ranks exited %d (in-place recovery impossible)", exit_code);
    else if (used == 0)
        snprintf (buf, size, "mpirun exited with %d", exit_code);
}

/* The first failure of mpirun's report of kind a or b, or NULL. */
static const struct failure *report_find (const struct report *rep, int a, int b)
{
    for (int i = 0; i < rep->n; i++)
        if ((int)rep->f[i].kind == a || (int)rep->f[i].kind == b)
            return &rep->f[i];
    return NULL;
}

/* Whether mpirun's report says a host was lost or could not be launched on. */
static int lost_host (const struct report *rep)
{
    return report_find (rep, FAIL_NODE_LOST, FAIL_LAUNCH_HOST) != NULL;
}

static int not_relaunchable (const struct report *rep)
{
    return report_find (rep, FAIL_NO_EXEC, FAIL_NO_SLOTS) != NULL;
}

static void write_state (struct job *j, const char *state, int attempts)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    FILE *f;

    if (j->o.dry_run)
        return;
    snprintf (path, sizeof (path), "%s/state", j->run_dir);
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w"))) {
        log_warn ("%s: %s", tmp, strerror (errno));
        return;
    }
    fprintf (f, "state=%s\nattempts=%d\ntime=%ld\n", state, attempts, (long)time (NULL));
    if (fclose (f) != 0 || rename (tmp, path) < 0)
        log_warn ("%s: %s", path, strerror (errno));
}

/* ---- one attempt ------------------------------------------------------- */

/* Spares for failed hosts, the world size, the host list shown.  Returns 0,
 * or -1 with d (the job cannot go on). */
static int plan_attempt (struct job *j,
                         struct attempt *at,
                         struct attempt_run *r,
                         struct decision *d)
{
    elastic_error_t err;

    memset (at, 0, sizeof (*at));
    at->number = j->prev_attempts + r->k + 1;
    at->resumed = r->resume;
    if (!j->local) {
        char log[512];
        if (j->slurm)
            slurm_refresh_down (j->hl);
        if (hostlist_replace_failed (j->hl, log, sizeof (log)) > 0) {
            log_info ("%s", log);
            snprintf (at->spares, sizeof (at->spares), "%s", log);
        }
    }
    if (command_plan_np (j, &r->np, &err) < 0) {
        cannot_launch (d, "cannot launch attempt %d: %s", at->number, err.text);
        log_err ("%s", d->end.why);
        return -1;
    }
    at->np = r->np;
    if (j->local) {
        char host[256] = "localhost";
        gethostname (host, sizeof (host));
        host[sizeof (host) - 1] = '\0';
        snprintf (at->hosts, sizeof (at->hosts), "%s", host);
        return 0;
    }
    size_t used = 0;
    for (size_t i = 0; i < hostlist_count (j->hl) && used < sizeof (at->hosts); i++) {
        const struct host *h = hostlist_get (j->hl, i);
        if (h->state == HOST_ACTIVE) {
            int n = snprintf (at->hosts + used,
                              sizeof (at->hosts) - used,
                              "%s%s",
                              used ? "," : "",
                              h->name);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return 0;
}

/* RUNDIR/attempt-N and its hostfile.  Returns 0, or -1 with d. */
static int make_attempt_dir (struct job *j,
                             const struct attempt *at,
                             struct attempt_run *r,
                             struct decision *d)
{
    FILE *f;

    snprintf (r->dir, sizeof (r->dir), "%s/attempt-%d", j->run_dir, at->number);
    if (!j->o.dry_run && mkdir_p (r->dir) < 0) {
        cannot_launch (d, "%s: %s", r->dir, strerror (errno));
        return -1;
    }
    if (j->local)
        return 0;
    snprintf (r->hostfile, sizeof (r->hostfile), "%s/hostfile", r->dir);
    r->hf = r->hostfile;
    if (j->o.dry_run)
        return 0;
    if (!(f = fopen (r->hostfile, "w")) || hostlist_write (j->hl, f) < 0 ||
        fclose (f) != 0) {
        cannot_launch (d, "%s: %s", r->hostfile, strerror (errno));
        return -1;
    }
    return 0;
}

/* The ranks' environment: where events go, the run, the attempt, resuming. */
static void set_attempt_env (struct job *j,
                             const struct attempt *at,
                             struct attempt_run *r,
                             int fresh_ok_given)
{
    if (j->user_event_log) {
        struct stat st;
        snprintf (r->evlog, sizeof (r->evlog), "%s", j->user_event_log);
        r->ev_from = stat (r->evlog, &st) == 0 ? st.st_size : 0;
    } else
        snprintf (r->evlog, sizeof (r->evlog), "%s/events.jsonl", r->dir);
    setenv ("ELASTIC_EVENT_LOG", r->evlog, 1);
    setenv ("ELASTIC_RUN_DIR", j->run_dir, 1);
    /* One run id for every attempt, so that a relaunch finds the
     * snapshots of the earlier attempts (elastic-exec would otherwise
     * derive one from each mpirun's namespace).  The library's own
     * default is the same: SLURM_JOB_ID, else "default". */
    if (!getenv ("ELASTIC_RUN_ID"))
        setenv ("ELASTIC_RUN_ID",
                getenv ("SLURM_JOB_ID") ? getenv ("SLURM_JOB_ID") : "default",
                1);
    snprintf (r->num, sizeof (r->num), "%d", at->number);
    setenv ("ELASTIC_ATTEMPT", r->num, 1);
    /* mpirun --with-ft ulfm makes the job it starts recoverable, not the
     * jobs its ranks spawn when they grow: a new process that died then
     * took the job down with it (mpirun exited 137, or the survivors
     * waited for word of its sibling, which PRRTE had killed).  PRRTE's
     * default for every job, those spawned included: */
    if (j->mi.ulfm)
        setenv ("PRTE_MCA_state_base_recoverable", "1", 0);
    /* the room the ranks grow back into after a loss in place (grow.h);
     * in mpirun's environment too, for the processes a growth spawns */
    if (!j->user_grow_slots) {
        char slots[16], hosts[4096];
        snprintf (slots, sizeof (slots), "%d", command_grow_slots (j, r->np));
        setenv ("ELASTIC_GROW_SLOTS", slots, 1);
        if (command_grow_hosts (j, hosts, sizeof (hosts)))
            setenv ("ELASTIC_GROW_HOSTS", hosts, 1);
        else
            unsetenv ("ELASTIC_GROW_HOSTS");
    }
    if (j->o.init_timeout > 0)
        setenv ("ELASTIC_REPORT_INIT", "1", 1);
    else
        unsetenv ("ELASTIC_REPORT_INIT");
    if (r->resume)
        setenv ("ELASTIC_RESUME", "1", 1);
    else
        unsetenv ("ELASTIC_RESUME");
    /* a relaunch after a failure that came before the first L3 snapshot
     * has nothing to resume from: it starts fresh (the library says
     * so) instead of failing every relaunch on "no L3 snapshot"; a
     * first launch asked to resume stays strict */
    if (r->k > 0 && !fresh_ok_given)
        setenv ("ELASTIC_RESUME_FRESH_OK", "2", 1);
}

#define SM_DIR_PREFIX "elastic-mpirun."

/* The directories of attempts whose elastic-mpirun is gone: one killed
 * (SIGKILL, an OOM kill) cannot remove its own, nor the segments of the
 * ranks that died with it.  A directory is elastic-mpirun.PID.XXXXXX; one
 * of this user whose PID is no process any more is removed (a PID that
 * was reused keeps it until that process ends too).  The names of older
 * versions, without a PID, are left alone. */
static void sweep_sm_dirs (void)
{
    DIR *d;
    struct dirent *de;

    if (!(d = opendir ("/dev/shm")))
        return;
    while ((de = readdir (d))) {
        const char *n = de->d_name + strlen (SM_DIR_PREFIX);
        char path[PATH_MAX], *end;
        struct stat sb;
        long pid;

        if (strncmp (de->d_name, SM_DIR_PREFIX, strlen (SM_DIR_PREFIX)) != 0)
            continue;
        errno = 0;
        pid = strtol (n, &end, 10);
        if (errno || end == n || *end != '.' || strlen (end + 1) != 6 || pid <= 0 ||
            pid == (long)getpid ())
            continue;
        snprintf (path, sizeof (path), "/dev/shm/%s", de->d_name);
        if (lstat (path, &sb) < 0 || !S_ISDIR (sb.st_mode) || sb.st_uid != geteuid ())
            continue;
        if (kill ((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its elastic-mpirun is alive (or not ours to ask) */
        if (remove_tree (path) == 0)
            log_info ("removed %s, left by elastic-mpirun %ld, which is gone", path, pid);
    }
    closedir (d);
}

/* On one host, the attempt's Open MPI shared-memory segments go to a
 * directory of its own in /dev/shm, removed after it: their names hold a
 * 16-bit hash of mpirun's namespace (prterun-HOST-PID) and a node rank
 * only, so two jobs of one user whose hashes collide (1 in 65536 pairs;
 * two CI tests' jobs did) shared segments, removed each other's and
 * crashed in mca_btl_sm_poll_handle_frag.  (On a host list the directory
 * would have to exist on every host: Open MPI's default stays.)  The
 * user's --mca btl_sm_backing_directory or environment stays.  Its name
 * holds this elastic-mpirun's pid, so that a later one can remove it if
 * this one is killed (sweep_sm_dirs). */
static void make_sm_dir (struct job *j)
{
    j->sm_dir[0] = '\0';
    if (!j->local || j->o.dry_run ||
        options_has_mca (&j->o, "btl_sm_backing_directory") ||
        getenv ("OMPI_MCA_btl_sm_backing_directory") ||
        access ("/dev/shm", W_OK | X_OK) < 0)
        return;
    sweep_sm_dirs ();
    snprintf (j->sm_dir,
              sizeof (j->sm_dir),
              "/dev/shm/" SM_DIR_PREFIX "%ld.XXXXXX",
              (long)getpid ());
    if (!mkdtemp (j->sm_dir))
        j->sm_dir[0] = '\0';
}

/* The attempt's directory goes, with the segments of ranks that mpirun
 * could not clean up after (it was killed, or they were). */
static void remove_sm_dir (struct job *j)
{
    DIR *d;
    struct dirent *de;

    if (!j->sm_dir[0])
        return;
    if ((d = opendir (j->sm_dir))) {
        while ((de = readdir (d)))
            if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
                log_warn ("%s/%s was left behind by the job: removing it",
                          j->sm_dir,
                          de->d_name);
        closedir (d);
    }
    if (remove_tree (j->sm_dir) < 0 && errno != ENOENT)
        log_warn ("cannot remove %s: %s", j->sm_dir, strerror (errno));
    j->sm_dir[0] = '\0';
}

/* --dry-run: what the first attempt would run. */
static void print_dry_run (struct job *j, const struct attempt_run *r)
{
    printf ("%s\n", r->line);
    if (r->hf) {
        printf ("# %s:\n", r->hostfile);
        hostlist_write (j->hl, stdout);
    }
    printf ("# environment: ELASTIC_EVENT_LOG=%s ELASTIC_RUN_DIR=%s "
            "ELASTIC_ATTEMPT=%s ELASTIC_GROW_SLOTS=%s%s%s\n",
            r->evlog,
            j->run_dir,
            r->num,
            getenv ("ELASTIC_GROW_SLOTS") ? getenv ("ELASTIC_GROW_SLOTS") : "",
            j->o.init_timeout > 0 ? " ELASTIC_REPORT_INIT=1" : "",
            r->resume ? " ELASTIC_RESUME=1" : "");
}

/* RUNDIR/attempt-N/command, the log line, the state file: it starts. */
static void record_start (struct job *j, const struct attempt *at, struct attempt_run *r)
{
    char path[PATH_MAX + 16];
    FILE *f;

    snprintf (path, sizeof (path), "%s/command", r->dir);
    if ((f = fopen (path, "w"))) {
        fprintf (f, "%s\n", r->line);
        fclose (f);
    }
    if (j->o.verbose > 0)
        log_info ("attempt %d: %s", at->number, r->line);
    else
        log_info ("attempt %d: %d rank%s on %s%s",
                  at->number,
                  r->np,
                  r->np == 1 ? "" : "s",
                  at->hosts,
                  r->resume ? ", resuming from the newest L3 snapshot (ELASTIC_RESUME=1)"
                            : "");
    write_state (j, "running", at->number);
    if (j->natt < MAX_ATTEMPTS_SHOWN)
        j->natt++;
}

/* The attempt's events: its in-place recoveries, and its failed ranks
 * (with their hosts) into ev. */
static void
read_events (struct attempt *at, const struct attempt_run *r, struct events *ev)
{
    size_t used = 0;

    events_init (ev);
    if (events_read_file (ev, r->evlog, r->ev_from) < 0 && errno != ENOENT)
        log_warn ("event log %s: %s", r->evlog, strerror (errno));
    events_resolve_hosts (ev);
    if (ev->bad_lines)
        log_debug ("event log %s: %d line%s ignored (not JSON events)",
                   r->evlog,
                   ev->bad_lines,
                   ev->bad_lines == 1 ? "" : "s");
    at->reshards = ev->nreshard;
    at->reshards_down = ev->nreshard_down;
    at->reshard_ms = ev->reshard_ms;
    at->grows = ev->nreshard_up;
    at->grow_ms = ev->reshard_up_ms;
    for (int i = 0;
         i < ev->nreshard && i < EVENTS_MAX_RESHARDS && used < sizeof (at->reshard_lines);
         i++) {
        const struct reshard *rs = &ev->r[i];
        int n = snprintf (at->reshard_lines + used,
                          sizeof (at->reshard_lines) - used,
                          "%s%s at step %lld: %d -> %d ranks, %.1f ms",
                          used ? "; " : "",
                          rs->kind,
                          rs->step,
                          rs->old_size,
                          rs->new_size,
                          rs->total_ms);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* 1 if a rank ended with a non-zero code (its wrapper's worker_exit, or
 * mpirun's report) that the job did not recover from: libelastic's
 * completed event then says only that the library's part ended (an
 * application calls elastic_manager_destroy on its error path too).  A
 * signal in mpirun's report is not one: a process the job recovered from,
 * or a new process of a growth (whose rank is its own job's, not the
 * world's). */
static int unexplained_exit (const struct events *ev, const struct report *rep)
{
    for (int r = 0; r < EVENTS_MAX_RANKS; r++)
        if (ev->rank_exit[r] == EVENTS_EXIT_OTHER && !ev->recovered[r])
            return 1;
    for (int i = 0; i < rep->n; i++)
        if (rep->f[i].kind == FAIL_EXIT && rep->f[i].code != 0 &&
            (rep->f[i].rank < 0 || rep->f[i].rank >= EVENTS_MAX_RANKS ||
             !ev->recovered[rep->f[i].rank]))
            return 1;
    return 0;
}

/* The host of mpirun's report whose daemon was lost, or NULL. */
static const char *node_lost (const struct report *rep)
{
    const struct failure *f = report_find (rep, FAIL_NODE_LOST, FAIL_NODE_LOST);

    return !f ? NULL : f->host[0] ? f->host : "?";
}

/* Whether the ranks suspended: by mpirun's code or by the ranks' account
 * (mpirun's code can be lost after they suspended: mpirun killed, or
 * crashed in its teardown); but when nobody preempted this job and no rank
 * wrote a suspend snapshot, the 75s came from ranks' wrappers that took the
 * SIGTERM of Open MPI's own abort for a preemption.  When they did write
 * one and mpirun had lost a node's daemon, that SIGTERM was PRRTE ending
 * the job for the lost node ("lost communication with a remote daemon"):
 * a failure like any lost node, relaunched (the relaunch resumes from the
 * snapshot they wrote), not a preemption to end the job with 75. */
static int
ranks_suspended (const struct launch_result *res, const struct events *ev, int np)
{
    char evidence[4200] = "";
    int suspended = res->exit_code == ELASTIC_EXIT_SUSPENDED ||
                    events_suspended (ev, np, evidence, sizeof (evidence));
    const char *lost = node_lost (&res->rep);

    if (suspended && !res->preempt_signal && lost) {
        log_warn ("mpirun lost the daemon on %s and ended the job; the ranks took its "
                  "SIGTERM for a preemption and suspended%s%s, but this job was not "
                  "preempted: the attempt counts as failed (a relaunch resumes from "
                  "the newest L3 snapshot)",
                  lost,
                  evidence[0] ? ": " : "",
                  evidence);
        suspended = 0;
    } else if (suspended && !res->preempt_signal &&
               !(ev->nsuspend && ev->suspend_file[0])) {
        log_warn ("mpirun exited %d and ranks exited %d, but this job was not "
                  "preempted and no rank suspended to an L3 snapshot (Open MPI stops "
                  "the ranks with SIGTERM when it aborts a job): the attempt counts "
                  "as failed",
                  res->exit_code,
                  ELASTIC_EXIT_SUSPENDED);
        suspended = 0;
    } else if (suspended && res->exit_code != ELASTIC_EXIT_SUSPENDED)
        log_warn ("mpirun exited %d%s, but %s: the attempt counts as suspended",
                  res->exit_code,
                  res->mpirun_signal ? " (killed by a signal)" : "",
                  evidence);
    return suspended;
}

/* What happened in the attempt that ran: its failures (mpirun's report and
 * the event log) into all and at->why, and the facts the policy needs. */
static void analyse (struct job *j,
                     struct attempt *at,
                     struct attempt_run *r,
                     const struct launch_result *res,
                     struct report *all,
                     struct attempt_facts *f)
{
    struct events ev;

    at->t_start = res->t_start;
    at->t_end = res->t_end;
    at->t_failure = res->t_failure;
    at->exit_code = res->exit_code;
    r->exit_code = res->exit_code;
    read_events (at, r, &ev);
    report_init (all);
    merge_reports (all, &res->rep);
    merge_reports (all, &ev.failed);
    describe_failures (all, res->exit_code, at->why, sizeof (at->why));
    if (res->watch_stopped) /* it names the death and who waited for it */
        snprintf (at->why, sizeof (at->why), "%s", res->watch_why);
    if (ev.nfatal && ev.fatal[0]) {
        size_t used = strlen (at->why);
        snprintf (at->why + used, sizeof (at->why) - used, "; library: %s", ev.fatal);
    }
    memset (f, 0, sizeof (*f));
    f->suspended = ranks_suspended (res, &ev, r->np);
    f->library_fatal = ev.nfatal > 0;
    f->job_completed =
        ev.ncompleted > 0 && ev.nsuspend == 0 && !unexplained_exit (&ev, &res->rep);
    if (f->job_completed && res->exit_code != 0)
        log_warn ("mpirun exited %d, but the ranks completed the job (at step %lld, %d "
                  "working ranks): the attempt counts as completed",
                  res->exit_code,
                  ev.completed_step,
                  ev.completed_world);
    /* libelastic reports a rank's load and its MPI_Init (--init-timeout):
     * loaded ranks and none initialized mean no rank had begun to compute */
    f->before_init = ev.ninit_loaded > 0 && ev.ninit_done == 0 && ev.nsuspend == 0;
    f->ranks_completed = r->np > 0 && ev.nexit[EVENTS_EXIT_ZERO] >= r->np &&
                         ev.nexit[EVENTS_EXIT_OTHER] == 0 &&
                         ev.nexit[EVENTS_EXIT_SUSPENDED] == 0 && ev.nsuspend == 0;
    if (res->rep.text[0]) {
        char path[PATH_MAX + 16];
        FILE *fp;
        snprintf (path, sizeof (path), "%s/report.txt", r->dir);
        if ((fp = fopen (path, "w"))) {
            fprintf (fp, "%s\n", res->rep.text);
            fclose (fp);
        }
    }
    events_clear (&ev);
    f->exit_code = res->exit_code;
    f->lost_host = lost_host (&res->rep);
    f->interrupt_signal = res->interrupt_signal;
    f->preempt_signal = res->preempt_signal;
    f->forced = res->forced;
    f->lingered = res->lingered;
    f->init_stopped = res->watch_stopped;
    if (f->lingered && f->ranks_completed && f->exit_code != 0)
        log_warn ("mpirun exited %d after it was stopped, but all %d ranks had exited 0: "
                  "the attempt counts as completed",
                  f->exit_code,
                  r->np);
    f->not_relaunchable = not_relaunchable (all);
    f->relaunch = r->k + 1;
    f->max_relaunches = j->o.max_relaunches;
    f->why = at->why;
}

/* launch_run's question once mpirun stays childless: did libelastic's
 * "completed" line reach the attempt's event log? */
static int ranks_said_completed (void *arg)
{
    const struct attempt_run *r = arg;
    struct events ev;
    int done;

    events_init (&ev);
    done = events_read_file (&ev, r->evlog, r->ev_from) >= 0 && ev.ncompleted > 0;
    events_clear (&ev);
    return done;
}

/* launch_run's watch: the MPI_Init deadline (initwatch.h). */
static int
watch_init (void *arg, const struct report *rep, double now, char *why, size_t size)
{
    return initwatch_check (arg, rep, now, why, size);
}

/* Run one attempt and decide what comes next.  Returns 0 with d, -1 with d
 * when the attempt could not be launched, 1 after a dry run. */
static int run_attempt (struct job *j,
                        struct attempt *at,
                        struct attempt_run *r,
                        int fresh_ok_given,
                        struct decision *d)
{
    struct argvec cmd = {0};
    struct launch_result res;
    struct launch_params lp;
    struct initwatch iw;
    struct attempt_facts f;
    struct report all;
    elastic_error_t err;
    int rc;

    if (plan_attempt (j, at, r, d) < 0 || make_attempt_dir (j, at, r, d) < 0)
        return -1;
    set_attempt_env (j, at, r, fresh_ok_given);
    make_sm_dir (j);
    command_build (j, r->np, r->hf, &cmd);
    command_format (cmd.v, r->line, sizeof (r->line));
    if (j->o.dry_run) {
        print_dry_run (j, r);
        argvec_free (&cmd);
        return 1;
    }
    record_start (j, at, r);
    initwatch_init (&iw, r->evlog, r->ev_from, r->np, j->o.init_timeout);
    lp = (struct launch_params){.suspend_timeout = j->o.suspend_timeout,
                                .watch = watch_init,
                                .watch_arg = &iw,
                                .completed = ranks_said_completed,
                                .completed_arg = r};
    rc = launch_run (cmd.v, &lp, &res, &err);
    remove_sm_dir (j);
    /* the failure was the death that started the deadline, not its end */
    if (rc == 0 && res.watch_stopped && iw.armed_at > 0 && iw.armed_at < res.t_failure)
        res.t_failure = iw.armed_at;
    initwatch_clear (&iw);
    argvec_free (&cmd);
    if (rc < 0) {
        cannot_launch (d, "cannot start mpirun: %s", err.text);
        at->t_start = at->t_end = mono_now ();
        at->outcome = OUT_FAILED;
        return -1;
    }
    analyse (j, at, r, &res, &all, &f);
    policy_after_attempt (&f, d);
    if (d->exclude_hosts)
        exclude_hosts (j, at, &all);
    at->outcome = d->outcome;
    if (d->log_error)
        log_err ("%s", d->end.why);
    return 0;
}

/* After a failed attempt to be relaunched: say so, wait --relaunch-delay
 * and decide on the signals that came meanwhile. */
static void wait_to_relaunch (struct job *j,
                              const struct attempt *at,
                              const struct attempt_run *r,
                              struct decision *d)
{
    log_warn ("attempt %d failed after %.1f s (%s%s): relaunching (%d of %d) from "
              "the newest "
              "L3 snapshot",
              at->number,
              at->t_end - at->t_start,
              r->exit_code == ELASTIC_EXIT_RELAUNCH ? "relaunch requested: " : "",
              at->why,
              r->k + 1,
              j->o.max_relaunches);
    write_state (j, "relaunching", at->number);
    policy_between_attempts (launch_wait_signal (j->o.relaunch_delay), d);
}

int attempts_run (struct job *j, struct job_end *end)
{
    /* the user's own ELASTIC_RESUME_FRESH_OK wins over the relaunches' */
    int fresh_ok_given = getenv ("ELASTIC_RESUME_FRESH_OK") != NULL;
    struct decision d;

    cannot_launch (&d, "%s", "");
    for (int k = 0; k <= j->o.max_relaunches; k++) {
        struct attempt *at =
            &j->att[j->natt < MAX_ATTEMPTS_SHOWN ? j->natt : MAX_ATTEMPTS_SHOWN - 1];
        struct attempt_run r = {.k = k, .resume = k > 0 || j->resume_first};
        int rc = run_attempt (j, at, &r, fresh_ok_given, &d);

        if (rc > 0)
            return 1;
        if (rc < 0 || d.next != NEXT_RELAUNCH)
            break;
        wait_to_relaunch (j, at, &r, &d);
        if (d.next != NEXT_RELAUNCH)
            break;
    }
    write_state (j, d.end.state, j->prev_attempts + j->natt);
    *end = d.end;
    return 0;
}
