/* main.c - elastic-mpirun: run an MPI job under Open MPI's mpirun, relaunch it
 * from the newest L3 snapshot when it fails, suspend it on preemption
 *
 *   elastic-mpirun [elastic options] [mpirun options] [--] program [args...]
 *
 * One job is a series of attempts (one mpirun each) sharing a run directory:
 *   RUNDIR/state             what the last run ended as (decides resuming)
 *   RUNDIR/lock              held while a run is in progress
 *   RUNDIR/attempt-N/        hostfile, events.jsonl (ELASTIC_EVENT_LOG),
 *                            report.txt (mpirun's failure report), command
 *   RUNDIR/summary.txt       the summary printed at the end
 * Which hosts failed comes from mpirun's exit report (rank, host, signal; a
 * lost daemon's node) and from the event log (elastic-exec's worker_start
 * gives each rank's host and worker_exit its death by a signal; libelastic's
 * reshard_down/fatal events name failed ranks).  See elastic-mpirun(1).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "elastic.h"
#include "events.h"
#include "hostlist.h"
#include "launch.h"
#include "options.h"
#include "probe.h"
#include "report.h"

#define EXIT_USAGE         2
#define EXIT_FAILED        1
#define MAX_ATTEMPTS_SHOWN 64

static const char *prog = "elastic-mpirun";

enum outcome { OUT_COMPLETED, OUT_SUSPENDED, OUT_RELAUNCH, OUT_FAILED, OUT_INTERRUPTED };

struct attempt {
    int number; /* global, across reruns */
    int np;
    char hosts[256];
    double t_start, t_end, t_failure;
    int exit_code;
    enum outcome outcome;
    char why[512];      /* the failure, one line */
    char excluded[256]; /* hosts excluded after it */
    char spares[256];   /* spares promoted for the next attempt */
    int reshards, reshards_down;
    double reshard_ms;
    int resumed;
    char reshard_lines[1024];
};

struct job {
    struct options o;
    struct mpi_info mi;
    struct hostlist *hl; /* empty: local launch */
    int local;
    int ncpu;
    int slurm;
    char exec[PATH_MAX];
    char run_dir[PATH_MAX];
    int lock_fd;
    int prev_attempts;
    char prev_state[32];
    int resume_first;
    const char *user_event_log;
    struct attempt att[MAX_ATTEMPTS_SHOWN];
    int natt;
    double t0;
};

/* ---- small helpers ---------------------------------------------------- */

static void die_usage (const char *fmt, ...)
    __attribute__ ((noreturn, format (printf, 1, 2)));

static void die_usage (const char *fmt, ...)
{
    va_list ap;
    fprintf (stderr, "%s: ", prog);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fprintf (stderr, "\n");
    exit (EXIT_USAGE);
}

