/* options.c - elastic-mpirun's command line */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/parse.h"
#include "options.h"

enum { A_NONE = 0, A_REQ = 1 };

struct eopt {
    const char *name;
    char short_name;
    int arg;
    const char *help;
};

static const struct eopt eopts[] = {
    {"max-relaunches",
     0,
     A_REQ,
     "relaunches after failures before giving up (default: 3)"},
    {"spares",
     0,
     A_REQ,
     "hold the last N hosts back to replace failed ones (default: 0)"},
    {"np-min", 0, A_REQ, "smallest world size to relaunch with (default: -n)"},
    {"np-max", 0, A_REQ, "largest world size (default: -n)"},
    {"no-wrap", 0, A_NONE, "run the program directly, not under elastic-exec"},
    {"exec", 0, A_REQ, "the elastic-exec to wrap each rank in"},
    {"exec-opt", 0, A_REQ, "pass this option to elastic-exec (repeatable)"},
    {"mpirun",
     0,
     A_REQ,
     "Open MPI's mpirun (default: $ELASTIC_MPIRUN, else " ELASTIC_MPIRUN ")"},
    {"ulfm",
     0,
     A_REQ,
     "auto, yes or no: in-place recovery (--with-ft ulfm) or relaunch-only"},
    {"detector",
     0,
     A_REQ,
     "ULFM heartbeat detector: auto, off, or PERIOD[,TIMEOUT] seconds"},
    {"run-dir", 0, A_REQ, "per-job directory (default: .elastic-mpirun/<job> here)"},
    {"resume", 0, A_REQ, "auto, yes or no: start the first launch with ELASTIC_RESUME=1"},
    {"relaunch-delay", 0, A_REQ, "pause before each relaunch (default: 0 s)"},
    {"suspend-timeout",
     0,
     A_REQ,
     "after a preemption signal, wait this long for the ranks to "
     "suspend (default: 120 s)"},
    {"init-timeout",
     0,
     A_REQ,
     "after a rank died, relaunch if live ranks have not finished MPI_Init "
     "within this (default: 60 s; 0: off)"},
    {"pass", 0, A_REQ, "hand this argument to mpirun verbatim (repeatable)"},
    {"dry-run", 0, A_NONE, "print the mpirun command and the hostfile, run nothing"},
    {"verbose", 'v', A_NONE, "print each mpirun command and more detail (twice: debug)"},
    {"quiet", 'q', A_NONE, "warnings and errors only"},
    {"help", 'h', A_NONE, "print this help and exit"},
    {"version", 'V', A_NONE, "print the version and exit"},
};
#define NEOPTS ((int)(sizeof (eopts) / sizeof (eopts[0])))

/* Open MPI 4.1 / 5.0 mpirun options that take values; all others in
 * mpirun_zero are flags. */
static const char *mpirun_two[] = {
    "mca", "gmca", "omca", "gomca", "prtemca", "pmixmca", NULL};
static const char *mpirun_one[] = {"np",
                                   "n",
                                   "c",
                                   "N",
                                   "H",
                                   "host",
                                   "hostfile",
                                   "machinefile",
                                   "default-hostfile",
                                   "x",
                                   "wdir",
                                   "wd",
                                   "path",
                                   "pset",
                                   "personality",
                                   "preload-files",
                                   "output",
                                   "stream-buffering",
                                   "stdin",
                                   "map-by",
                                   "rank-by",
                                   "bind-to",
                                   "rankfile",
                                   "rf",
                                   "display",
                                   "timeout",
                                   "spawn-timeout",
                                   "prefix",
                                   "tmpdir",
                                   "forward-signals",
                                   "launch-agent",
                                   "max-vm-size",
                                   "report-pid",
                                   "report-uri",
                                   "dvm",
                                   "keepalive",
                                   "output-directory",
                                   "output-filename",
                                   "with-ft",
                                   "tune",
                                   "am",
                                   "amca",
                                   "npernode",
                                   "npersocket",
                                   "ppr",
                                   "cpus-per-proc",
                                   "cpus-per-rank",
                                   "cpu-set",
                                   "cpu-list",
                                   "max-restarts",
                                   "app",
                                   "xterm",
                                   "test-suicide",
                                   "ompi-server",
                                   "runtime-options",
                                   "hnp",
                                   "server-wait-time",
                                   "report-events",
                                   "s",
                                   "ompi-server-wait-time",
                                   "rank-file",
                                   "map-by-policy",
                                   "sigterm-timeout",
                                   "fwd-environment",
                                   "unset-env",
                                   "prepend-env",
                                   "append-env",
                                   "pmix-prefix",
                                   "debug-daemons-file-path",
                                   NULL};
