/* t1002-layout.c - libelastic internals without MPI: block layouts, the
 * overlap sweep used to re-shard, buddy maps, JSON event lines, the
 * ELASTIC_TEST_KILL parser and the state registry */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <elastic.h>
#include "libelastic/event.h"
#include "libelastic/layout.h"
#include "libelastic/registry.h"
#include "libelastic/testhook.h"
#include "lib/tap.h"

struct sweep {
    uint64_t covered;
    uint64_t next;
    int ordered;
    const uint64_t *oc, *nc;
    int fits;
};

static void
on_piece (int j, int k, uint64_t lo, uint64_t hi, uint64_t os, uint64_t ns, void *arg)
{
    struct sweep *s = arg;
    s->covered += hi - lo;
    if (lo != s->next)
        s->ordered = 0;
    s->next = hi;
    if (lo < os || hi > os + s->oc[j] || lo < ns || hi > ns + s->nc[k])
        s->fits = 0;
}

static int
sweep_ok (const uint64_t *oc, int no, const uint64_t *nc, int nn, uint64_t global)
{
    struct sweep s = {0, 0, 1, oc, nc, 1};
    layout_overlaps (oc, no, nc, nn, 1, on_piece, &s);
    return s.covered == global && s.ordered && s.fits;
}

static int is_cycle (const int *b, int n)
{
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (b[j] < 0 || b[j] >= n)
            return 0;
        j = b[j];
        if (j == 0 && i < n - 1)
            return 0;
    }
    return j == 0;
}

/* layout_even: blocks over ranks */
static void check_even (void)
{
    uint64_t c[16];

    layout_even (10, 4, c, 1);
    ok (c[0] == 3 && c[1] == 3 && c[2] == 2 && c[3] == 2, "10 over 4 is 3,3,2,2");
    is_int (layout_sum (c, 4, 1), 10, "the sum is the global count");
    layout_even (3, 5, c, 1);
    ok (c[0] == 1 && c[2] == 1 && c[3] == 0 && c[4] == 0,
        "3 over 5 leaves empty blocks at the end");
    uint64_t two[8];
    layout_even (7, 4, two + 1, 2);
    ok (two[1] == 2 && two[3] == 2 && two[5] == 2 && two[7] == 1,
        "strided layouts (column of a table)");
}

/* layout_overlaps: every element exactly once, in order, inside both blocks */
static void check_overlaps (void)
{
    uint64_t c[16], o[16];

    layout_even (100, 8, o, 1);
    layout_even (100, 7, c, 1);
    ok (sweep_ok (o, 8, c, 7, 100), "8 -> 7 ranks covers 100 elements once");
    ok (sweep_ok (c, 7, o, 8, 100), "7 -> 8 ranks covers 100 elements once");
    uint64_t un[5] = {0, 40, 0, 59, 1}, ev3[3];
    layout_even (100, 3, ev3, 1);
    ok (sweep_ok (un, 5, ev3, 3, 100), "uneven blocks with empty ones -> 3 ranks");
    ok (sweep_ok (ev3, 3, un, 5, 100), "3 ranks -> uneven blocks with empty ones");
    srand (42);
    int all = 1;
    for (int t = 0; t < 200; t++) {
        int no = 1 + rand () % 16, nn = 1 + rand () % 16;
        uint64_t g = 0;
        for (int j = 0; j < no; j++)
            g += (o[j] = rand () % 50);
        layout_even (g, nn, c, 1);
        all &= sweep_ok (o, no, c, nn, g);
    }
    ok (all, "200 random re-shardings cover every element once");
}

/* layout_buddies */
static void check_buddies (void)
{
    int node[16], buddy[16], all, cross;

    for (int j = 0; j < 8; j++)
        node[j] = 0;
    layout_buddies (8, node, buddy);
    all = 1;
    for (int j = 0; j < 8; j++)
        all &= buddy[j] == (j + 1) % 8;
    ok (all, "one node: buddy of j is j+1 mod n");
    layout_buddies (1, node, buddy);
    is_int (buddy[0], -1, "a single rank has no buddy");
    for (int j = 0; j < 8; j++)
        node[j] = j / 4;
    layout_buddies (8, node, buddy);
    cross = 1;
    for (int j = 0; j < 8; j++)
        cross &= node[buddy[j]] != node[j];
    ok (cross && is_cycle (buddy, 8),
        "two nodes of 4: every buddy is on the other node, one cycle");
    for (int j = 0; j < 12; j++)
        node[j] = j % 3 == 0   ? 7
                  : j % 3 == 1 ? 3
                               : 5; /* three interleaved nodes, any ids */
    layout_buddies (12, node, buddy);
    cross = 1;
    for (int j = 0; j < 12; j++)
        cross &= node[buddy[j]] != node[j];
    ok (cross && is_cycle (buddy, 12), "three nodes: cross-node buddies, one cycle");
    int un_nodes[7] = {0, 0, 0, 0, 0, 1, 1};
    layout_buddies (7, un_nodes, buddy);
    cross = 0;
    for (int j = 0; j < 7; j++)
        cross += un_nodes[buddy[j]] != un_nodes[j];
    ok (is_cycle (buddy, 7) && cross == 4,
        "nodes of 5 and 2: a cycle, cross-node wherever possible (4 of 7)");
}