static int mkdir_p (const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen (path);

    if (len >= sizeof (buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy (buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir (buf, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static char *read_text (const char *path, size_t max)
{
    FILE *f = fopen (path, "r");
    char *buf;
    size_t n;

    if (!f)
        return NULL;
    if (!(buf = malloc (max + 1))) {
        fclose (f);
        return NULL;
    }
    n = fread (buf, 1, max, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

/* Shell-quote s into out if it needs it. */
static void quote (const char *s, char *out, size_t size)
{
    size_t n = 0;
    int plain = *s != '\0';

    for (const char *p = s; *p; p++)
        if (!strchr ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./"
                     "=:,+@%^",
                     *p))
            plain = 0;
    if (plain) {
        snprintf (out, size, "%s", s);
        return;
    }
    if (n + 1 < size)
        out[n++] = '\'';
    for (const char *p = s; *p && n + 5 < size; p++) {
        if (*p == '\'') {
            memcpy (out + n, "'\\''", 4);
            n += 4;
        } else
            out[n++] = *p;
    }
    if (n + 1 < size)
        out[n++] = '\'';
    out[n < size ? n : size - 1] = '\0';
}

static void format_command (char *const argv[], char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; argv[i] && used + 1 < size; i++) {
        char q[4096];
        quote (argv[i], q, sizeof (q));
        int n = snprintf (buf + used, size - used, "%s%s", i ? " " : "", q);
        used += n > 0 ? (size_t)n : 0;
    }
}

struct argvec {
    char **v;
    int n, cap;
};

static void av_add (struct argvec *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        if (!(a->v = realloc (a->v, (size_t)a->cap * sizeof (char *)))) {
            fprintf (stderr, "%s: out of memory\n", prog);
            exit (EXIT_FAILED);
        }
    }
    if (!(a->v[a->n++] = strdup (s))) {
        fprintf (stderr, "%s: out of memory\n", prog);
        exit (EXIT_FAILED);
    }
    a->v[a->n] = NULL;
}

static void av_free (struct argvec *a)
{
    for (int i = 0; i < a->n; i++)
        free (a->v[i]);
    free (a->v);
    memset (a, 0, sizeof (*a));
}

/* ---- set-up ------------------------------------------------------------ */

static int count_cpus (void)
{
    cpu_set_t set;

    if (sched_getaffinity (0, sizeof (set), &set) == 0 && CPU_COUNT (&set) > 0)
        return CPU_COUNT (&set);
    long n = sysconf (_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* elastic-exec: --exec, beside us (installed or build tree), bindir, PATH. */
static int find_exec (struct job *j)
{
    char self[PATH_MAX], dir[PATH_MAX], tried[2048] = "";
    const char *cands[4];
    char c0[PATH_MAX], c1[PATH_MAX];
    ssize_t n;
    int nc = 0;

    if (j->o.exec) {
        if (access (j->o.exec, X_OK) < 0)
            die_usage ("--exec %s: %s (give the path of elastic-exec, or --no-wrap)",
                       j->o.exec,
                       strerror (errno));
        snprintf (j->exec, sizeof (j->exec), "%s", j->o.exec);
        return 0;
    }
    if ((n = readlink ("/proc/self/exe", self, sizeof (self) - 1)) > 0) {
        self[n] = '\0';
        snprintf (dir, sizeof (dir), "%s", self);
        if (strrchr (dir, '/'))
            *strrchr (dir, '/') = '\0';
        snprintf (c0, sizeof (c0), "%s/elastic-exec", dir);
        snprintf (c1, sizeof (c1), "%s/../exec/elastic-exec", dir);
        cands[nc++] = c0;
        cands[nc++] = c1;
    }
    cands[nc++] = ELASTIC_BINDIR "/elastic-exec";
    for (int i = 0; i < nc; i++) {
        size_t used = strlen (tried);
        snprintf (
            tried + used, sizeof (tried) - used, "%s%s", used ? ", " : "", cands[i]);
        if (access (cands[i], X_OK) == 0) {
            if (!realpath (cands[i], j->exec))
                snprintf (j->exec, sizeof (j->exec), "%s", cands[i]);
            return 0;
        }
    }
    /* on PATH */
    const char *path = getenv ("PATH");
    if (path) {
        char *copy = strdup (path), *save = NULL;
        for (char *d = copy ? strtok_r (copy, ":", &save) : NULL; d;
             d = strtok_r (NULL, ":", &save)) {
            char c[PATH_MAX];
            snprintf (c, sizeof (c), "%s/elastic-exec", d);
            if (access (c, X_OK) == 0) {
                snprintf (j->exec, sizeof (j->exec), "%s", c);
                free (copy);
                return 0;
            }
        }
        free (copy);
    }
    die_usage (
        "elastic-exec not found (looked in %s and PATH): build or install it, give "
        "--exec PATH, or run the ranks unwrapped with --no-wrap",
        tried);
}

static void load_hosts (struct job *j)
{
    char err[512];

    if (!(j->hl = hostlist_create ()))
        die_usage ("out of memory");
    if (j->o.hostfile) {
        char *text = read_text (j->o.hostfile, 16 << 20);
        if (!text)
            die_usage ("--hostfile %s: %s", j->o.hostfile, strerror (errno));
        if (hostlist_parse_hostfile (j->hl, text, j->o.hostfile, err, sizeof (err)) < 0) {
            free (text);
            die_usage ("%s", err);
        }
        free (text);
        if (hostlist_count (j->hl) == 0)
            die_usage ("--hostfile %s lists no hosts", j->o.hostfile);
    }
    if (j->o.hosts && hostlist_parse_hosts (j->hl, j->o.hosts, err, sizeof (err)) < 0)
        die_usage ("%s", err);
    if (hostlist_count (j->hl) == 0 && slurm_inside ()) {
        if (slurm_load_hosts (j->hl, err, sizeof (err)) < 0)
            die_usage ("%s", err);
        j->slurm = 1;
    }
    j->local = hostlist_count (j->hl) == 0;
    if (j->o.spares > 0) {
        if (j->local)
            die_usage ("--spares %d needs a host list (a hostfile, --host, or a Slurm "
                       "allocation); "
                       "this job runs on the local host only",
                       j->o.spares);
        if (hostlist_set_spares (j->hl, j->o.spares, err, sizeof (err)) < 0)
            die_usage ("%s", err);
    }
    /* hosts the scheduler already shows down are replaced from the start */
    if (!j->local) {
        char log[512];
        if (hostlist_replace_failed (j->hl, log, sizeof (log)) > 0)
            log_info ("%s (down in Slurm)", log);
    }
}

static void setup_run_dir (struct job *j)
{
    char path[PATH_MAX], *text;
    const char *d = j->o.run_dir ? j->o.run_dir : getenv ("ELASTIC_RUN_DIR");
    const char *jobid = getenv ("SLURM_JOB_ID");

    if (d && *d)
        snprintf (path, sizeof (path), "%s", d);
    else if (jobid && *jobid)
        snprintf (path, sizeof (path), ".elastic-mpirun/job-%s", jobid);
    else
        snprintf (path, sizeof (path), ".elastic-mpirun/local");
    if (j->o.dry_run) {
        snprintf (j->run_dir, sizeof (j->run_dir), "%s", path);
        return;
    }
    if (mkdir_p (path) < 0)
        die_usage ("run directory %s: %s (give --run-dir DIR)", path, strerror (errno));
    if (!realpath (path, j->run_dir))
        die_usage ("run directory %s: %s", path, strerror (errno));
    snprintf (path, sizeof (path), "%s/lock", j->run_dir);
    if ((j->lock_fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
        die_usage ("%s: %s", path, strerror (errno));
    if (flock (j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        char pid[32] = "?";
        ssize_t n = pread (j->lock_fd, pid, sizeof (pid) - 1, 0);
        pid[n > 0 ? n : 1] = '\0';
        pid[strcspn (pid, "\n")] = '\0';
        die_usage ("run directory %s is in use by another elastic-mpirun (pid %s): give "
                   "this job "
                   "its own --run-dir",
                   j->run_dir,
                   pid);
    }
    if (ftruncate (j->lock_fd, 0) == 0) {
        char pid[32];
        int n = snprintf (pid, sizeof (pid), "%d\n", (int)getpid ());
        if (pwrite (j->lock_fd, pid, (size_t)n, 0) < 0)
            log_debug ("cannot write %s", path);
    }
    snprintf (path, sizeof (path), "%s/state", j->run_dir);
    if ((text = read_text (path, 4096))) {
        char *p;
        if ((p = strstr (text, "state=")))
            sscanf (p + 6, "%31s", j->prev_state);
        if ((p = strstr (text, "attempts=")))
            j->prev_attempts = atoi (p + 9);
        free (text);
    }
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

static void decide_resume (struct job *j)
{
    const char *env = getenv ("ELASTIC_RESUME");
    const char *restarts = getenv ("SLURM_RESTART_COUNT");

    if (j->o.resume == TRI_YES)
        j->resume_first = 1;
    else if (j->o.resume == TRI_NO)
        j->resume_first = 0;
    else if (env && strcmp (env, "1") == 0) {
        j->resume_first = 1;
        log_info ("ELASTIC_RESUME=1 is set: the first launch resumes from the newest L3 "
                  "snapshot");
    } else if (j->prev_state[0] && strcmp (j->prev_state, "completed") != 0) {
        j->resume_first = 1;
        log_info ("the previous run in %s ended %s after %d attempt%s: resuming from the "
                  "newest "
                  "L3 snapshot",
                  j->run_dir,
                  j->prev_state,
                  j->prev_attempts,
                  j->prev_attempts == 1 ? "" : "s");
    } else if (restarts && atoi (restarts) > 0) {
        j->resume_first = 1;
        log_info ("Slurm requeued this job (SLURM_RESTART_COUNT=%s): resuming from the "
                  "newest L3 "
                  "snapshot",
                  restarts);
    }
}

/* ---- the mpirun command ------------------------------------------------ */

static void
add_mca (struct argvec *a, const struct job *j, const char *key, const char *value)
{
    if (options_has_mca (&j->o, key))
        return;
    av_add (a, "--mca");
    av_add (a, key);
    av_add (a, value);
}

static int oversubscribed (const struct job *j, int np)
{
    if (j->local)
        return np > j->ncpu;
    int slots = 0;
    hostlist_count_state (j->hl, HOST_ACTIVE, &slots);
    return slots > 0 && np > slots;
}

static void build_command (struct job *j, int np, const char *hostfile, struct argvec *a)
{
    const struct options *o = &j->o;
    char buf[64];
    int auto_oversub = 0;

    av_add (a, j->mi.path);
    if (j->mi.ulfm) {
        if (!o->with_ft) {
            av_add (a, "--with-ft");
            av_add (a, "ulfm");
        }
        add_mca (a, j, "pml", "ob1");
        add_mca (a, j, "coll", "^han");
        /* MPI_Finalize's PMIx fence hangs after a rank's death without it */
        add_mca (a, j, "async_mpi_finalize", "1");
        if (!options_has_mca (o, "mpi_ft_detector")) {
            double period = 0, timeout = 0;
            int hosts = j->local ? 1 : hostlist_count_state (j->hl, HOST_ACTIVE, NULL);
            if (o->det_mode == 2) {
                period = o->det_period;
                timeout = o->det_timeout;
            } else if (o->det_mode == 0 && hosts > 1) {
                /* across hosts a heartbeat also catches a silent node; an
                 * oversubscribed rank answers late, so give it longer */
                int over = oversubscribed (j, np);
                period = over ? 3 : 1;
                timeout = over ? 15 : 4;
            }
            if (period > 0) {
                add_mca (a, j, "mpi_ft_detector", "true");
                snprintf (buf, sizeof (buf), "%g", period);
                add_mca (a, j, "mpi_ft_detector_period", buf);
                snprintf (buf, sizeof (buf), "%g", timeout);
                add_mca (a, j, "mpi_ft_detector_timeout", buf);
            } else
                add_mca (a, j, "mpi_ft_detector", "false");
        }
    }
    for (int i = 0; i < o->npass; i++)
        av_add (a, o->pass[i]);
    if (np > 0 && !o->npernode) {
        snprintf (buf, sizeof (buf), "%d", np);
        av_add (a, "-n");
        av_add (a, buf);
    }
    if (hostfile) {
        av_add (a, "--hostfile");
        av_add (a, hostfile);
    }
    if (!o->oversubscribe && np > 0 && j->local && oversubscribed (j, np)) {
        /* one host, more ranks than cores: what mpirun refuses by default */
        auto_oversub = 1;
        av_add (a, "--oversubscribe");
        if (!o->bind_given) {
            av_add (a, "--bind-to");
            av_add (a, "none");
        }
    }
    (void)auto_oversub;
    av_add (a, "-x");
    av_add (a, "ELASTIC_EVENT_LOG");
    av_add (a, "-x");
    av_add (a, "ELASTIC_RUN_DIR");
    av_add (a, "-x");
    av_add (a, "ELASTIC_ATTEMPT");
    av_add (a, "-x");
    av_add (a, "ELASTIC_RUN_ID");
    if (getenv ("ELASTIC_RESUME")) {
        av_add (a, "-x");
        av_add (a, "ELASTIC_RESUME");
    }
    if (getenv ("ELASTIC_RESUME_FRESH_OK")) {
        av_add (a, "-x");
        av_add (a, "ELASTIC_RESUME_FRESH_OK");
    }
    if (o->wrap) {
        av_add (a, j->exec);
        for (int i = 0; i < o->nexec_opts; i++)
            av_add (a, o->exec_opts[i]);
        av_add (a, "--");
    }
    for (int i = 0; i < o->napp; i++)
        av_add (a, o->app[i]);
}

/* World size of the next attempt.  Returns 0, or -1 with err. */
static int plan (struct job *j, int *np, char *err, size_t errsz)
{
    const struct options *o = &j->o;

    if (j->local) {
        *np = o->np ? o->np : o->npernode ? o->npernode : j->ncpu;
        if (o->np_max && *np > o->np_max)
            *np = o->np_max;
        return 0;
    }
    if (o->npernode) {
        int hosts = hostlist_count_state (j->hl, HOST_ACTIVE, NULL);
        *np = o->npernode * hosts;
        if (hosts == 0 || *np < (o->np_min ? o->np_min : 1)) {
            snprintf (err,
                      errsz,
                      "-N %d on %d usable host%s gives %d ranks, below --np-min %d",
                      o->npernode,
                      hosts,
                      hosts == 1 ? "" : "s",
                      *np,
                      o->np_min ? o->np_min : 1);
            return -1;
        }
        return 0;
    }
    return hostlist_plan_np (
        j->hl, o->np, o->np_min, o->np_max, o->oversubscribe, np, err, errsz);
}

/* ---- after an attempt -------------------------------------------------- */

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

/* Whether mpirun's report says a host was lost or could not be launched on. */
static int lost_host (const struct report *rep)
{
    for (int i = 0; i < rep->n; i++)
        if (rep->f[i].kind == FAIL_NODE_LOST || rep->f[i].kind == FAIL_LAUNCH_HOST)
            return 1;
    return 0;
}

static int not_relaunchable (const struct report *rep)
{
    for (int i = 0; i < rep->n; i++)
        if (rep->f[i].kind == FAIL_NO_EXEC || rep->f[i].kind == FAIL_NO_SLOTS)
            return 1;
    return 0;
}

/* ---- the summary ------------------------------------------------------- */

static const char *outcome_name (enum outcome o)
{
    switch (o) {
        case OUT_COMPLETED:
            return "completed";
        case OUT_SUSPENDED:
            return "suspended";
        case OUT_RELAUNCH:
            return "failed, relaunched";
        case OUT_FAILED:
            return "failed";
        case OUT_INTERRUPTED:
            return "interrupted";
    }
    return "?";
}

static void summary (struct job *j, const char *final, int status, const char *final_why)
{
    char path[PATH_MAX];
    FILE *files[2] = {stderr, NULL};
    int inplace = 0, relaunches = 0;
    double inplace_ms = 0, relaunch_lost = 0, total = launch_now () - j->t0;

    if (!j->o.dry_run) {
        snprintf (path, sizeof (path), "%s/summary.txt", j->run_dir);
        files[1] = fopen (path, "w");
    }
    for (int i = 0; i < j->natt; i++) {
        inplace += j->att[i].reshards;
        inplace_ms += j->att[i].reshard_ms;
        if (j->att[i].outcome == OUT_RELAUNCH && i + 1 < j->natt) {
            relaunches++;
            double from = j->att[i].t_failure > 0 ? j->att[i].t_failure : j->att[i].t_end;
            relaunch_lost += j->att[i + 1].t_start - from;
        }
    }
    for (int k = 0; k < 2; k++) {
        FILE *f = files[k];
        if (!f)
            continue;
        fprintf (f,
                 "%s: summary: %s (exit %d) after %d attempt%s in %.1f s\n",
                 prog,
                 final,
                 status,
                 j->natt,
                 j->natt == 1 ? "" : "s",
                 total);
        fprintf (f,
                 "  mode: %s (Open MPI %s, %s)%s\n",
                 j->mi.ulfm ? "in-place recovery (ULFM) + relaunch"
                            : "relaunch-only (no ULFM)",
                 j->mi.version,
                 j->mi.path,
                 j->o.wrap ? ", ranks under elastic-exec" : "");
        for (int i = 0; i < j->natt; i++) {
            const struct attempt *a = &j->att[i];
            fprintf (f,
                     "  attempt %d: %.1f s, %d rank%s on %s%s: %s (mpirun exit %d)",
                     a->number,
                     a->t_end - a->t_start,
                     a->np,
                     a->np == 1 ? "" : "s",
                     a->hosts,
                     a->resumed ? ", resumed from L3" : "",
                     outcome_name (a->outcome),
                     a->exit_code);
            if (a->why[0] && a->outcome != OUT_COMPLETED)
                fprintf (f, " - %s", a->why);
            fprintf (f, "\n");
            if (a->reshards)
                fprintf (f,
                         "    in-place recoveries: %d (%.1f ms in all): %s\n",
                         a->reshards,
                         a->reshard_ms,
                         a->reshard_lines);
            if (a->excluded[0])
                fprintf (f, "    excluded: %s\n", a->excluded);
            if (a->spares[0])
                fprintf (f, "    %s\n", a->spares);
            if (a->outcome == OUT_RELAUNCH && i + 1 < j->natt) {
                double from = a->t_failure > 0 ? a->t_failure : a->t_end;
                fprintf (f,
                         "    lost to this failure: %.2f s from the failure report to "
                         "the relaunch "
                         "(plus the work since the snapshot it resumes from)\n",
                         j->att[i + 1].t_start - from);
            }
        }
        fprintf (f,
                 "  failures: %d in place (%.1f ms lost to recovery), %d relaunch%s "
                 "(%.2f s lost "
                 "between failure and relaunch)\n",
                 inplace,
                 inplace_ms,
                 relaunches,
                 relaunches == 1 ? "" : "es",
                 relaunch_lost);
        if (!j->local) {
            char d[1024];
            hostlist_describe (j->hl, d, sizeof (d));
            fprintf (f, "  hosts: %s\n", d);
        }
        fprintf (f,
                 "  final state: %s%s%s\n",
                 final,
                 final_why ? " - " : "",
                 final_why ? final_why : "");
        if (!j->o.dry_run)
            fprintf (f, "  run directory: %s\n", j->run_dir);
    }
    if (files[1])
        fclose (files[1]);
}

/* ---- main -------------------------------------------------------------- */

int main (int argc, char **argv)
{
    struct job *j;
    char err[1024];
    int rc, status = EXIT_FAILED;
    const char *final = "failed", *final_why = NULL;
    char final_buf[1024] = "";
    const char *mpirun;

    if (!(j = calloc (1, sizeof (*j)))) {
        fprintf (stderr, "%s: out of memory\n", prog);
        return EXIT_FAILED;
    }
    j->t0 = launch_now ();
    j->lock_fd = -1;
    log_init (prog, LOG_INFO);
    rc = options_parse (&j->o, argc, argv, err, sizeof (err));
    if (rc < 0)
        die_usage ("%s", err);
    if (rc > 0)
        return 0;
    log_set_level (j->o.verbose < 0    ? LOG_WARN
                   : j->o.verbose >= 2 ? LOG_DEBUG
                                       : LOG_INFO);

    mpirun = j->o.mpirun;
    if (!mpirun && getenv ("ELASTIC_MPIRUN") && *getenv ("ELASTIC_MPIRUN"))
        mpirun = getenv ("ELASTIC_MPIRUN");
    if (!mpirun)
        mpirun = *ELASTIC_MPIRUN ? ELASTIC_MPIRUN : "mpirun";
    if (probe_mpi (mpirun, j->o.ulfm, &j->mi, err, sizeof (err)) < 0)
        die_usage ("%s", err);
    if (j->o.detector && j->o.det_mode != 0 && !j->mi.ulfm)
        log_info ("--detector %s ignored: no ULFM", j->o.detector);

    j->ncpu = count_cpus ();
    load_hosts (j);
    if (j->o.wrap)
        find_exec (j);
    else
        j->exec[0] = '\0';

    /* the first launch must be possible */
    {
        int np;
        if (plan (j, &np, err, sizeof (err)) < 0)
            die_usage ("%s", err);
    }
    setup_run_dir (j);
    if (!j->o.dry_run)
        decide_resume (j);

    if (geteuid () == 0) {
        setenv ("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    j->user_event_log = getenv ("ELASTIC_EVENT_LOG");
    if (j->user_event_log && !*j->user_event_log)
        j->user_event_log = NULL;

    if (j->mi.ulfm)
        log_info (
            "Open MPI %s with ULFM: failures are recovered in place where the ranks can; "
            "the job is relaunched from the newest L3 snapshot where they cannot",
            j->mi.version);
    else
        log_warn (
            "relaunch-only mode: %s (Open MPI %s) has no ULFM, so every failure is a "
            "relaunch from the newest L3 snapshot",
            j->mi.path,
            j->mi.version);

    if (launch_init () < 0) {
        fprintf (stderr, "%s: signals: %s\n", prog, strerror (errno));
        return EXIT_FAILED;
    }

    /* the user's own ELASTIC_RESUME_FRESH_OK wins over the relaunches' */
    int fresh_ok_given = getenv ("ELASTIC_RESUME_FRESH_OK") != NULL;

    for (int k = 0; k <= j->o.max_relaunches; k++) {
        struct attempt *at =
            &j->att[j->natt < MAX_ATTEMPTS_SHOWN ? j->natt : MAX_ATTEMPTS_SHOWN - 1];
        struct argvec cmd = {0};
        struct launch_result res;
        struct events ev;
        struct report all;
        char dir[PATH_MAX], hostfile[PATH_MAX + 16], evlog[PATH_MAX + 16], num[32],
            line[8192];
        const char *hf = NULL;
        char evidence[4200];
        off_t ev_from = 0;
        int np, suspended, resume = k > 0 || j->resume_first;

        memset (at, 0, sizeof (*at));
        at->number = j->prev_attempts + k + 1;
        at->resumed = resume;
        if (!j->local) {
            char log[512];
            if (j->slurm)
                slurm_refresh_down (j->hl);
            if (hostlist_replace_failed (j->hl, log, sizeof (log)) > 0) {
                log_info ("%s", log);
                snprintf (at->spares, sizeof (at->spares), "%s", log);
            }
        }
        if (plan (j, &np, err, sizeof (err)) < 0) {
            snprintf (final_buf,
                      sizeof (final_buf),
                      "cannot launch attempt %d: %s",
                      at->number,
                      err);
            log_err ("%s", final_buf);
            final_why = final_buf;
            break;
        }
        at->np = np;
        if (j->local) {
            char host[256] = "localhost";
            gethostname (host, sizeof (host));
            host[sizeof (host) - 1] = '\0';
            snprintf (at->hosts, sizeof (at->hosts), "%s", host);
        } else {
            size_t used = 0;
            for (size_t i = 0; i < hostlist_count (j->hl) && used < sizeof (at->hosts);
                 i++) {
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
        }

        snprintf (dir, sizeof (dir), "%s/attempt-%d", j->run_dir, at->number);
        if (!j->o.dry_run && mkdir_p (dir) < 0) {
            snprintf (final_buf, sizeof (final_buf), "%s: %s", dir, strerror (errno));
            final_why = final_buf;
            break;
        }
        if (!j->local) {
            FILE *f;
            snprintf (hostfile, sizeof (hostfile), "%s/hostfile", dir);
            hf = hostfile;
            if (!j->o.dry_run) {
                if (!(f = fopen (hostfile, "w")) || hostlist_write (j->hl, f) < 0 ||
                    fclose (f) != 0) {
                    snprintf (final_buf,
                              sizeof (final_buf),
                              "%s: %s",
                              hostfile,
                              strerror (errno));
                    final_why = final_buf;
                    break;
                }
            }
        }
        /* the ranks' environment */
        if (j->user_event_log) {
            struct stat st;
            snprintf (evlog, sizeof (evlog), "%s", j->user_event_log);
            ev_from = stat (evlog, &st) == 0 ? st.st_size : 0;
        } else
            snprintf (evlog, sizeof (evlog), "%s/events.jsonl", dir);
        setenv ("ELASTIC_EVENT_LOG", evlog, 1);
        setenv ("ELASTIC_RUN_DIR", j->run_dir, 1);
        /* One run id for every attempt, so that a relaunch finds the
         * snapshots of the earlier attempts (elastic-exec would otherwise
         * derive one from each mpirun's namespace).  The library's own
         * default is the same: SLURM_JOB_ID, else "default". */
        if (!getenv ("ELASTIC_RUN_ID"))
            setenv ("ELASTIC_RUN_ID",
                    getenv ("SLURM_JOB_ID") ? getenv ("SLURM_JOB_ID") : "default",
                    1);
        snprintf (num, sizeof (num), "%d", at->number);
        setenv ("ELASTIC_ATTEMPT", num, 1);
        if (resume)
            setenv ("ELASTIC_RESUME", "1", 1);
        else
            unsetenv ("ELASTIC_RESUME");
        /* a relaunch after a failure that came before the first L3 snapshot
         * has nothing to resume from: it starts fresh (the library says
         * so) instead of failing every relaunch on "no L3 snapshot"; a
         * first launch asked to resume stays strict */
        if (k > 0 && !fresh_ok_given)
            setenv ("ELASTIC_RESUME_FRESH_OK", "1", 1);

        build_command (j, np, hf, &cmd);
        format_command (cmd.v, line, sizeof (line));
        if (j->o.dry_run) {
            printf ("%s\n", line);
            if (hf) {
                printf ("# %s:\n", hostfile);
                hostlist_write (j->hl, stdout);
            }
            printf ("# environment: ELASTIC_EVENT_LOG=%s ELASTIC_RUN_DIR=%s "
                    "ELASTIC_ATTEMPT=%s%s\n",
                    evlog,
                    j->run_dir,
                    num,
                    resume ? " ELASTIC_RESUME=1" : "");
            av_free (&cmd);
            options_free (&j->o);
            hostlist_destroy (j->hl);
            free (j);
            return 0;
        }
        {
            char path[PATH_MAX + 16];
            FILE *f;
            snprintf (path, sizeof (path), "%s/command", dir);
            if ((f = fopen (path, "w"))) {
                fprintf (f, "%s\n", line);
                fclose (f);
            }
        }
        if (j->o.verbose > 0)
            log_info ("attempt %d: %s", at->number, line);
        else
            log_info ("attempt %d: %d rank%s on %s%s",
                      at->number,
                      np,
                      np == 1 ? "" : "s",
                      at->hosts,
                      resume ? ", resuming from the newest L3 snapshot (ELASTIC_RESUME=1)"
                             : "");
        write_state (j, "running", at->number);
        if (j->natt < MAX_ATTEMPTS_SHOWN)
            j->natt++;

        rc = launch_run (cmd.v, j->o.suspend_timeout, &res, err, sizeof (err));
        av_free (&cmd);
        if (rc < 0) {
            snprintf (final_buf, sizeof (final_buf), "cannot start mpirun: %s", err);
            final_why = final_buf;
            at->t_start = at->t_end = launch_now ();
            at->outcome = OUT_FAILED;
            break;
        }
        at->t_start = res.t_start;
        at->t_end = res.t_end;
        at->t_failure = res.t_failure;
        at->exit_code = res.exit_code;

        /* what happened: mpirun's report and the event log */
        events_init (&ev);
        if (events_read_file (&ev, evlog, ev_from) < 0 && errno != ENOENT)
            log_warn ("event log %s: %s", evlog, strerror (errno));
        events_resolve_hosts (&ev);
        if (ev.bad_lines)
            log_debug ("event log %s: %d line%s ignored (not JSON events)",
                       evlog,
                       ev.bad_lines,
                       ev.bad_lines == 1 ? "" : "s");
        at->reshards = ev.nreshard;
        at->reshards_down = ev.nreshard_down;
        at->reshard_ms = ev.reshard_ms;
        {
            size_t used = 0;
            for (int i = 0; i < ev.nreshard && i < EVENTS_MAX_RESHARDS &&
                            used < sizeof (at->reshard_lines);
                 i++) {
                const struct reshard *r = &ev.r[i];
                int n = snprintf (at->reshard_lines + used,
                                  sizeof (at->reshard_lines) - used,
                                  "%s%s at step %lld: %d -> %d ranks, %.1f ms",
                                  used ? "; " : "",
                                  r->kind,
                                  r->step,
                                  r->old_size,
                                  r->new_size,
                                  r->total_ms);
                used += n > 0 ? (size_t)n : 0;
            }
        }
        report_init (&all);
        merge_reports (&all, &res.rep);
        merge_reports (&all, &ev.failed);
        describe_failures (&all, res.exit_code, at->why, sizeof (at->why));
        if (ev.nfatal && ev.fatal[0]) {
            size_t used = strlen (at->why);
            snprintf (at->why + used, sizeof (at->why) - used, "; library: %s", ev.fatal);
        }
        /* a suspension by mpirun's code or by the ranks' account (mpirun's
         * code can be lost after they suspended: mpirun killed, or crashed
         * in its teardown); but when nobody preempted this job and no rank
         * wrote a suspend snapshot, the 75s came from ranks' wrappers that
         * took the SIGTERM of Open MPI's own abort for a preemption */
        suspended = res.exit_code == ELASTIC_EXIT_SUSPENDED ||
                    events_suspended (&ev, np, evidence, sizeof (evidence));
        if (suspended && !res.preempt_signal && !(ev.nsuspend && ev.suspend_file[0])) {
            log_warn ("mpirun exited %d and ranks exited %d, but this job was not "
                      "preempted and no rank suspended to an L3 snapshot (Open MPI stops "
                      "the ranks with SIGTERM when it aborts a job): the attempt counts "
                      "as failed",
                      res.exit_code,
                      ELASTIC_EXIT_SUSPENDED);
            suspended = 0;
        } else if (suspended && res.exit_code != ELASTIC_EXIT_SUSPENDED)
            log_warn ("mpirun exited %d%s, but %s: the attempt counts as suspended",
                      res.exit_code,
                      res.mpirun_signal ? " (killed by a signal)" : "",
                      evidence);
        if (res.rep.text[0]) {
            char path[PATH_MAX + 16];
            FILE *f;
            snprintf (path, sizeof (path), "%s/report.txt", dir);
            if ((f = fopen (path, "w"))) {
                fprintf (f, "%s\n", res.rep.text);
                fclose (f);
            }
        }
        events_clear (&ev);

        /* decide: PRRTE 3.0 under --with-ft ulfm exits 0 after it lost a
         * daemon and terminated the job, so a lost host is a failure
         * whatever mpirun's exit code */
        if (res.exit_code == 0 && !lost_host (&res.rep)) {
            at->outcome = OUT_COMPLETED;
            final = "completed";
            status = 0;
            final_why = NULL;
            break;
        }
        if (suspended) {
            at->outcome = OUT_SUSPENDED;
            final = "suspended";
            status = ELASTIC_EXIT_SUSPENDED;
            snprintf (final_buf,
                      sizeof (final_buf),
                      "the ranks suspended to an L3 snapshot; rerun the same command to "
                      "resume");
            final_why = final_buf;
            break;
        }
        if (res.interrupt_signal) {
            at->outcome = OUT_INTERRUPTED;
            final = "interrupted";
            status = 128 + res.interrupt_signal;
            snprintf (final_buf,
                      sizeof (final_buf),
                      "stopped by %s",
                      strsignal (res.interrupt_signal));
            final_why = final_buf;
            break;
        }
        if (res.preempt_signal) {
            at->outcome = OUT_FAILED;
            final = "failed";
            status = EXIT_FAILED;
            snprintf (final_buf,
                      sizeof (final_buf),
                      "preempted (%s), but the ranks did not suspend (mpirun exit %d%s): "
                      "a rerun "
                      "resumes from the newest L3 snapshot, if any",
                      strsignal (res.preempt_signal),
                      res.exit_code,
                      res.forced ? ", stopped after --suspend-timeout" : "");
            final_why = final_buf;
            break;
        }
        if (not_relaunchable (&all)) {
            at->outcome = OUT_FAILED;
            snprintf (final_buf, sizeof (final_buf), "not relaunched: %s", at->why);
            final_why = final_buf;
            log_err ("%s", final_buf);
            break;
        }
        exclude_hosts (j, at, &all);
        if (k == j->o.max_relaunches) {
            at->outcome = OUT_FAILED;
            snprintf (final_buf,
                      sizeof (final_buf),
                      "giving up: %d relaunch%s exhausted (--max-relaunches %d); last "
                      "failure: %s",
                      j->o.max_relaunches,
                      j->o.max_relaunches == 1 ? "" : "es",
                      j->o.max_relaunches,
                      at->why);
            final_why = final_buf;
            log_err ("%s", final_buf);
            break;
        }
        at->outcome = OUT_RELAUNCH;
        log_warn ("attempt %d failed after %.1f s (%s%s): relaunching (%d of %d) from "
                  "the newest "
                  "L3 snapshot",
                  at->number,
                  at->t_end - at->t_start,
                  res.exit_code == ELASTIC_EXIT_RELAUNCH ? "relaunch requested: " : "",
                  at->why,
                  k + 1,
                  j->o.max_relaunches);
        write_state (j, "relaunching", at->number);
        {
            int sig = launch_wait_signal (j->o.relaunch_delay);
            if (sig == SIGTERM || sig == SIGUSR1) {
                final = "suspended";
                status = ELASTIC_EXIT_SUSPENDED;
                snprintf (
                    final_buf,
                    sizeof (final_buf),
                    "preempted (%s) between attempts: not relaunched; rerun the same "
                    "command to resume from the newest L3 snapshot",
                    strsignal (sig));
                final_why = final_buf;
                break;
            }
            if (sig) {
                final = "interrupted";
                status = 128 + sig;
                snprintf (final_buf,
                          sizeof (final_buf),
                          "stopped by %s between attempts",
                          strsignal (sig));
                final_why = final_buf;
                break;
            }
        }
    }
    write_state (j, final, j->prev_attempts + j->natt);
    summary (j, final, status, final_why);
    options_free (&j->o);
    hostlist_destroy (j->hl);
    if (j->lock_fd >= 0)
        close (j->lock_fd);
    free (j);
    return status;
}