static const char *mpirun_zero[] = {"oversubscribe",
                                    "nooversubscribe",
                                    "bind-to-core",
                                    "bind-to-socket",
                                    "bynode",
                                    "bycore",
                                    "byslot",
                                    "pernode",
                                    "nolocal",
                                    "use-hwthread-cpus",
                                    "report-bindings",
                                    "display-map",
                                    "display-devel-map",
                                    "display-allocation",
                                    "display-topo",
                                    "do-not-launch",
                                    "tag-output",
                                    "timestamp-output",
                                    "merge-stderr-to-stdout",
                                    "xml",
                                    "allow-run-as-root",
                                    "noprefix",
                                    "get-stack-traces",
                                    "report-state-on-timeout",
                                    "show-progress",
                                    "stop-on-exec",
                                    "stop-in-init",
                                    "stop-in-app",
                                    "set-cwd-to-session-dir",
                                    "preload-binary",
                                    "enable-recovery",
                                    "disable-recovery",
                                    "continuous",
                                    "set-sid",
                                    "daemonize",
                                    "report-child-jobs-separately",
                                    "leave-session-attached",
                                    "debug-daemons",
                                    "debug-daemons-file",
                                    "debug-devel",
                                    "d",
                                    "debug",
                                    "fwd-mpirun-port",
                                    "singleton",
                                    "enable-instant-on-support",
                                    "enable-debugger",
                                    "display-diffable-map",
                                    "do-not-resolve",
                                    "bind-to-none",
                                    "use-regexp",
                                    "no-ft",
                                    "mca-help",
                                    "index-argv-by-rank",
                                    "quiet-init",
                                    NULL};

int mpirun_option_arity (const char *name)
{
    for (int i = 0; mpirun_two[i]; i++)
        if (strcmp (name, mpirun_two[i]) == 0)
            return 2;
    for (int i = 0; mpirun_one[i]; i++)
        if (strcmp (name, mpirun_one[i]) == 0)
            return 1;
    for (int i = 0; mpirun_zero[i]; i++)
        if (strcmp (name, mpirun_zero[i]) == 0)
            return 0;
    return -1;
}

void options_usage (FILE *f)
{
    fprintf (f,
             "Usage: elastic-mpirun [elastic options] [mpirun options] [--] program "
             "[args...]\n"
             "Run an MPI job under Open MPI's mpirun (--with-ft ulfm when available), "
             "relaunch\n"
             "it from the newest L3 snapshot when it fails, and suspend it on "
             "SIGTERM/SIGUSR1.\n"
             "Every mpirun option not listed here is passed through untouched.\n\n");
    for (int i = 0; i < NEOPTS; i++) {
        char flag[64];
        int n = 0;
        if (eopts[i].short_name)
            n = snprintf (flag, sizeof (flag), "-%c, ", eopts[i].short_name);
        snprintf (flag + n,
                  sizeof (flag) - (size_t)n,
                  "--%s%s",
                  eopts[i].name,
                  eopts[i].arg ? " V" : "");
        fprintf (f, "  %-24s %s\n", flag, eopts[i].help);
    }
    fprintf (
        f,
        "\nExit status: 0 completed; 75 suspended (rerun the same command to resume);\n"
        "1 failed (relaunches exhausted or no usable hosts); 2 bad usage.\n"
        "See elastic-mpirun(1).\n");
}

static int append (char ***v, int *n, const char *s)
{
    char **p = realloc (*v, (size_t)(*n + 2) * sizeof (char *));

    if (!p)
        return -1;
    *v = p;
    if (!(p[*n] = strdup (s)))
        return -1;
    (*n)++;
    p[*n] = NULL;
    return 0;
}

static void free_vec (char **v, int n)
{
    for (int i = 0; i < n; i++)
        free (v[i]);
    free (v);
}

void options_free (struct options *o)
{
    if (!o)
        return;
    free_vec (o->exec_opts, o->nexec_opts);
    free_vec (o->mca_keys, o->nmca_keys);
    free_vec (o->pass, o->npass);
    free (o->hosts);
    o->exec_opts = o->mca_keys = o->pass = NULL;
    o->hosts = NULL;
}

