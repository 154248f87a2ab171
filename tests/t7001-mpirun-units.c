/* t7001-mpirun-units.c - elastic-mpirun's pure parts: host lists (hostfiles
 * with slots=, --host lists, Slurm lists and states), failed-host exclusion,
 * spare selection, world-size planning within --np-min/--np-max, mpirun's
 * exit report (Open MPI 5 and 4.1 texts), the event log, the MPI_Init
 * deadline's judgement (initwatch.h), the command line.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tap.h"
#include "mpirun/events.h"
#include "mpirun/hostlist.h"
#include "mpirun/initwatch.h"
#include "mpirun/options.h"
#include "mpirun/probe.h"
#include "mpirun/report.h"

static elastic_error_t err;

static const char *state_of (struct hostlist *hl, const char *name)
{
    for (size_t i = 0; i < hostlist_count (hl); i++) {
        const struct host *h = hostlist_get (hl, i);
        if (strcmp (h->name, name) == 0)
            return hostlist_state_name (h->state);
    }
    return "absent";
}

static char *written (struct hostlist *hl)
{
    static char buf[4096];
    FILE *f = fmemopen (buf, sizeof (buf), "w");
    hostlist_write (hl, f);
    fclose (f);
    return buf;
}

static void test_hostfile (void)
{
    struct hostlist *hl = hostlist_create ();
    const char *text = "# cluster\n"
                       "n1 slots=4\n"
                       "n2   slots=4 max_slots=8   # comment\n"
                       "\n"
                       "n3 max_slots=2\n"
                       "n4\n"
                       "n5 slots=4 spare\n"
                       "n1 slots=2\n";
    int n = hostlist_parse_hostfile (hl, text, "hf", &err);
    int slots;

    is_int (n, 6, "hostfile: 6 host lines parsed");
    is_int ((int)hostlist_count (hl), 5, "a repeated host is merged");
    is_int (hostlist_get (hl, 0)->slots, 6, "n1: repeated lines add their slots (4 + 2)");
    is_int (hostlist_get (hl, 2)->slots, 2, "n3: max_slots alone bounds the slots");
    is_int (hostlist_get (hl, 3)->slots, 0, "n4: no slots= means unknown");
    is_str (state_of (hl, "n5"), "spare", "'spare' keyword holds n5 back");
    is_int (hostlist_count_state (hl, HOST_ACTIVE, &slots), 4, "4 active hosts");
    is_int (slots, 12, "active known slots: 6 + 4 + 2");
    is_str (written (hl),
            "n1 slots=6\nn2 slots=4\nn3 slots=2\nn4\n",
            "written hostfile: active hosts only");
    hostlist_destroy (hl);

    hl = hostlist_create ();
    ok (hostlist_parse_hostfile (hl, "n1 slots=zero\n", "hf", &err) < 0 &&
            strstr (err.text, "hf:1") && strstr (err.text, "'zero'"),
        "bad slots value: error names file:line and value (%s)",
        err.text);
    ok (hostlist_parse_hostfile (hl, "n1\nn2 gpus=2\n", "hf", &err) < 0 &&
            strstr (err.text, "hf:2") && strstr (err.text, "gpus"),
        "unknown key: error names it (%s)",
        err.text);
    ok (hostlist_parse_hostfile (hl, "n1\nn2 fast\n", "hf", &err) < 0 &&
            strstr (err.text, "'fast'"),
        "unknown word: error names it (%s)",
        err.text);
    ok (hostlist_parse_hostfile (hl, "bad/name slots=2\n", "hf", &err) < 0 &&
            strstr (err.text, "bad/name"),
        "bad host name rejected (%s)",
        err.text);
    hostlist_destroy (hl);
}

static void test_hosts_option (void)
{
    struct hostlist *hl = hostlist_create ();
    int slots;

    is_int (hostlist_parse_hosts (hl, "a,b:4,c:2", &err), 3, "--host a,b:4,c:2: 3 hosts");
    hostlist_count_state (hl, HOST_ACTIVE, &slots);
    is_int (slots, 7, "--host: a bare name is 1 slot (Open MPI's rule)");
    ok (hostlist_parse_hosts (hl, "d:x", &err) < 0 && strstr (err.text, "'x'"),
        "--host d:x rejected (%s)",
        err.text);
    hostlist_destroy (hl);
}

static void test_slurm (void)
{
    int c[16];
    struct hostlist *hl;

    is_int (
        slurm_expand_counts ("2(x3),1", c, 16, &err), 4, "2(x3),1 expands to 4 counts");
    ok (c[0] == 2 && c[1] == 2 && c[2] == 2 && c[3] == 1, "counts are 2 2 2 1");
    is_int (slurm_expand_counts ("8", c, 16, &err), 1, "a single count");
    ok (slurm_expand_counts ("2(y3)", c, 16, &err) < 0 && strstr (err.text, "2(y3)"),
        "malformed count list rejected (%s)",
        err.text);
    ok (slurm_expand_counts ("1(x20)", c, 16, &err) < 0,
        "count list longer than the table rejected");

    hl = hostlist_create ();
    is_int (hostlist_add_slurm (hl, "n1\nn2\nn3\nn4\n", "2(x3),1", &err),
            4,
            "scontrol show hostnames: 4 hosts");
    is_int (hostlist_get (hl, 3)->slots, 1, "n4 gets the last count");
    is_int (
        hostlist_mark_slurm_down (hl, "n1 idle\nn2 down*\nn3 drain\nn4 alloc\nn9 down\n"),
        2,
        "sinfo: n2 (down*) and n3 (drain) are down; n9 is not ours");
    is_str (state_of (hl, "n2"), "down", "n2 is down");
    is_str (state_of (hl, "n3"), "down", "n3 is down");
    is_str (state_of (hl, "n4"), "active", "n4 (alloc) stays active");
    is_str (state_of (hl, "n1"), "active", "n1 (idle) stays active");
    hostlist_destroy (hl);

    /* one count for hosts that repeat (found by fuzz_slurm_hostlist: the
     * count was patched into entries before the table) */
    hl = hostlist_create ();
    is_int (hostlist_add_slurm (hl, "n1\nn2\nn1\nn1\n", "4", &err),
            4,
            "hostnames n1 n2 n1 n1 with one count: 4 names");
    is_int ((int)hostlist_count (hl), 2, "two hosts");
    is_int (hostlist_get (hl, 0)->slots, 12, "n1 repeated: 3 x 4 slots");
    is_int (hostlist_get (hl, 1)->slots, 4, "n2: 4 slots");
    hostlist_destroy (hl);

    hl = hostlist_create ();
    is_int (hostlist_add_slurm (hl, "a b c", "4", &err), 3, "one count for every node");
    is_int (hostlist_get (hl, 2)->slots, 4, "c gets 4 slots");
    ok (hostlist_add_slurm (hl, "d e", "1,2,3", &err) < 0 &&
            strstr (err.text, "3 entries for 2"),
        "count list of the wrong length rejected (%s)",
        err.text);
    hostlist_destroy (hl);
}

