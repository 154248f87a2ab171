/* probe.c - what the environment offers: Open MPI's flavour, ULFM, Slurm */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "probe.h"

int run_capture (char *const argv[], int merge, double timeout, char *out, size_t size)
{
    int fd[2], status, err_pipe[2];
    size_t used = 0;
    double deadline = mono_now () + timeout;
    pid_t pid;
    char drain[4096];

    if (size)
        out[0] = '\0';
    if (pipe2 (fd, O_CLOEXEC) < 0)
        return -1;
    if (pipe2 (err_pipe, O_CLOEXEC) < 0) {
        close (fd[0]);
        close (fd[1]);
        return -1;
    }
    if ((pid = fork ()) < 0) {
        int saved = errno;
        close (fd[0]);
        close (fd[1]);
        close (err_pipe[0]);
        close (err_pipe[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) {
        int devnull = open ("/dev/null", O_RDWR);
        if (devnull >= 0)
            dup2 (devnull, 0);
        dup2 (fd[1], 1);
        if (merge)
            dup2 (fd[1], 2);
        else if (devnull >= 0)
            dup2 (devnull, 2);
        execvp (argv[0], argv);
        int e = errno;
        if (write (err_pipe[1], &e, sizeof (e)) < 0)
            _exit (127);
        _exit (127);
    }
    close (fd[1]);
    close (err_pipe[1]);
    for (;;) {
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        double left = deadline - mono_now ();
        ssize_t n;
        if (left <= 0) {
            kill (pid, SIGKILL);
            waitpid (pid, NULL, 0);
            close (fd[0]);
            close (err_pipe[0]);
            errno = ETIMEDOUT;
            return -1;
        }
        if (poll (&p, 1, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        char *dst = used + 1 < size ? out + used : drain;
        n = read (fd[0], dst, dst == drain ? sizeof (drain) : size - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != drain)
            used += (size_t)n;
    }
    if (size)
        out[used < size ? used : size - 1] = '\0';
    close (fd[0]);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    {
        int e = 0;
        if (read (err_pipe[0], &e, sizeof (e)) == (ssize_t)sizeof (e)) {
            close (err_pipe[0]);
            errno = e;
            return -1;
        }
        close (err_pipe[0]);
    }
    if (WIFEXITED (status))
        return WEXITSTATUS (status);
    return 128 + WTERMSIG (status);
}

int probe_parse_version (const char *text, char *version, size_t size, int *major)
{
    const char *p;
    int a, b = 0, c = 0;

    if (!(p = strstr (text, "(Open MPI) ")) && !(p = strstr (text, "(OpenRTE) ")))
        return -1;
    p = strchr (p, ')') + 2;
    if (sscanf (p, "%d.%d.%d", &a, &b, &c) < 1)
        return -1;
    snprintf (version, size, "%d.%d.%d", a, b, c);
    *major = a;
    return 0;
}

/* ---- the probe's cache ------------------------------------------------------
 *
 * `mpirun --version` and `ompi_info` take tens of milliseconds of CPU and
 * wall time (ompi_info opens every MCA component), on every start of
 * elastic-mpirun: their answers are kept in $XDG_CACHE_HOME/elastic (else
 * ~/.cache/elastic), one file per mpirun, under a key that changes with
 * the files that decide them (mpirun's and ompi_info's real paths, device,
 * inode, size and modification time) and with this build's configured
 * defaults.  A missing, unreadable or stale entry means probing again; a
 * cache that cannot be written is not an error.  ELASTIC_MPI_PROBE_CACHE=0
 * turns it off. */

static int stat_key (const char *path, char *buf, size_t size)
{
    struct stat st;

    if (stat (path, &st) < 0)
        return snprintf (buf, size, "%s:none", path);
    return snprintf (buf,
                     size,
                     "%s:%llu:%llu:%lld:%lld.%09ld",
                     path,
                     (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino,
                     (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
}

/* The cache file for key (NUL-terminated path in buf), or -1 when there
 * is no cache. */
static int cache_path (const char *key, char *buf, size_t size)
{
    const char *v = getenv ("ELASTIC_MPI_PROBE_CACHE");
    const char *xdg = getenv ("XDG_CACHE_HOME"), *home = getenv ("HOME");
    uint64_t h = 1469598103934665603ULL;
    int n;

    if (v && strcmp (v, "0") == 0)
        return -1;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    if (xdg && xdg[0] == '/')
        n = snprintf (
            buf, size, "%s/elastic/mpi-probe-%016llx", xdg, (unsigned long long)h);
    else if (home && home[0] == '/')
        n = snprintf (buf,
                      size,
                      "%s/.cache/elastic/mpi-probe-%016llx",
                      home,
                      (unsigned long long)h);
    else
        return -1;
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* Fill mi's version, major, ulfm (-1 unknown) and how from the cache.
 * Returns 0 on a hit. */
static int cache_read (const char *key, struct mpi_info *mi)
{
    char path[PATH_MAX], line[PATH_MAX * 3];
    FILE *f;
    int ok = 0;

    if (cache_path (key, path, sizeof (path)) < 0 || !(f = fopen (path, "re")))
        return -1;
    if (fgets (line, sizeof (line), f) && strcspn (line, "\n") == strlen (key) &&
        strncmp (line, key, strlen (key)) == 0 &&
        fscanf (f, "%63s %d %d ", mi->version, &mi->major, &mi->ulfm) == 3 &&
        fgets (mi->how, sizeof (mi->how), f)) {
        mi->how[strcspn (mi->how, "\n")] = '\0';
        ok = 1;
    }
    fclose (f);
    return ok ? 0 : -1;
}

static void cache_write (const char *key, const struct mpi_info *mi)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32], *slash;
    FILE *f;

    if (cache_path (key, path, sizeof (path)) < 0 ||
        snprintf (tmp, sizeof (tmp), "%s.%d", path, (int)getpid ()) >= (int)sizeof (tmp))
        return;
    /* the cache directory (and ~/.cache) */
    slash = strrchr (tmp, '/');
    *slash = '\0';
    if (mkdir (tmp, 0700) < 0 && errno == ENOENT) {
        char *up = strrchr (tmp, '/');
        *up = '\0';
        mkdir (tmp, 0700);
        *up = '/';
        mkdir (tmp, 0700);
    }
    *slash = '/';
    if (!(f = fopen (tmp, "we")))
        return;
    fprintf (f, "%s\n%s %d %d\n%s\n", key, mi->version, mi->major, mi->ulfm, mi->how);
    if (fclose (f) != 0 || rename (tmp, path) < 0)
        unlink (tmp);
}

int probe_mpi (const char *path, int want_ulfm, struct mpi_info *mi, elastic_error_t *err)
{
    char out[8192], dir[PATH_MAX], info[PATH_MAX + 16], real[PATH_MAX];
    char key[3 * PATH_MAX + 600];
    char *argv[4];
    int rc;

    memset (mi, 0, sizeof (*mi));
    if (!path || !*path)
        return errprintf (err, "no mpirun: give --mpirun PATH or set ELASTIC_MPIRUN");
    snprintf (mi->path, sizeof (mi->path), "%s", path);
    if (strchr (path, '/') && access (path, X_OK) < 0)
        return errprintf (
            err,
            "mpirun '%s' is not executable (%s): give --mpirun PATH to Open MPI's mpirun",
            path,
            strerror (errno));
    /* ompi_info beside the real mpirun knows whether ULFM was built in */
    if (!realpath (path, real))
        snprintf (real, sizeof (real), "%s", path);
    snprintf (dir, sizeof (dir), "%s", real);
    if (strrchr (dir, '/'))
        *strrchr (dir, '/') = '\0';
    else
        snprintf (dir, sizeof (dir), ".");
    snprintf (info, sizeof (info), "%s/ompi_info", dir);
    if (strchr (path, '/')) {
        char a[PATH_MAX + 128], b[PATH_MAX + 128];
        stat_key (real, a, sizeof (a));
        stat_key (info, b, sizeof (b));
        snprintf (
            key, sizeof (key), "v1 %s %s %s %s", a, b, ELASTIC_MPIRUN, ELASTIC_HAVE_ULFM);
        if (cache_read (key, mi) == 0)
            goto decided;
    } else
        key[0] = '\0'; /* found on PATH: which one may change */
    argv[0] = (char *)path;
    argv[1] = "--version";
    argv[2] = NULL;
    rc = run_capture (argv, 1, 60, out, sizeof (out));
    if (rc < 0)
        return errprintf (
            err,
            "cannot run '%s --version': %s (give --mpirun PATH to Open MPI's mpirun)",
            path,
            strerror (errno));
    if (probe_parse_version (out, mi->version, sizeof (mi->version), &mi->major) < 0) {
        char first[128];
        snprintf (first, sizeof (first), "%.*s", (int)strcspn (out, "\n"), out);
        return errprintf (
            err,
            "'%s' is not Open MPI's mpirun ('--version' said: %s); elastic-mpirun "
            "supports Open MPI 4.1 and 5",
            path,
            first[0] ? first : "nothing");
    }
    mi->ulfm = -1;
    if (access (info, X_OK) == 0) {
        argv[0] = info;
        argv[1] = NULL;
        if (run_capture (argv, 0, 60, out, sizeof (out)) == 0) {
            const char *ft = strstr (out, "FT MPI support:");
            mi->ulfm = ft && strncmp (ft + 15 + strspn (ft + 15, " "), "yes", 3) == 0;
            snprintf (mi->how, sizeof (mi->how), "%s", info);
        }
    }
    if (mi->ulfm < 0) {
        char creal[PATH_MAX];
        if (realpath (ELASTIC_MPIRUN, creal) && strcmp (creal, real) == 0) {
            mi->ulfm = strcmp (ELASTIC_HAVE_ULFM, "yes") == 0;
            snprintf (mi->how, sizeof (mi->how), "configure");
        } else {
            mi->ulfm = 0;
            snprintf (mi->how, sizeof (mi->how), "no ompi_info beside it");
        }
    }
    if (key[0])
        cache_write (key, mi);
decided:
    if (want_ulfm == 1 && !mi->ulfm)
        return errprintf (
            err,
            "--ulfm yes: %s (Open MPI %s) has no ULFM (%s); use --ulfm auto for "
            "relaunch-only mode",
            path,
            mi->version,
            mi->how);
    if (want_ulfm == 0)
        mi->ulfm = 0;
    if (mi->ulfm && mi->major < 5)
        mi->ulfm = 0; /* ULFM under mpirun needs PRRTE's --with-ft */
    return 0;
}

int slurm_inside (void)
{
    const char *id = getenv ("SLURM_JOB_ID");
    const char *nl = getenv ("SLURM_JOB_NODELIST");

    if (!nl)
        nl = getenv ("SLURM_NODELIST");
    return id && *id && nl && *nl;
}

static const char *nodelist (void)
{
    const char *nl = getenv ("SLURM_JOB_NODELIST");
    return nl && *nl ? nl : getenv ("SLURM_NODELIST");
}

int slurm_refresh_down (struct hostlist *hl)
{
    static char out[1 << 20];
    char *argv[] = {"sinfo", "-h", "-N", "-n", (char *)nodelist (), "-o", "%N %t", NULL};

    if (!argv[4] || run_capture (argv, 0, 60, out, sizeof (out)) != 0)
        return 0;
    return hostlist_mark_slurm_down (hl, out);
}

int slurm_load_hosts (struct hostlist *hl, elastic_error_t *err)
{
    static char out[1 << 20];
    char *argv[] = {"scontrol", "show", "hostnames", (char *)nodelist (), NULL};
    const char *counts = getenv ("SLURM_TASKS_PER_NODE");
    int rc, n;

    if (!counts || !*counts)
        counts = getenv ("SLURM_JOB_CPUS_PER_NODE");
    rc = run_capture (argv, 0, 60, out, sizeof (out));
    if (rc != 0)
        return errprintf (err,
                          "inside Slurm job %s, 'scontrol show hostnames %s' failed (%s)",
                          getenv ("SLURM_JOB_ID"),
                          argv[3],
                          rc < 0 ? strerror (errno) : "non-zero exit");
    if ((n = hostlist_add_slurm (hl, out, counts, err)) < 0)
        return -1;
    if (n == 0)
        return errprintf (err, "Slurm node list '%s' names no hosts", argv[3]);
    slurm_refresh_down (hl);
    return n;
}