/* event_format */
static void check_events (void)
{
    char line[4096];

    int failed[2] = {3, 4}, used[1] = {7};
    struct event_rec e = {
        .kind = "fatal",
        .step = 35,
        .old_size = 8,
        .new_size = 0,
        .failed = failed,
        .nfailed = 2,
        .used = used,
        .nused = 1,
        .attempts = 2,
        .handler_tries = 1,
        .t_detect = 0.0421,
        .t_shrink = 0.001,
        .error = "say \"hi\"\n\tand \\ \x01",
        .rank = 0,
    };
    ok (event_format (&e, line, sizeof (line)) > 0, "an event line is formatted");
    ok (strstr (line,
                "{\"event\":\"fatal\",\"step\":35,\"old_size\":8,\"new_size\":0,"
                "\"failed\":[3,4],\"spares_used\":[7]") == line,
        "kind, step, sizes and rank lists come first");
    ok (strstr (line, "\"t_detect_ms\":42.100") != NULL, "durations are in milliseconds");
    ok (strstr (line, "\"error\":\"say \\\"hi\\\"\\n\\tand \\\\ \\u0001\"") != NULL,
        "strings are escaped");
    ok (strstr (line, "\"time\":\"") != NULL && line[strlen (line) - 1] == '}',
        "a time stamp closes the object");
    ok (strchr (line, '\n') == NULL, "one line");
    printf ("# %s\n", line);
    ok (event_format (&e, line, 40) < 0, "a buffer too small is reported");
}

/* testhook_create, testhook_check */
static void check_testhook (void)
{
    struct testhook *h = NULL;
    elastic_error_t err;
    is_int (testhook_create ("3:40:snapshot,5:0:recovery", &h, &err),
            ELASTIC_OK,
            "two hooks parse");
    ok (h != NULL, "hooks are armed");
    /* a hook that fires SIGKILLs its process: check in a child */
    pid_t pid = fork ();
    int status = -1;
    if (pid == 0) {
        testhook_check (h, 3, 41, HOOK_SNAPSHOT); /* must not fire */
        testhook_check (h, 4, 40, HOOK_SNAPSHOT);
        testhook_check (h, 3, 40, HOOK_RECOVERY);
        _exit (0);
    }
    ok (pid > 0 && waitpid (pid, &status, 0) == pid && WIFEXITED (status) &&
            WEXITSTATUS (status) == 0,
        "hooks do not fire for another step, rank or place");
    testhook_destroy (h);
    is_int (testhook_create (NULL, &h, &err), ELASTIC_OK, "no variable, no hooks");
    ok (h == NULL, "nothing armed");
    is_int (testhook_create ("3:40:lunch", &h, &err),
            ELASTIC_ERR_INVAL,
            "an unknown place is rejected");
    is_str (err.text,
            "ELASTIC_TEST_KILL: '3:40:lunch' is invalid (expected RANK:STEP:WHERE[:STOP] "
            "with WHERE snapshot, recovery, protect, persist, finalize, grow, join or "
            "create, comma-separated)",
            "the message names the entry");
    is_int (testhook_create ("3:40", &h, &err),
            ELASTIC_ERR_INVAL,
            "a missing place is rejected");
    is_int (testhook_create ("3:40:recovery:TERM", &h, &err),
            ELASTIC_ERR_INVAL,
            "a signal other than STOP is rejected");
    is_int (testhook_create ("3:40:recovery:", &h, &err),
            ELASTIC_ERR_INVAL,
            "an empty signal is rejected");
    is_int (testhook_create ("3:40:recovery:STOP:x", &h, &err),
            ELASTIC_ERR_INVAL,
            "a fifth field is rejected");
    /* :STOP stops the process for real (a hung recovery, t5018) */
    is_int (testhook_create ("3:40:recovery:STOP", &h, &err),
            ELASTIC_OK,
            "RANK:STEP:WHERE:STOP");
    pid = fork ();
    if (pid == 0) {
        testhook_check (h, 3, 39, HOOK_RECOVERY); /* must not fire */
        testhook_check (h, 3, 40, HOOK_RECOVERY);
        _exit (0);
    }
    ok (pid > 0 && waitpid (pid, &status, WUNTRACED) == pid && WIFSTOPPED (status) &&
            WSTOPSIG (status) == SIGSTOP,
        "a :STOP hook stops its process with SIGSTOP");
    if (pid > 0) {
        kill (pid, SIGKILL);
        waitpid (pid, &status, 0);
    }
    testhook_destroy (h);
}