static void test_exclude_and_spares (void)
{
    struct hostlist *hl = hostlist_create ();
    char log[512];
    int np;

    hostlist_parse_hostfile (
        hl,
        "n1 slots=2\nn2 slots=2\nn3 slots=2\nn4 slots=2\nn5 slots=2 spare\n",
        "hf",
        &err);
    ok (hostlist_set_spares (hl, 1, &err) == 0, "--spares 1");
    is_str (state_of (hl, "n4"),
            "spare",
            "--spares 1 holds back the last non-spare host (n4)");
    ok (hostlist_set_spares (hl, 3, &err) < 0 && strstr (err.text, "--spares"),
        "--spares that leaves no host rejected (%s)",
        err.text);

    ok (hostlist_plan_np (hl, 6, 6, 0, 0, &np, &err) == 0 && np == 6,
        "np 6 on 3 x 2 slots");
    ok (hostlist_plan_np (hl, 8, 4, 0, 0, &np, &err) == 0 && np == 6,
        "np 8 asked, 6 slots, np-min 4: 6");
    ok (hostlist_plan_np (hl, 8, 8, 0, 1, &np, &err) == 0 && np == 8,
        "--oversubscribe: np 8 on 6 slots");
    ok (hostlist_plan_np (hl, 0, 0, 4, 0, &np, &err) == 0 && np == 4,
        "no -n: np-max 4 bounds the slots");
    ok (hostlist_plan_np (hl, 0, 0, 0, 0, &np, &err) == 0 && np == 6,
        "no -n: all active slots");

    is_int (hostlist_fail (
                hl, "n2.cluster.local", "attempt 1: rank 3 on n2 killed by signal 9"),
            1,
            "a failed host reported by its FQDN is matched and excluded");
    is_int (hostlist_fail (hl, "n2", "again"), 0, "excluding it again is a no-op");
    is_int (hostlist_fail (hl, "n99", "x"), 0, "an unknown host is ignored");
    ok (strstr (hostlist_get (hl, 1)->why, "signal 9") != NULL, "the reason is kept");
    is_int (hostlist_replace_failed (hl, log, sizeof (log)), 1, "one spare promoted");
    is_str (log, "spare n4 replaces n2", "the first spare replaces the failed host");
    is_str (state_of (hl, "n4"), "active", "n4 active now");
    is_str (
        written (hl), "n1 slots=2\nn3 slots=2\nn4 slots=2\n", "next hostfile: n1 n3 n4");
    ok (hostlist_plan_np (hl, 6, 6, 0, 0, &np, &err) == 0 && np == 6,
        "world size back to 6");
    is_int (hostlist_replace_failed (hl, log, sizeof (log)),
            0,
            "a replaced host is not replaced twice");

    hostlist_fail (hl, "n1", "attempt 2");
    is_int (hostlist_replace_failed (hl, log, sizeof (log)),
            1,
            "second failure: the hostfile's spare n5 is used");
    is_str (state_of (hl, "n5"), "active", "n5 active now");
    hostlist_fail (hl, "n3", "attempt 3");
    is_int (hostlist_replace_failed (hl, log, sizeof (log)), 0, "no spare left");
    ok (hostlist_plan_np (hl, 6, 4, 0, 0, &np, &err) == 0 && np == 4,
        "np shrinks to the 4 slots left (np-min 4)");
    ok (hostlist_plan_np (hl, 6, 6, 0, 0, &np, &err) < 0 &&
            strstr (err.text, "--np-min 6") && strstr (err.text, "4 slots"),
        "np-min 6 cannot be met: clear error (%s)",
        err.text);
    ok (hostlist_plan_np (hl, 6, 2, 3, 0, &np, &err) == 0 && np == 3,
        "np-max 3 bounds it");
    hostlist_fail (hl, "n4", "x");
    hostlist_fail (hl, "n5", "x");
    ok (hostlist_plan_np (hl, 6, 1, 0, 0, &np, &err) < 0 &&
            strstr (err.text, "no usable host"),
        "every host excluded: clear error (%s)",
        err.text);
    hostlist_destroy (hl);

    /* a Slurm-down host is replaced by a spare like a failed one */
    hl = hostlist_create ();
    hostlist_add_slurm (hl, "a\nb\nc\n", "2(x3)", &err);
    hostlist_set_spares (hl, 1, &err);
    hostlist_mark_slurm_down (hl, "b down\n");
    is_int (hostlist_replace_failed (hl, log, sizeof (log)),
            1,
            "a host Slurm marks down is replaced by a spare");
    is_str (written (hl), "a slots=2\nc slots=2\n", "hostfile: a c");
    hostlist_destroy (hl);

    /* unknown slots: every host holds an equal share of -n */
    hl = hostlist_create ();
    hostlist_parse_hostfile (hl, "u1\nu2\nu3\nu4\n", "hf", &err);
    ok (hostlist_plan_np (hl, 8, 4, 0, 0, &np, &err) == 0 && np == 8,
        "unknown slots: -n 8 as asked");
    hostlist_fail (hl, "u2", "x");
    ok (hostlist_plan_np (hl, 8, 4, 0, 0, &np, &err) == 0 && np == 6,
        "unknown slots, one of 4 hosts lost: 3/4 of 8 = 6");
    hostlist_destroy (hl);
}

