/* fuzz_http.c - elastic-exec's HTTP handler (src/exec/health.c,
 * health_answer: what libmicrohttpd's callback answers) and the /metrics
 * text it formats (src/exec/metrics.c) from what came from outside: the
 * request's method and URL, the --role, and a worker's failure message
 * (from its error file) that the label escaping must keep in one line
 *
 * Input: METHOD, URL, ROLE and MESSAGE on the first four lines (missing
 * ones: GET, /metrics, default, none).  The request line and headers
 * themselves are parsed by libmicrohttpd, not by this project, and are not
 * fuzzed here.
 */
#include "fuzz.h"
#include "fuzz_agent.h"
#include "health.h"

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    fuzz_agent_setup ();
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *s = fuzz_str (data, size), **line, *body;
    const char *type;
    unsigned int status;
    elastic_error_t err;
    int n;

    line = fuzz_lines (s, &n);
    fuzz_agent_workers (1);
    if (n > 2)
        elastic_agent_spec_set (fuzz_spec, "role", line[2], &err);
    if (n > 3) {
        fuzz_agent->last_fail_rank = 1;
        fuzz_agent->last_fail_signal = (int)(size % 70);
        snprintf (fuzz_agent->last_fail_message,
                  sizeof (fuzz_agent->last_fail_message),
                  "%s",
                  line[3]);
    }
    if (health_answer (fuzz_agent,
                       n > 0 ? line[0] : "GET",
                       n > 1 ? line[1] : "/metrics",
                       &status,
                       &type,
                       &body) == 0) {
        if (status < 200 || status > 599 || !body)
            abort ();
        free (body);
    }
    free (line);
    free (s);
    return 0;
}