int options_has_mca (const struct options *o, const char *key)
{
    for (int i = 0; i < o->nmca_keys; i++) {
        const char *k = o->mca_keys[i];
        /* "btl" and "mpi_ft_detector"; OMPI_MCA_ style prefixes are not
         * command-line keys */
        if (strcmp (k, key) == 0)
            return 1;
    }
    return 0;
}

/* Edit distance, for "did you mean". */
static int distance (const char *a, const char *b)
{
    int la = (int)strlen (a), lb = (int)strlen (b), d[64][64];

    if (la >= 63 || lb >= 63)
        return 99;
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c)
                c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c)
                c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static const struct eopt *find_eopt (const char *name, size_t len)
{
    for (int i = 0; i < NEOPTS; i++)
        if (strlen (eopts[i].name) == len && strncmp (eopts[i].name, name, len) == 0)
            return &eopts[i];
    return NULL;
}

static int tristate (const char *what, const char *v, int *out, elastic_error_t *err)
{
    if (strcasecmp (v, "auto") == 0)
        *out = TRI_AUTO;
    else if (strcasecmp (v, "yes") == 0 || strcmp (v, "1") == 0 ||
             strcasecmp (v, "true") == 0)
        *out = TRI_YES;
    else if (strcasecmp (v, "no") == 0 || strcmp (v, "0") == 0 ||
             strcasecmp (v, "false") == 0)
        *out = TRI_NO;
    else
        return errprintf (err, "%s: '%s' is not auto, yes or no", what, v);
    return 0;
}

static int parse_detector (struct options *o, const char *v, elastic_error_t *err)
{
    char buf[128], *comma;

    o->detector = v;
    if (strcasecmp (v, "auto") == 0) {
        o->det_mode = 0;
        return 0;
    }
    if (strcasecmp (v, "off") == 0 || strcasecmp (v, "no") == 0) {
        o->det_mode = 1;
        return 0;
    }
    snprintf (buf, sizeof (buf), "%s", v);
    if ((comma = strchr (buf, ',')))
        *comma++ = '\0';
    if (parse_seconds ("--detector period", buf, 0.01, 3600, &o->det_period, err) < 0)
        return -1;
    if (comma) {
        if (parse_seconds (
                "--detector timeout", comma, 0.01, 36000, &o->det_timeout, err) < 0)
            return -1;
        if (o->det_timeout <= 3 * o->det_period)
            return errprintf (
                err,
                "--detector: timeout %g s must exceed 3 x period (%g s), as Open "
                "MPI requires",
                o->det_timeout,
                3 * o->det_period);
    } else
        o->det_timeout = 3.5 * o->det_period;
    o->det_mode = 2;
    return 0;
}

static int
apply_eopt (struct options *o, const struct eopt *e, const char *v, elastic_error_t *err)
{
    long n;
    char what[64];

    snprintf (what, sizeof (what), "--%s", e->name);
    if (strcmp (e->name, "max-relaunches") == 0) {
        if (parse_long (what, v, 0, 10000, &n, err) < 0)
            return -1;
        o->max_relaunches = (int)n;
    } else if (strcmp (e->name, "spares") == 0) {
        if (parse_long (what, v, 0, 100000, &n, err) < 0)
            return -1;
        o->spares = (int)n;
    } else if (strcmp (e->name, "np-min") == 0) {
        if (parse_long (what, v, 1, 10000000, &n, err) < 0)
            return -1;
        o->np_min = (int)n;
    } else if (strcmp (e->name, "np-max") == 0) {
        if (parse_long (what, v, 1, 10000000, &n, err) < 0)
            return -1;
        o->np_max = (int)n;
    } else if (strcmp (e->name, "no-wrap") == 0)
        o->wrap = 0;
    else if (strcmp (e->name, "exec") == 0)
        o->exec = v;
    else if (strcmp (e->name, "exec-opt") == 0) {
        if (append (&o->exec_opts, &o->nexec_opts, v) < 0)
            goto nomem;
    } else if (strcmp (e->name, "mpirun") == 0)
        o->mpirun = v;
    else if (strcmp (e->name, "ulfm") == 0)
        return tristate (what, v, &o->ulfm, err);
    else if (strcmp (e->name, "detector") == 0)
        return parse_detector (o, v, err);
    else if (strcmp (e->name, "run-dir") == 0) {
        if (!*v)
            return errprintf (err, "--run-dir: empty path");
        o->run_dir = v;
    } else if (strcmp (e->name, "resume") == 0)
        return tristate (what, v, &o->resume, err);
    else if (strcmp (e->name, "relaunch-delay") == 0)
        return parse_seconds (what, v, 0, 86400, &o->relaunch_delay, err);
    else if (strcmp (e->name, "suspend-timeout") == 0)
        return parse_seconds (what, v, 0, 86400, &o->suspend_timeout, err);
    else if (strcmp (e->name, "init-timeout") == 0)
        return parse_seconds (what, v, 0, 86400, &o->init_timeout, err);
    else if (strcmp (e->name, "pass") == 0) {
        if (append (&o->pass, &o->npass, v) < 0)
            goto nomem;
    } else if (strcmp (e->name, "dry-run") == 0)
        o->dry_run = 1;
    else if (strcmp (e->name, "verbose") == 0)
        o->verbose = o->verbose < 0 ? 1 : o->verbose + 1;
    else if (strcmp (e->name, "quiet") == 0)
        o->verbose = -1;
    return 0;
nomem:
    return errprintf (err, "out of memory");
}

