/* worker.c - a scriptable worker for elastic-exec's tests
 *
 * Runs its arguments as actions, in order:
 *   env:DIR               dump the environment to DIR/env.<RANK>.<RESTART>
 *   ready:DIR             write our pid to DIR/ready.<RANK>.<RESTART>
 *   crash:R:A:MODE        if RANK is R and ELASTIC_RESTART_COUNT is A ('*'
 *                         matches any): MODE segv | abort | kill | exit=N
 *                         | hang
 *   exit:N                exit with code N
 *   sleep:SECONDS         sleep
 *   hang                  sleep until killed
 *   waitfor:FILE          wait until FILE exists
 *   ignore:SIG            ignore a signal (e.g. TERM)
 *   trap:SIG:CODE         exit with CODE when SIG arrives
 *   print:N:TEXT          print N lines "TEXT rank=<RANK> i=<i>" on stdout
 *   eprint:N:TEXT         the same on stderr
 *   partial:TEXT          write TEXT to stdout without a newline
 *   spawn:DIR             fork a child that sleeps forever (same process
 *                         group); write its pid to DIR/child.<RANK>.<RESTART>
 *   timer:SCOPE:SECS:SIG  arm a file timer (TORCHELASTIC_TIMER_FILE) that
 *                         expires in SECS seconds with signal SIG (a number)
 *   release:SCOPE         release it
 * With libelastic (libworker):
 *   error:TEXT            elastic_record_error("%s", TEXT)
 *   progress:N:MS         report steps 1..N, MS milliseconds apart
 *   snapshot:STEP         elastic_progress_snapshot(STEP)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifdef WITH_LIBELASTIC
#include <elastic.h>
#endif

extern char **environ;

static const char *rank_s, *restart_s;
static int trap_code = 1;

static void path_for (char *buf, size_t size, const char *dir, const char *what)
{
    snprintf (buf, size, "%s/%s.%s.%s", dir, what, rank_s, restart_s);
}

static void write_text (const char *path, const char *text)
{
    char tmp[4200];
    FILE *f;

    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w"))) {
        perror (tmp);
        exit (100);
    }
    fputs (text, f);
    fclose (f);
    rename (tmp, path);
}

static int cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *)a, *(char *const *)b);
}

static void dump_env (const char *dir)
{
    char path[4096];
    size_t n = 0;
    char **v;
    FILE *f;

    for (char **e = environ; *e; e++)
        n++;
    v = calloc (n, sizeof (*v));
    memcpy (v, environ, n * sizeof (*v));
    qsort (v, n, sizeof (*v), cmp);
    path_for (path, sizeof (path), dir, "env");
    char tmp[4200];
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    f = fopen (tmp, "w");
    for (size_t i = 0; f && i < n; i++)
        fprintf (f, "%s\n", v[i]);
    if (f) {
        fclose (f);
        rename (tmp, path);
    }
    free (v);
}

static int matches (const char *pattern, const char *value)
{
    return strcmp (pattern, "*") == 0 || strcmp (pattern, value) == 0;
}

static void on_trap (int sig)
{
    _exit (trap_code);
}

static int signum (const char *s)
{
    static const struct {
        const char *n;
        int v;
    } names[] = {{"TERM", SIGTERM},
                 {"INT", SIGINT},
                 {"HUP", SIGHUP},
                 {"USR1", SIGUSR1},
                 {"USR2", SIGUSR2},
                 {"QUIT", SIGQUIT},
                 {"KILL", SIGKILL}};
    for (size_t i = 0; i < sizeof (names) / sizeof (names[0]); i++)
        if (strcmp (s, names[i].n) == 0)
            return names[i].v;
    return atoi (s);
}

static void timer_request (const char *scope, double expiration, int sig)
{
    const char *path = getenv ("TORCHELASTIC_TIMER_FILE");
    char line[512];
    int fd, n;

    if (!path) {
        fprintf (stderr, "worker: no TORCHELASTIC_TIMER_FILE\n");
        exit (101);
    }
    if ((fd = open (path, O_WRONLY | O_NONBLOCK)) < 0) {
        perror (path);
        exit (101);
    }
    n = snprintf (
        line,
        sizeof (line),
        "{\"version\": 1, \"pid\": %d, \"scope_id\": \"%s\", \"expiration_time\": %.6f, "
        "\"signal\": %d}\n",
        (int)getpid (),
        scope,
        expiration,
        sig);
    if (write (fd, line, (size_t)n) != n) {
        perror ("timer write");
        exit (101);
    }
    close (fd);
}

static double now (void)
{
    struct timeval tv;
    gettimeofday (&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

int main (int argc, char **argv)
{
    char path[4096], text[64];

    rank_s = getenv ("RANK") ? getenv ("RANK") : "x";
    restart_s = getenv ("ELASTIC_RESTART_COUNT") ? getenv ("ELASTIC_RESTART_COUNT") : "x";
    setvbuf (stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        char *a = strdup (argv[i]), *arg = strchr (a, ':');
        if (arg)
            *arg++ = '\0';
        if (strcmp (a, "env") == 0)
            dump_env (arg);
        else if (strcmp (a, "ready") == 0) {
            path_for (path, sizeof (path), arg, "ready");
            snprintf (text, sizeof (text), "%d\n", (int)getpid ());
            write_text (path, text);
        } else if (strcmp (a, "crash") == 0) {
            char *r = strtok (arg, ":"), *at = strtok (NULL, ":"),
                 *mode = strtok (NULL, ":");
            if (!r || !at || !mode) {
                fprintf (stderr, "worker: crash:R:A:MODE\n");
                return 102;
            }
            if (matches (r, rank_s) && matches (at, restart_s)) {
                if (strcmp (mode, "segv") == 0) {
                    signal (SIGSEGV, SIG_DFL);
                    raise (SIGSEGV);
                } else if (strcmp (mode, "abort") == 0)
                    abort ();
                else if (strcmp (mode, "kill") == 0)
                    raise (SIGKILL);
                else if (strncmp (mode, "exit=", 5) == 0)
                    exit (atoi (mode + 5));
                else if (strcmp (mode, "hang") == 0) {
                    for (;;)
                        pause ();
                }
                fprintf (stderr, "worker: unknown crash mode %s\n", mode);
                return 102;
            }
        } else if (strcmp (a, "exit") == 0)
            exit (atoi (arg));
        else if (strcmp (a, "sleep") == 0) {
            double s = atof (arg);
            struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
            while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
                ;
        } else if (strcmp (a, "waitfor") == 0) {
            while (access (arg, F_OK) != 0)
                usleep (10000);
        } else if (strcmp (a, "hang") == 0) {
            for (;;)
                pause ();
        } else if (strcmp (a, "ignore") == 0)
            signal (signum (arg), SIG_IGN);
        else if (strcmp (a, "trap") == 0) {
            char *sig = strtok (arg, ":"), *code = strtok (NULL, ":");
            trap_code = code ? atoi (code) : 1;
            signal (signum (sig), on_trap);
        } else if (strcmp (a, "print") == 0 || strcmp (a, "eprint") == 0) {
            char *n = strtok (arg, ":"), *t = strtok (NULL, "");
            FILE *f = a[0] == 'e' ? stderr : stdout;
            for (int k = 0; k < atoi (n); k++)
                fprintf (f, "%s rank=%s i=%d\n", t ? t : "line", rank_s, k);
            fflush (f);
        } else if (strcmp (a, "partial") == 0) {
            fputs (arg, stdout);
            fflush (stdout);
        } else if (strcmp (a, "spawn") == 0) {
            pid_t pid = fork ();
            if (pid == 0) {
                for (;;)
                    pause ();
            }
            path_for (path, sizeof (path), arg, "child");
            snprintf (text, sizeof (text), "%d\n", (int)pid);
            write_text (path, text);
        } else if (strcmp (a, "timer") == 0) {
            char *scope = strtok (arg, ":"), *secs = strtok (NULL, ":"),
                 *sig = strtok (NULL, ":");
            timer_request (scope, now () + atof (secs), sig ? signum (sig) : SIGKILL);
        } else if (strcmp (a, "release") == 0)
            timer_request (arg, -1, 0);
#ifdef WITH_LIBELASTIC
        else if (strcmp (a, "error") == 0) {
            if (elastic_record_error ("%s", arg) != ELASTIC_OK)
                return 103;
        } else if (strcmp (a, "progress") == 0) {
            char *n = strtok (arg, ":"), *ms = strtok (NULL, ":");
            for (int k = 1; k <= atoi (n); k++) {
                elastic_progress (k);
                usleep ((useconds_t)atoi (ms ? ms : "0") * 1000);
            }
        } else if (strcmp (a, "snapshot") == 0)
            elastic_progress_snapshot (atoll (arg));
#endif
        else {
            fprintf (stderr, "worker: unknown action %s\n", argv[i]);
            return 102;
        }
        free (a);
    }
    return 0;
}
