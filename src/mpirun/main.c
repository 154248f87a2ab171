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

#include "attempt.h"
#include "command.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"
#include "elastic.h"
#include "hostlist.h"
#include "job.h"
#include "launch.h"
#include "options.h"
#include "probe.h"
#include "summary.h"

/* ---- set-up ------------------------------------------------------------ */

static void die_usage (const char *fmt, ...)
    __attribute__ ((noreturn, format (printf, 1, 2)));

static void die_usage (const char *fmt, ...)
{
    va_list ap;
    fprintf (stderr, "%s: ", MPIRUN_PROG);
    va_start (ap, fmt);
    vfprintf (stderr, fmt, ap);
    va_end (ap);
    fprintf (stderr, "\n");
    exit (EXIT_USAGE);
}

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
    elastic_error_t err;

    if (!(j->hl = hostlist_create ()))
        die_usage ("out of memory");
    if (j->o.hostfile) {
        char *text = read_file (j->o.hostfile, 16 << 20, NULL);
        if (!text)
            die_usage ("--hostfile %s: %s", j->o.hostfile, strerror (errno));
        if (hostlist_parse_hostfile (j->hl, text, j->o.hostfile, &err) < 0) {
            free (text);
            die_usage ("%s", err.text);
        }
        free (text);
        if (hostlist_count (j->hl) == 0)
            die_usage ("--hostfile %s lists no hosts", j->o.hostfile);
    }
    if (j->o.hosts && hostlist_parse_hosts (j->hl, j->o.hosts, &err) < 0)
        die_usage ("%s", err.text);
    if (hostlist_count (j->hl) == 0 && slurm_inside ()) {
        if (slurm_load_hosts (j->hl, &err) < 0)
            die_usage ("%s", err.text);
        j->slurm = 1;
    }
    j->local = hostlist_count (j->hl) == 0;
    if (j->o.spares > 0) {
        if (j->local)
            die_usage ("--spares %d needs a host list (a hostfile, --host, or a Slurm "
                       "allocation); "
                       "this job runs on the local host only",
                       j->o.spares);
        if (hostlist_set_spares (j->hl, j->o.spares, &err) < 0)
            die_usage ("%s", err.text);
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
    if ((text = read_file (path, 4096, NULL))) {
        char *p;
        if ((p = strstr (text, "state=")))
            sscanf (p + 6, "%31s", j->prev_state);
        if ((p = strstr (text, "attempts=")))
            j->prev_attempts = atoi (p + 9);
        free (text);
    }
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

/* ---- main -------------------------------------------------------------- */

int main (int argc, char **argv)
{
    struct job *j;
    struct job_end end;
    elastic_error_t err;
    const char *mpirun;
    int rc;

    if (!(j = calloc (1, sizeof (*j)))) {
        fprintf (stderr, "%s: out of memory\n", MPIRUN_PROG);
        return EXIT_FAILED;
    }
    j->t0 = mono_now ();
    j->lock_fd = -1;
    log_init (MPIRUN_PROG, LOG_INFO);
    rc = options_parse (&j->o, argc, argv, &err);
    if (rc < 0)
        die_usage ("%s", err.text);
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
    if (probe_mpi (mpirun, j->o.ulfm, &j->mi, &err) < 0)
        die_usage ("%s", err.text);
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
        if (command_plan_np (j, &np, &err) < 0)
            die_usage ("%s", err.text);
    }
    setup_run_dir (j);
    if (!j->o.dry_run)
        decide_resume (j);

    if (geteuid () == 0) {
        setenv ("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    j->user_grow_slots = getenv ("ELASTIC_GROW_SLOTS") != NULL;
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
        fprintf (stderr, "%s: signals: %s\n", MPIRUN_PROG, strerror (errno));
        return EXIT_FAILED;
    }

    if (attempts_run (j, &end) > 0) {
        /* --dry-run: printed, nothing ran */
        options_free (&j->o);
        hostlist_destroy (j->hl);
        free (j);
        return 0;
    }
    summary_print (j, &end);
    options_free (&j->o);
    hostlist_destroy (j->hl);
    if (j->lock_fd >= 0)
        close (j->lock_fd);
    free (j);
    return end.status;
}