/* An mpirun option elastic-mpirun acts on; values[] are its arguments. */
static int
note_mpirun (struct options *o, const char *name, char **values, elastic_error_t *err)
{
    long n;

    if (!strcmp (name, "np") || !strcmp (name, "n") || !strcmp (name, "c")) {
        if (parse_long ("-n", values[0], 1, 10000000, &n, err) < 0)
            return -1;
        o->np = (int)n;
        return 1; /* consumed: elastic-mpirun passes its own -n */
    }
    if (!strcmp (name, "N") || !strcmp (name, "npernode")) {
        if (parse_long ("-N", values[0], 1, 100000, &n, err) < 0)
            return -1;
        o->npernode = (int)n;
        return 0;
    }
    if (!strcmp (name, "hostfile") || !strcmp (name, "machinefile") ||
        !strcmp (name, "default-hostfile")) {
        if (o->hostfile)
            return errprintf (err,
                              "--%s: only one hostfile is supported (already have %s)",
                              name,
                              o->hostfile);
        o->hostfile = values[0];
        return 1;
    }
    if (!strcmp (name, "host") || !strcmp (name, "H")) {
        size_t len = (o->hosts ? strlen (o->hosts) + 1 : 0) + strlen (values[0]) + 1;
        char *h = malloc (len);
        if (!h)
            goto nomem;
        snprintf (
            h, len, "%s%s%s", o->hosts ? o->hosts : "", o->hosts ? "," : "", values[0]);
        free (o->hosts);
        o->hosts = h;
        return 1;
    }
    if (!strcmp (name, "oversubscribe"))
        o->oversubscribe = 1;
    if (!strcmp (name, "map-by") && strcasestr (values[0], "oversubscribe") &&
        !strcasestr (values[0], "nooversubscribe"))
        o->oversubscribe = 1;
    if (!strcmp (name, "bind-to") || !strcmp (name, "bind-to-core") ||
        !strcmp (name, "bind-to-socket") || !strcmp (name, "bind-to-none"))
        o->bind_given = 1;
    if (!strcmp (name, "with-ft"))
        o->with_ft = values[0];
    if (!strcmp (name, "mca") || !strcmp (name, "gmca") || !strcmp (name, "omca") ||
        !strcmp (name, "gomca")) {
        if (append (&o->mca_keys, &o->nmca_keys, values[0]) < 0)
            goto nomem;
    }
    return 0;
nomem:
    return errprintf (err, "out of memory");
}

/* The mpirun option argv[*ip] (name: after its dashes, len: up to '='), with
 * its values: noted where elastic-mpirun acts on it and passed on unless
 * consumed.  Advances *ip past its values.  Returns 0, or -1 with err. */