static void test_match (void)
{
    ok (hostlist_match ("n1", "N1"), "host names match ignoring case");
    ok (hostlist_match ("n1", "n1.example.org"), "short name matches its FQDN");
    ok (!hostlist_match ("n1.a.org", "n1.b.org"), "two different FQDNs do not match");
    ok (!hostlist_match ("n1", "n10"), "n1 is not n10");
}

static void feed_text (struct report *r, const char *text)
{
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr (p, '\n');
        char line[512];
        size_t len = eol ? (size_t)(eol - p) : strlen (p);
        snprintf (line, sizeof (line), "%.*s", (int)len, p);
        report_feed_line (r, line);
        p = eol ? eol + 1 : NULL;
    }
    report_finish (r);
}

static void test_report (void)
{
    struct report r;
    char d[256];

    /* Open MPI 5 (PRRTE), as printed here: the line wraps inside the block */
    report_init (&r);
    feed_text (
        &r,
        "rank 1 pid 27684 host vm\n"
        "--------------------------------------------------------------------------\n"
        "prterun noticed that process rank 1 with PID 27684 on node vm exited on\n"
        "signal 9 (Killed).\n"
        "--------------------------------------------------------------------------\n");
    is_int (r.n, 1, "OMPI 5: one failure from a wrapped signal report");
    ok (r.f[0].kind == FAIL_SIGNAL && r.f[0].rank == 1 && !strcmp (r.f[0].host, "vm") &&
            r.f[0].signal == 9,
        "OMPI 5: rank 1 on vm, signal 9");
    ok (failure_host_is_bad (r.f[0].kind), "a signal death marks the host bad");
    failure_describe (&r.f[0], d, sizeof (d));
    ok (strstr (d, "rank 1 on vm killed by signal 9") != NULL, "described: %s", d);

    /* Open MPI 5: non-zero exit */
    report_init (&r);
    feed_text (
        &r,
        "--------------------------------------------------------------------------\n"
        "prterun detected that one or more processes exited with non-zero status,\n"
        "thus causing the job to be terminated. The first process to do so was:\n"
        "\n"
        "   Process name: [prterun-vm-27616@1,1]\n"
        "   Exit code:    76\n"
        "--------------------------------------------------------------------------\n");
    ok (r.n == 1 && r.f[0].kind == FAIL_EXIT && r.f[0].rank == 1 && r.f[0].code == 76,
        "OMPI 5: exit code 76 of rank 1");
    ok (!failure_host_is_bad (FAIL_EXIT), "an exit code does not mark the host bad");

    /* Open MPI 4.1 (ORTE): one line, and its process-name format */
    report_init (&r);
    feed_text (
        &r,
        "--------------------------------------------------------------------------\n"
        "mpirun.openmpi noticed that process rank 2 with PID 0 on node n7 exited on "
        "signal 11 (Segmentation fault).\n"
        "--------------------------------------------------------------------------\n"
        "--------------------------------------------------------------------------\n"
        "mpirun.openmpi detected that one or more processes exited with non-zero status, "
        "thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "  Process name: [[30807,1],3]\n"
        "  Exit code:    76\n"
        "--------------------------------------------------------------------------\n");
    is_int (r.n, 2, "OMPI 4.1: two failures");
    ok (r.f[0].kind == FAIL_SIGNAL && r.f[0].rank == 2 && !strcmp (r.f[0].host, "n7") &&
            r.f[0].signal == 11,
        "OMPI 4.1: rank 2 on n7, signal 11");
    ok (r.f[1].kind == FAIL_EXIT && r.f[1].rank == 3 && r.f[1].code == 76,
        "OMPI 4.1: [[30807,1],3] is rank 3");

    /* a lost daemon (node failure) */
    report_init (&r);
    feed_text (
        &r,
        "--------------------------------------------------------------------------\n"
        "PRTE has lost communication with a remote daemon.\n"
        "\n"
        "  HNP daemon   : [prterun-n1-1234@0,0] on node n1\n"
        "  Remote daemon: [prterun-n1-1234@0,2] on node n2\n"
        "\n"
        "This is usually due to either a failure of the TCP network\n"
        "connection to the node, or possibly an internal failure of\n"
        "the daemon itself. We cannot recover from this failure, and\n"
        "therefore will terminate the job.\n"
        "--------------------------------------------------------------------------\n");
    ok (r.n == 1 && r.f[0].kind == FAIL_NODE_LOST && !strcmp (r.f[0].host, "n2"),
        "lost daemon: host n2 (not the HNP's n1)");

    /* abort, exit without finalize, launch failure, missing executable */
    report_init (&r);
    report_parse_block (
        &r,
        "prterun has exited due to process rank 4 with PID 99 on node n3 calling "
        "\"abort\". This may have caused other processes");
    report_parse_block (
        &r,
        "prterun has exited due to process rank 5 with PID 98 on node n3 exiting "
        "improperly. There are three reasons");
    report_parse_block (
        &r,
        "prterun was unable to start the specified application as it encountered "
        "an error on node n8. More information may be available above.");
    ok (r.n == 3 && r.f[0].kind == FAIL_ABORT && r.f[0].rank == 4 &&
            r.f[1].kind == FAIL_NOSYNC && r.f[1].rank == 5 &&
            r.f[2].kind == FAIL_LAUNCH_HOST && !strcmp (r.f[2].host, "n8"),
        "abort (rank 4), no-finalize (rank 5), launch failure on n8");
    report_init (&r);
    feed_text (
        &r,
        "--------------------------------------------------------------------------\n"
        "mpirun.openmpi was unable to launch the specified application as it could not "
        "access\n"
        "or execute an executable:\n"
        "\n"
        "Executable: ./x41\n"
        "Node: vm\n"
        "--------------------------------------------------------------------------\n");
    ok (r.n == 1 && r.f[0].kind == FAIL_NO_EXEC,
        "a missing executable is recognised (not relaunchable)");
    report_init (&r);
    feed_text (&r, "hello from rank 0\nsome ------ text\nnoticed nothing\n");
    is_int (r.n, 0, "ordinary output is not a failure");
}

