/* fuzz_prrte_report.c - mpirun's (PRRTE's, ORTE's) failure report on
 * stderr, as elastic-mpirun reads it (src/mpirun/report.c)
 *
 * Input: stderr text, fed line by line as the relaunch loop feeds it, then
 * the end of the stream; every failure recognised is described.
 */
#include "fuzz.h"
#include "mpirun/report.h"

static struct report r; /* 12 KiB: not on the stack */

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), **line, buf[512];
    int n;

    report_init (&r);
    line = fuzz_lines (s, &n);
    for (int i = 0; i < n; i++)
        report_feed_line (&r, line[i]);
    report_finish (&r);
    for (int i = 0; i < r.n; i++) {
        failure_describe (&r.f[i], buf, sizeof (buf));
        failure_host_is_bad (r.f[i].kind);
    }
    free (line);
    free (s);
    return 0;
}