static int parse_mpirun_option (struct options *o,
                                int argc,
                                char **argv,
                                int *ip,
                                const char *name,
                                size_t len,
                                int dashes,
                                elastic_error_t *err)
{
    const char *a = argv[*ip];
    char key[64], *vals[2] = {NULL, NULL};
    int arity, start = *ip, i = *ip, r;
    if (len >= sizeof (key))
        return errprintf (err, "unknown option '%s' (see elastic-mpirun --help)", a);
    memcpy (key, name, len);
    key[len] = '\0';
    if ((arity = mpirun_option_arity (key)) < 0) {
        const char *best = NULL;
        int bd = 3;
        for (int k = 0; k < NEOPTS; k++) {
            int d = distance (key, eopts[k].name);
            if (d < bd) {
                bd = d;
                best = eopts[k].name;
            }
        }
        if (best)
            return errprintf (err,
                              "unknown option '%s' (did you mean --%s? see "
                              "elastic-mpirun --help)",
                              a,
                              best);
        else
            return errprintf (err,
                              "unknown option '%s': not an elastic-mpirun option nor a "
                              "known mpirun "
                              "option (hand it to mpirun with --pass '%s')",
                              a,
                              a);
    }
    if (name[len] == '=') {
        if (arity != 1)
            return errprintf (err,
                              "%.*s takes %d values, not '=': '%s'",
                              (int)len + dashes,
                              a,
                              arity,
                              a);
        vals[0] = (char *)name + len + 1;
    } else {
        if (i + arity >= argc)
            return errprintf (err,
                              "mpirun option '%s' needs %d value%s",
                              a,
                              arity,
                              arity == 1 ? "" : "s");
        for (int k = 0; k < arity; k++)
            vals[k] = argv[++i];
    }
    if ((r = note_mpirun (o, key, vals, err)) < 0)
        return -1;
    if (r == 0)
        for (int k = start; k <= i; k++)
            if (append (&o->pass, &o->npass, argv[k]) < 0)
                return errprintf (err, "out of memory");
    *ip = i;
    return 0;
}

/* The world-size bounds against each other.  Returns 0, or -1 with err. */
static int check_bounds (struct options *o, elastic_error_t *err)
{
    if (o->np_min && o->np_max && o->np_min > o->np_max)
        return errprintf (
            err, "--np-min %d is larger than --np-max %d", o->np_min, o->np_max);
    if (o->np && o->np_min > o->np)
        return errprintf (err,
                          "--np-min %d is larger than -n %d (the world size asked for)",
                          o->np_min,
                          o->np);
    if (o->np && o->np_max && o->np_max < o->np)
        return errprintf (err, "--np-max %d is smaller than -n %d", o->np_max, o->np);
    if (o->np && !o->np_min)
        o->np_min = o->np;
    if (o->npernode && o->np_min && !o->np) {
        /* -N sizes the job by hosts; the floor applies to the result */
    }
    return 0;
}

int options_parse (struct options *o, int argc, char **argv, elastic_error_t *err)
{
    int i;

    memset (o, 0, sizeof (*o));
    o->max_relaunches = 3;
    o->spares = -1;
    o->wrap = 1;
    o->ulfm = TRI_AUTO;
    o->resume = TRI_AUTO;
    o->detector = "auto";
    o->suspend_timeout = 120;
    o->init_timeout = 60;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const struct eopt *e = NULL;
        const char *value = NULL, *name;
        size_t len;
        int dashes;

        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        dashes = a[1] == '-' ? 2 : 1;
        name = a + dashes;
        len = strcspn (name, "=");
        /* elastic options: --long[=v], and the short -v -q -h -V */
        if (dashes == 2)
            e = find_eopt (name, len);
        else if (len == 1) {
            for (int k = 0; k < NEOPTS; k++)
                if (eopts[k].short_name == name[0])
                    e = &eopts[k];
        }
        if (e) {
            if (name[len] == '=') {
                if (!e->arg)
                    return errprintf (err, "--%s takes no value", e->name);
                value = name + len + 1;
            } else if (e->arg) {
                if (i + 1 >= argc)
                    return errprintf (err, "--%s needs a value", e->name);
                value = argv[++i];
            }
            if (strcmp (e->name, "help") == 0) {
                options_usage (stdout);
                return 1;
            }
            if (strcmp (e->name, "version") == 0) {
                printf ("elastic-mpirun (elastic) %s\n", PACKAGE_VERSION);
                return 1;
            }
            if (apply_eopt (o, e, value, err) < 0)
                return -1;
            continue;
        }
        /* mpirun options: -np 4, --np 4, --map-by=x, -mca k v */
        if (parse_mpirun_option (o, argc, argv, &i, name, len, dashes, err) < 0)
            return -1;
    }
    if (i >= argc)
        return errprintf (
            err, "no program to run (usage: elastic-mpirun [options] program [args...])");
    o->app = argv + i;
    o->napp = argc - i;

    return check_bounds (o, err);
}