static void test_events (void)
{
    struct events ev;
    const char *log =
        "{\"ts\":1.5,\"time\":\"t\",\"event\":\"worker_start\",\"run_id\":\"r\",\"role\":"
        "\"default\",\"host\":\"n1\",\"agent_pid\":10,\"rank\":0,\"local_rank\":0,"
        "\"pid\":11,\"attempt\":0}\n"
        "{\"event\":\"worker_start\",\"host\":\"n2\",\"rank\":1,\"pid\":12}\n"
        "{\"event\":\"worker_start\",\"host\":\"n2\",\"rank\":2,\"pid\":13}\n"
        "not json at all\n"
        "{\"event\":\"reshard_down\",\"step\":40,\"old_size\":4,\"new_size\":3,"
        "\"failed\":[2],\"spares_used\":[],\"attempts\":1,\"handler_tries\":1,\"t_detect_"
        "ms\":48.000,\"t_total_ms\":120.500,\"rank\":0,\"time\":\"x\"}\n"
        "{\"event\":\"reshard_down\",\"step\":40,\"old_size\":4,\"new_size\":3,"
        "\"failed\":[2],\"t_total_ms\":120.500,\"rank\":1}\n"
        "{\"event\":\"reshard_up\",\"step\":80,\"old_size\":3,\"new_size\":4,\"failed\":["
        "],\"t_total_ms\":30.0,\"nested\":{\"a\":[1,{\"b\":\"}\"}]}}\n"
        "{\"event\":\"worker_exit\",\"host\":\"n2\",\"rank\":1,\"exitcode\":-9,"
        "\"signal\":\"SIGKILL\",\"state\":\"FAILED\"}\n"
        "{\"event\":\"worker_exit\",\"host\":\"n1\",\"rank\":0,\"exitcode\":76,\"state\":"
        "\"FAILED\"}\n"
        "{\"event\":\"worker_exit\",\"host\":\"n1\",\"rank\":3,\"exitcode\":-15,"
        "\"signal\":\"SIGTERM\",\"state\":\"STOPPED\"}\n"
        "{\"event\":\"fatal\",\"step\":90,\"failed\":[0,1],\"error\":\"both buddies "
        "lost\"}\n"
        "{\"event\":\"trunc\n";

    events_init (&ev);
    events_parse (&ev, log);
    is_int (ev.nreshard,
            2,
            "two reshard events (a duplicate line from a second writer is merged)");
    is_int (ev.nreshard_down, 1, "one of them a reshard_down");
    ok (ev.reshard_ms > 150.4 && ev.reshard_ms < 150.6,
        "their t_total_ms add up: %.1f",
        ev.reshard_ms);
    is_int (ev.bad_lines, 2, "a non-JSON and a truncated line are skipped, not fatal");
    is_int (ev.nfatal, 1, "one fatal event");
    is_str (ev.fatal, "both buddies lost", "its error text");
    is_str (ev.host_of[1] ? ev.host_of[1] : "", "n2", "worker_start maps rank 1 to n2");
    /* failures: rank 2 (reshard), rank 1 on n2 (SIGKILL), ranks 0 and 1 (fatal) */
    events_resolve_hosts (&ev);
    {
        int r2 = 0, r1 = 0, r0 = 0, stopped = 0;
        for (int i = 0; i < ev.failed.n; i++) {
            const struct failure *f = &ev.failed.f[i];
            if (f->rank == 2 && !strcmp (f->host, "n2"))
                r2++;
            if (f->rank == 1 && !strcmp (f->host, "n2"))
                r1++;
            if (f->rank == 0 && !strcmp (f->host, "n1"))
                r0++;
            if (f->rank == 3)
                stopped++;
        }
        ok (r2 == 1, "rank 2 failed (reshard_down), its host n2 from worker_start");
        ok (r1 == 1, "rank 1 on n2 killed by SIGKILL, counted once");
        ok (r0 == 1, "rank 0 named by the fatal event, host n1");
        ok (stopped == 0, "a worker stopped by its agent is not a failure");
    }
    events_clear (&ev);

    {
        size_t len;
        const char *v = json_find ("{\"a\":\"x\\\"y\",\"ab\":2,\"b\":[1,2]}", "ab", &len);
        char s[16];
        ok (v && len == 1 && *v == '2', "json_find: key 'ab' is not confused with 'a'");
        v = json_find ("{\"a\":\"x\\\"y\"}", "a", &len);
        ok (v && json_string (v, len, s, sizeof (s)) == 0 && !strcmp (s, "x\"y"),
            "json_string unescapes");
        ok (json_find ("[1,2]", "a", &len) == NULL, "not an object: nothing found");
    }
}

