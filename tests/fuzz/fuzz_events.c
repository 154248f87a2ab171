/* fuzz_events.c - the JSON event lines the ranks and their elastic-exec
 * wrappers write to ELASTIC_EVENT_LOG, as elastic-mpirun reads them back
 * (src/mpirun/events.c: its own small JSON reader)
 *
 * Input: the log's text.  It is parsed, the hosts of the failed ranks are
 * resolved from the worker_start lines, each failure is described, and
 * the raw field lookups are run on the first line as well.
 */
#include "fuzz.h"
#include "mpirun/events.h"

static struct events ev; /* large: not on the stack */

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), buf[512];
    const char *v;
    size_t len;

    events_init (&ev);
    events_parse (&ev, s);
    events_resolve_hosts (&ev);
    for (int i = 0; i < ev.failed.n; i++)
        failure_describe (&ev.failed.f[i], buf, sizeof (buf));
    if ((v = json_find (s, "event", &len)))
        json_string (v, len, buf, sizeof (buf));
    if ((v = json_find (s, "host", &len)))
        json_string (v, len, buf, 8);
    events_clear (&ev);
    free (s);
    return 0;
}
