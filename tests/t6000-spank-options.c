/* t6000-spank-options.c - the value of `--elastic[=OPTIONS]` (slurm/options.c):
 * what becomes ELASTIC_* variables, what becomes elastic-exec flags, and
 * one clear line for every bad value, with the set left unchanged. */
#include <stdio.h>
#include <string.h>

#include "lib/tap.h"
#include "options.h"

/* All library settings as "NAME=VALUE " in one string. */
static const char *env_of (struct spank_opts *o)
{
    static char buf[1024];
    const char *name, *value;
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; spank_opts_env (o, i, &name, &value) == 0; i++)
        len += (size_t)snprintf (buf + len, sizeof (buf) - len, "%s=%s ", name, value);
    return buf;
}

static const char *args_of (struct spank_opts *o)
{
    static char buf[1024];
    if (spank_opts_exec_args (o, buf, sizeof (buf)) < 0)
        return "(too long)";
    return buf;
}

/* Parse a bad value: -1, an error naming `needle`, and nothing changed. */
static void bad (const char *arg, const char *needle)
{
    struct spank_opts *o = spank_opts_create ();
    elastic_error_t err = {{0}};
    int rc;

    spank_opts_parse (o, "snapshot-period=7", &err);
    rc = spank_opts_parse (o, arg, &err);
    ok (rc == -1 && strstr (err.text, needle) != NULL, "'%s' refused: %s", arg, err.text);
    if (!strstr (err.text, needle))
        diag ("  expected the message to contain '%s'", needle);
    is_str (env_of (o), "ELASTIC_SNAPSHOT_PERIOD=7 ", "'%s': the set is unchanged", arg);
    ok (strchr (err.text, '\n') == NULL, "'%s': the message is one line", arg);
    spank_opts_destroy (o);
}

int main (void)
{
    struct spank_opts *o;
    elastic_error_t err = {{0}};
    char small[8];

    /* the bare flag: wrap, nothing else */
    o = spank_opts_create ();
    ok (o != NULL, "create");
    ok (spank_opts_parse (o, NULL, &err) == 0, "bare --elastic is accepted");
    ok (spank_opts_wrap (o) == 1, "bare --elastic wraps the tasks");
    is_str (env_of (o), "", "bare --elastic sets no library setting");
    is_str (args_of (o), "", "bare --elastic gives elastic-exec no flag");
    ok (spank_opts_snapshot_dir (o) == NULL, "no snapshot-dir");
    ok (spank_opts_parse (o, "", &err) == 0, "an empty value is the bare flag");
    spank_opts_destroy (o);

    /* a full value */
    o = spank_opts_create ();
    ok (spank_opts_parse (
            o,
            "snapshot-period=10,persist_period=100,spare-ranks=1,MIN-WORLD-SIZE=2,"
            "snapshot-dir=/scratch/snap,max-restarts=3,hang-timeout=2m,"
            "shutdown-timeout=500ms,exit-barrier-timeout=5,event-log=/tmp/ev.json,"
            "log-dir=/tmp/logs,verbose",
            &err) == 0,
        "every key is accepted (%s)",
        err.text);
    is_str (env_of (o),
            "ELASTIC_SNAPSHOT_PERIOD=10 ELASTIC_PERSIST_PERIOD=100 ELASTIC_SPARE_RANKS=1 "
            "ELASTIC_MIN_WORLD_SIZE=2 ",
            "library keys become ELASTIC_* variables ('_' and upper case accepted)");
    is_str (spank_opts_snapshot_dir (o), "/scratch/snap", "snapshot-dir");
    is_str (args_of (o),
            "--max-restarts=3\n--hang-timeout=2m\n--shutdown-timeout=500ms\n"
            "--exit-barrier-timeout=5\n--event-log=/tmp/ev.json\n--log-dir=/tmp/"
            "logs\n--verbose",
            "elastic-exec keys become its flags, one per line");
    ok (spank_opts_exec_args (o, small, sizeof (small)) == -1,
        "a too small buffer is an error");

    /* later values win; the numbers are canonical */
    ok (spank_opts_parse (o, "snapshot-period=+020,verbose=no,wrap=false", &err) == 0,
        "a second --elastic adds to the first");
    ok (strstr (env_of (o), "ELASTIC_SNAPSHOT_PERIOD=20 ") != NULL,
        "the later value wins, as a plain number");
    ok (strstr (args_of (o), "--verbose") == NULL, "verbose=no drops --verbose");
    ok (spank_opts_wrap (o) == 0, "wrap=false: the tasks are not wrapped");
    spank_opts_destroy (o);

    /* bad values: one line naming the key, the value and what is accepted */
    bad ("snapshot-period=0", "snapshot-period: 0 is out of range");
    bad ("snapshot-period=ten", "snapshot-period: 'ten' is not an integer");
    bad ("snapshot-period", "snapshot-period needs a value");
    bad ("spare-ranks=-1", "spare-ranks: -1 is out of range (expected 0..");
    bad ("max-restarts=2000000",
         "max-restarts: 2000000 is out of range (expected 0..1000000)");
    bad ("hang-timeout=soon", "hang-timeout: 'soon' is not a duration");
    bad ("hang-timeout=-5", "hang-timeout: '-5' is out of range");
    bad ("snapshot-dir=", "snapshot-dir needs a value");
    bad ("event-log=/tmp/a\tb", "contains a control character");
    bad ("wrap=maybe", "wrap: 'maybe' is not a boolean");
    bad ("frobnicate=1", "unknown option 'frobnicate' (accepted: snapshot-period,");
    bad ("snapshot-period=5,,spare-ranks=1", "empty item");
    bad ("snapshot-period=5,", "empty item at the end");
    bad ("spare-ranks=1,bogus", "unknown option 'bogus'");
    /* the first items were good, the last bad: nothing of it is kept */
    o = spank_opts_create ();
    ok (spank_opts_parse (o, "spare-ranks=3,persist-period=x", &err) == -1 &&
            strcmp (env_of (o), "") == 0,
        "a value with one bad item changes nothing");
    spank_opts_destroy (o);
    spank_opts_destroy (NULL);
    return done_testing ();
}