/* the registry */
static void check_registry (void)
{
    elastic_error_t err;

    struct registry *r = registry_create ();
    double x[4];
    int64_t step;
    is_int (registry_add_value (r, "step", &step, sizeof (step), &err),
            ELASTIC_OK,
            "a value");
    is_int (
        registry_add_array (r, "x", x, sizeof (double), 4, &err), ELASTIC_OK, "an array");
    is_int (registry_add_array (r, "e", NULL, 8, 0, &err),
            ELASTIC_OK,
            "an empty array (a spare's)");
    is_int (registry_set_blob (r, "b", x, 3, &err), ELASTIC_OK, "a blob");
    is_int (registry_add_value (r, "x", &step, 8, &err),
            ELASTIC_ERR_EXISTS,
            "names are unique across kinds");
    is_str (err.text, "'x' is already registered (an array)", "duplicate message");
    is_int (registry_add_array (r, "y", NULL, 8, 2, &err),
            ELASTIC_ERR_INVAL,
            "NULL data with elements");
    is_int (registry_add_array (r, "z", x, 0, 2, &err), ELASTIC_ERR_INVAL, "elem_size 0");
    is_int (registry_add_value (r, "", &step, 8, &err), ELASTIC_ERR_INVAL, "empty name");
    uint64_t sig0 = registry_signature (r);
    is_int (registry_set_type (r, "x", ELASTIC_TYPE_FLOAT64, &err),
            ELASTIC_OK,
            "an array's type");
    ok (registry_signature (r) != sig0, "the type is part of the signature");
    is_int (registry_set_type (r, "step", ELASTIC_TYPE_INT64, &err),
            ELASTIC_OK,
            "a value's type");
    is_int (registry_set_type (r, "step", ELASTIC_TYPE_FLOAT32, &err),
            ELASTIC_OK,
            "two float32 items in 8 bytes");
    is_int (registry_set_type (r, "step", ELASTIC_TYPE_INT64, &err), ELASTIC_OK, "back");
    is_int (registry_set_type (r, "b", ELASTIC_TYPE_INT64, &err),
            ELASTIC_ERR_NOT_FOUND,
            "blobs have no type");
    is_str (err.text,
            "elastic_set_type: no array or value 'b' (register it first)",
            "no-type message");
    is_int (registry_set_type (r, "x", 9, &err), ELASTIC_ERR_INVAL, "type 9");
    is_str (err.text,
            "array 'x': type 9 is invalid (expected an ELASTIC_TYPE_* from 0 to 6)",
            "bad-type message");
    registry_add_array (r, "odd", x, 12, 1, &err);
    is_int (registry_set_type (r, "odd", ELASTIC_TYPE_FLOAT64, &err),
            ELASTIC_ERR_INVAL,
            "12-byte elements are no float64 rows");
    is_str (err.text,
            "array 'odd': type float64 is invalid for elem_size 12 (expected a size that "
            "is a multiple of 8)",
            "size-mismatch message");
    uint64_t sig = registry_signature (r);
    is_int (registry_set_blob (r, "b", x, 16, &err),
            ELASTIC_OK,
            "a blob is updated in place");
    ok (registry_signature (r) == sig, "blob sizes do not change the signature");
    r->frozen = 1;
    is_int (registry_add_value (r, "late", &step, 8, &err),
            ELASTIC_ERR_STATE,
            "no new names after start");
    is_int (registry_set_blob (r, "b", x, 8, &err),
            ELASTIC_OK,
            "blobs are still updated after start");
    is_int (registry_set_type (r, "x", ELASTIC_TYPE_BYTES, &err),
            ELASTIC_ERR_STATE,
            "no type changes after start");
    is_int (r->vbytes, 8, "value bytes are summed");
    struct registry *r2 = registry_create ();
    registry_add_value (r2, "step", &step, sizeof (step), &err);
    registry_add_array (r2, "x", x, sizeof (float), 4, &err);
    registry_add_array (r2, "e", NULL, 8, 0, &err);
    registry_set_blob (r2, "b", x, 3, &err);
    registry_add_array (r2, "odd", x, 12, 1, &err);
    ok (registry_signature (r2) != registry_signature (r),
        "a different element size changes the signature");
    registry_destroy (r);
    registry_destroy (r2);
}

int main (void)
{
    check_even ();
    check_overlaps ();
    check_buddies ();
    check_events ();
    check_testhook ();
    check_registry ();
    return done_testing ();
}