/* Whether the ranks suspended, from the event log alone: the library's
 * suspend event with its L3 file, or the ranks' exit codes (75 and 0). */
static void test_events_suspended (void)
{
    static struct events ev;
    char why[4200];
    /* what libelastic (rank 0) writes */
    const char *lib =
        "{\"event\":\"persist\",\"step\":30,\"world_size\":4,\"file\":\"/s/snap-30.h5\","
        "\"rank\":0}\n"
        "{\"event\":\"suspend\",\"step\":37,\"world_size\":4,\"reason\":\"SIGUSR1\","
        "\"file\":\"/s/snap-000000000037.h5\",\"rank\":0,\"time\":\"t\"}\n";
    /* what elastic-exec writes for libelastic's ranks: working rank 0
     * carries the job's code, 75; the others exit 0 */
    const char *exits =
        "{\"event\":\"worker_exit\",\"rank\":1,\"exitcode\":0,\"state\":\"SUCCEEDED\"}\n"
        "{\"event\":\"worker_exit\",\"rank\":0,\"exitcode\":75,\"state\":\"STOPPED\"}\n"
        "{\"event\":\"worker_exit\",\"rank\":2,\"exitcode\":0,\"state\":\"SUCCEEDED\"}\n"
        "{\"event\":\"worker_exit\",\"rank\":2,\"exitcode\":0,\"state\":\"SUCCEEDED\"}\n";
    const char *exit_line = "{\"event\":\"worker_exit\",\"rank\":3,\"exitcode\":%d}\n";
    char line[256];

    events_init (&ev);
    events_parse (&ev, lib);
    is_int (ev.nsuspend, 1, "the library's suspend event is seen");
    ok (ev.suspend_step == 37 && !strcmp (ev.suspend_file, "/s/snap-000000000037.h5"),
        "with its step and L3 file (%lld, %s)",
        ev.suspend_step,
        ev.suspend_file);
    ok (events_suspended (&ev, 4, why, sizeof (why)) == 1 && strstr (why, "step 37") &&
            strstr (why, "snap-000000000037.h5"),
        "a suspend event with a file: suspended (%s)",
        why);
    events_clear (&ev);

    events_init (&ev);
    events_parse (&ev,
                  "{\"event\":\"suspend\",\"step\":37,\"world_size\":4,\"file\":null,"
                  "\"rank\":0}\n");
    ok (ev.nsuspend == 1 && ev.suspend_file[0] == '\0', "a suspend without a file");
    is_int (events_suspended (&ev, 4, why, sizeof (why)),
            0,
            "is no evidence by itself (the L3 write failed)");
    events_parse (&ev, exits);
    ok (ev.nexit[EVENTS_EXIT_SUSPENDED] == 1 && ev.nexit[EVENTS_EXIT_ZERO] == 2,
        "three ranks exited: one 75, two 0 (a repeated line counts once)");
    is_int (events_suspended (&ev, 4, why, sizeof (why)),
            0,
            "three of four ranks is not the whole job");
    snprintf (line, sizeof (line), exit_line, -9);
    events_parse (&ev, line);
    is_int (events_suspended (&ev, 4, why, sizeof (why)),
            0,
            "nor with the fourth killed by a signal");
    snprintf (line, sizeof (line), exit_line, 0);
    events_parse (&ev, line);
    ok (events_suspended (&ev, 4, why, sizeof (why)) == 1 && strstr (why, "1 of them 75"),
        "the fourth's later exit 0 replaces its signal: suspended (%s)",
        why);
    is_int (events_suspended (&ev, 0, why, sizeof (why)), 0, "an unknown world size: no");
    events_clear (&ev);

    events_init (&ev);
    for (int r = 0; r < 3; r++) {
        snprintf (line,
                  sizeof (line),
                  "{\"event\":\"worker_exit\",\"rank\":%d,\"exitcode\":75}\n",
                  r);
        events_parse (&ev, line);
    }
    ok (events_suspended (&ev, 3, why, sizeof (why)) == 1,
        "every rank exiting 75 (a program of its own): suspended");
    snprintf (line, sizeof (line), exit_line, 1);
    events_parse (&ev, line);
    is_int (events_suspended (&ev, 4, why, sizeof (why)), 0, "not with a rank exiting 1");
    events_clear (&ev);

    events_init (&ev);
    events_parse (&ev, "{\"event\":\"worker_exit\",\"rank\":0,\"exitcode\":0}\n");
    is_int (
        events_suspended (&ev, 1, why, sizeof (why)), 0, "exit 0 is not a suspension");
    events_clear (&ev);

    /* a rank its wrapper counted as finished: ended by the relayed
     * SIGUSR1 inside MPI_Finalize, after elastic_progress_end */
    events_init (&ev);
    events_parse (&ev,
                  "{\"event\":\"worker_exit\",\"rank\":0,\"exitcode\":-10,"
                  "\"signal\":\"SIGUSR1\",\"state\":\"SUCCEEDED\",\"after_end\":true}\n"
                  "{\"event\":\"worker_exit\",\"rank\":1,\"exitcode\":-10,"
                  "\"signal\":\"SIGUSR1\",\"state\":\"STOPPED\"}\n");
    ok (ev.nexit[EVENTS_EXIT_ZERO] == 1 && ev.nexit[EVENTS_EXIT_OTHER] == 1,
        "a signal after the end (SUCCEEDED) counts as exit 0, before it as another exit "
        "(%d, %d)",
        ev.nexit[EVENTS_EXIT_ZERO],
        ev.nexit[EVENTS_EXIT_OTHER]);
    events_clear (&ev);
}

/* what the ranks' libelastic says of MPI_Init, and who holds it up */
static void test_init_pending (void)
{
    static struct events ev;
    static struct initwatch w;
    struct init_pending p;
    struct report rep;
    char buf[512], why[512], path[] = "/tmp/t7001-initwatch-XXXXXX";
    const char *loaded =
        "{\"event\":\"rank_loaded\",\"rank\":%d,\"pid\":1,\"host\":\"h\"}\n";
    const char *done = "{\"event\":\"rank_initialized\",\"rank\":%d,\"pid\":1}\n";
    char line[256];
    FILE *f;
    int fd;

    events_init (&ev);
    report_init (&rep);
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue; /* rank 2 never started its program */
        snprintf (line, sizeof (line), loaded, r);
        events_parse (&ev, line);
    }
    is_int (ev.ninit_loaded, 3, "three ranks said they loaded");
    is_int (init_pending (&ev, &rep, 4, &p), 0, "nobody dead: the deadline does not run");
    is_int (p.nwaiting, 4, "though four ranks have not finished MPI_Init");
    events_parse (&ev,
                  "{\"event\":\"worker_exit\",\"rank\":1,\"exitcode\":-9,\"signal\":"
                  "\"SIGKILL\",\"state\":\"FAILED\",\"host\":\"h\"}\n");
    ok (init_pending (&ev, &rep, 4, &p) == 1 && p.ndead == 1 && p.first_dead == 1,
        "rank 1 killed while the others wait: the deadline runs");
    init_pending_ranks (&p, 4, buf, sizeof (buf));
    is_str (buf, "ranks 0, 2, 3 of 4", "the live ranks that never said they finished");
    snprintf (line, sizeof (line), done, 0);
    events_parse (&ev, line);
    snprintf (line, sizeof (line), loaded, 0);
    events_parse (&ev, line);
    ok (ev.rank_init[0] == EVENTS_INIT_DONE && ev.ninit_done == 1 && ev.ninit_loaded == 3,
        "a later rank_loaded does not undo rank_initialized");
    init_pending (&ev, &rep, 4, &p);
    init_pending_ranks (&p, 4, buf, sizeof (buf));
    is_str (buf, "ranks 2, 3 of 4", "rank 0 finished MPI_Init");
    snprintf (line, sizeof (line), done, 3);
    events_parse (&ev, line);
    ok (init_pending (&ev, &rep, 4, &p) == 0 && p.nwaiting == 1,
        "only rank 2 left, which never loaded libelastic: not judged");
    events_clear (&ev);

    /* a program without libelastic says nothing: never judged */
    events_init (&ev);
    events_parse (&ev, "{\"event\":\"worker_exit\",\"rank\":0,\"exitcode\":1}\n");
    is_int (init_pending (&ev, &rep, 2, &p), 0, "without libelastic's lines: not judged");
    /* a death that only mpirun's report names (no wrapper) */
    snprintf (line, sizeof (line), loaded, 1);
    events_parse (&ev, line);
    events_clear (&ev);
    events_init (&ev);
    events_parse (&ev, line);
    report_parse_block (&rep,
                        "prterun noticed that process rank 0 with PID 27684 on node vm "
                        "exited on signal 9 (Killed).");
    ok (init_pending (&ev, &rep, 2, &p) == 1 && p.first_dead == 0 && p.nwaiting == 1,
        "a death in mpirun's report counts too");
    events_clear (&ev);

    /* the watch over a real file: armed at the death, fired after the
     * timeout, once */
    ok ((fd = mkstemp (path)) >= 0 && (f = fdopen (fd, "w")), "a scratch event log");
    for (int r = 0; r < 3; r++)
        fprintf (f, loaded, r);
    fflush (f);
    report_init (&rep);
    initwatch_init (&w, path, 0, 3, 5);
    is_int (initwatch_check (&w, &rep, 100, why, sizeof (why)), 0, "no death: nothing");
    fprintf (
        f,
        "{\"event\":\"worker_exit\",\"rank\":2,\"exitcode\":-9,\"signal\":\"SIGKILL\","
        "\"state\":\"FAILED\",\"host\":\"n1\"}\n{\"event\":\"rank_ini");
    fflush (f);
    ok (initwatch_check (&w, &rep, 101, why, sizeof (why)) == 0 && w.armed_at == 101,
        "the death arms the deadline");
    is_int (
        initwatch_check (&w, &rep, 105.9, why, sizeof (why)), 0, "not before it passed");
    ok (initwatch_check (&w, &rep, 106, why, sizeof (why)) == 1 &&
            strstr (why,
                    "ranks 0, 1 of 3 never finished MPI_Init: still not 5.0 s after "
                    "rank 2 on n1 killed by signal 9") &&
            strstr (why, "(--init-timeout 5 s)"),
        "after 5 s it fires: %s",
        why);
    is_int (initwatch_check (&w, &rep, 200, why, sizeof (why)), 0, "once");
    initwatch_clear (&w);

    /* several deaths: the first to end is named, the others counted */
    events_init (&ev);
    report_init (&rep);
    for (int r = 0; r < 4; r++) {
        snprintf (line, sizeof (line), loaded, r);
        events_parse (&ev, line);
    }
    events_parse (&ev,
                  "{\"event\":\"worker_exit\",\"rank\":2,\"exitcode\":-9,\"signal\":"
                  "\"SIGKILL\",\"state\":\"FAILED\",\"host\":\"h\"}\n"
                  "{\"event\":\"worker_exit\",\"rank\":1,\"exitcode\":-9,\"signal\":"
                  "\"SIGKILL\",\"state\":\"FAILED\",\"host\":\"h\"}\n");
    ok (init_pending (&ev, &rep, 4, &p) == 1 && p.first_dead == 2 && p.ndead == 2,
        "rank 2 ended first, then rank 1: rank 2 is the first death");
    events_clear (&ev);

    /* the partial line completes: every live rank finished, disarmed */
    fprintf (f, "tialized\",\"rank\":0}\n");
    fprintf (f, done, 1);
    fflush (f);
    initwatch_init (&w, path, 0, 3, 5);
    initwatch_check (&w, &rep, 100, why, sizeof (why));
    ok (w.armed_at == 0 && w.ev.ninit_done == 2, "finished after all: not armed");
    initwatch_clear (&w);
    initwatch_init (&w, path, 0, 3, 0);
    is_int (
        initwatch_check (&w, &rep, 1000, why, sizeof (why)), 0, "--init-timeout 0: off");
    initwatch_clear (&w);
    fclose (f);
    unlink (path);
}

static int parse (const char *line, struct options *o)
{
    /* options keep pointers into argv: both live until the next call */
    static char *argv[64], buf[1024];
    int argc = 0;

    snprintf (buf, sizeof (buf), "elastic-mpirun %s", line);
    for (char *t = strtok (buf, " "); t && argc < 63; t = strtok (NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    return options_parse (o, argc, argv, &err);
}

static void test_options (void)
{
    struct options o;

    ok (parse ("--max-relaunches 5 --spares 1 -np 8 --np-min 4 --mca btl self,tcp -x FOO "
               "--map-by "
               "node:OVERSUBSCRIBE --hostfile hf ./app -n 3",
               &o) == 0,
        "a mixed command line parses");
    ok (o.max_relaunches == 5 && o.spares == 1 && o.np == 8 && o.np_min == 4,
        "elastic values and -np taken");
    ok (o.hostfile && !strcmp (o.hostfile, "hf"), "--hostfile intercepted");
    ok (o.oversubscribe, "--map-by ...:OVERSUBSCRIBE noticed");
    ok (options_has_mca (&o, "btl") && !options_has_mca (&o, "pml"),
        "--mca keys recorded");
    is_int (o.npass, 7, "--mca btl v, -x FOO, --map-by v passed through (7 words)");
    ok (o.napp == 3 && !strcmp (o.app[0], "./app") && !strcmp (o.app[2], "3"),
        "the program keeps its own -n 3");
    options_free (&o);

    ok (parse ("./app", &o) == 0 && o.init_timeout == 60,
        "--init-timeout: 60 s by default");
    options_free (&o);
    ok (parse ("--init-timeout 500ms ./app", &o) == 0 && o.init_timeout == 0.5,
        "--init-timeout 500ms");
    options_free (&o);
    ok (parse ("--init-timeout 0 ./app", &o) == 0 && o.init_timeout == 0,
        "--init-timeout 0: off");
    options_free (&o);
    ok (parse ("--init-timeout soon ./app", &o) < 0 &&
            strstr (err.text, "--init-timeout: 'soon' is not a duration"),
        "a bad --init-timeout names its value (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--max-relaunch 3 ./app", &o) < 0 &&
            strstr (err.text, "did you mean --max-relaunches"),
        "a typo of an elastic option: error with a suggestion (%s)",
        err.text);
    ok (parse ("--frobnicate ./app", &o) < 0 && strstr (err.text, "--frobnicate") &&
            strstr (err.text, "--pass"),
        "an unknown option: error naming it and --pass (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--pass --frobnicate ./app", &o) == 0 && o.npass == 1 &&
            !strcmp (o.pass[0], "--frobnicate"),
        "--pass hands an unlisted option to mpirun");
    options_free (&o);
    ok (parse ("-n 4 --np-min 8 ./app", &o) < 0 && strstr (err.text, "--np-min 8"),
        "np-min > -n rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--np-min 8 --np-max 4 ./app", &o) < 0 && strstr (err.text, "--np-max 4"),
        "np-min > np-max rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--max-relaunches -1 ./app", &o) < 0 &&
            strstr (err.text, "--max-relaunches"),
        "negative relaunches rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--detector 1,2 ./app", &o) < 0 && strstr (err.text, "3 x period"),
        "detector timeout <= 3 periods rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--detector 500ms ./app", &o) == 0 && o.det_period == 0.5 &&
            o.det_timeout == 1.75,
        "--detector 500ms: timeout 3.5 periods");
    options_free (&o);
    ok (parse ("--ulfm maybe ./app", &o) < 0 && strstr (err.text, "'maybe'"),
        "--ulfm maybe rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("-n 4", &o) < 0 && strstr (err.text, "no program"),
        "no program: error (%s)",
        err.text);
    options_free (&o);
    ok (parse ("--mca btl", &o) < 0 && strstr (err.text, "needs 2 values"),
        "--mca with one value rejected (%s)",
        err.text);
    options_free (&o);
    ok (parse ("-n 2 -- --weird-program", &o) == 0 && o.napp == 1, "-- ends the options");
    options_free (&o);
    is_int (mpirun_option_arity ("map-by"), 1, "map-by takes a value");
    is_int (mpirun_option_arity ("prtemca"), 2, "prtemca takes two");
    is_int (mpirun_option_arity ("report-bindings"), 0, "report-bindings is a flag");
}

static void test_version (void)
{
    char v[64];
    int major = 0;

    ok (probe_parse_version (
            "mpirun (Open MPI) 5.0.7\n\nReport bugs", v, sizeof (v), &major) == 0 &&
            major == 5 && !strcmp (v, "5.0.7"),
        "Open MPI 5.0.7 recognised");
    ok (probe_parse_version ("mpirun.openmpi (OpenRTE) 4.1.4\n", v, sizeof (v), &major) ==
                0 &&
            major == 4,
        "Open MPI 4.1.4 (OpenRTE) recognised");
    ok (probe_parse_version (
            "HYDRA build details:\n Version: 4.0.2\n", v, sizeof (v), &major) < 0,
        "MPICH's mpiexec is not Open MPI");
}

int main (void)
{
    test_hostfile ();
    test_hosts_option ();
    test_slurm ();
    test_exclude_and_spares ();
    test_match ();
    test_report ();
    test_events ();
    test_events_suspended ();
    test_init_pending ();
    test_options ();
    test_version ();
    return done_testing ();
}
