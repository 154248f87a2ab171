/* health.c - the agent's HTTP health and metrics server
 *
 * libmicrohttpd is loaded (dlopen) by the first health_start, not linked:
 * it brings GnuTLS and about ten more libraries whose loading and
 * constructors cost every elastic-exec ~2 ms of CPU at start, and most
 * runs (every per-rank wrapper under mpirun or srun) serve no HTTP. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/error.h"
#include "health.h"

#define TEXT "text/plain; charset=utf-8"

int health_answer (elastic_agent_t *agent,
                   const char *method,
                   const char *url,
                   unsigned int *status,
                   const char **type,
                   char **body)
{
    char text[512];

    *type = TEXT;
    *body = NULL;
    if (strcmp (method, "GET") != 0 && strcmp (method, "HEAD") != 0) {
        *status = 405;
        snprintf (text, sizeof (text), "method not allowed: use GET\n");
    } else if (strcmp (url, "/healthz") == 0) {
        struct elastic_agent_group_info g;
        double age;
        int ok = agent_loop_healthy (agent, &age);
        elastic_agent_group_info (agent, &g);
        agent_health_observe (agent, ok, age);
        *status = ok ? 200 : 503;
        snprintf (text,
                  sizeof (text),
                  "%s: loop age %.3f s (timeout %.3f s), group %s, restarts %d/%d\n",
                  ok ? "ok" : "unhealthy",
                  age,
                  agent->spec->health_timeout,
                  elastic_agent_state_name (g.state),
                  g.restart_count,
                  g.max_restarts);
    } else if (strcmp (url, "/metrics") == 0) {
        *status = 200;
        *type = "text/plain; version=0.0.4; charset=utf-8";
        return (*body = agent_metrics (agent)) ? 0 : -1;
    } else {
        *status = 404;
        snprintf (text, sizeof (text), "not found: try /healthz or /metrics\n");
    }
    return (*body = strdup (text)) ? 0 : -1;
}

#if HAVE_MICROHTTPD
#include <microhttpd.h>

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

/* The sonames tried, the installed library's first. */
static const char *const mhd_sonames[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};

/* The functions used, resolved once (loading never unloads). */
static struct {
    __typeof__ (MHD_start_daemon) *start_daemon;
    __typeof__ (MHD_stop_daemon) *stop_daemon;
    __typeof__ (MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__ (MHD_add_response_header) *add_response_header;
    __typeof__ (MHD_queue_response) *queue_response;
    __typeof__ (MHD_destroy_response) *destroy_response;
} mhd;

/* Load libmicrohttpd.  Returns 0, or -1 with one line in err. */
static int mhd_load (elastic_error_t *err)
{
    static void *lib;
    char why[256] = "";

    if (lib)
        return 0;
    for (size_t i = 0; !lib && i < sizeof (mhd_sonames) / sizeof (mhd_sonames[0]); i++) {
        if (!(lib = dlopen (mhd_sonames[i], RTLD_NOW | RTLD_LOCAL)) && !why[0]) {
            const char *e = dlerror ();
            snprintf (why, sizeof (why), "%s", e ? e : "not found");
        }
    }
    if (!lib) {
        errprintf (err,
                   "health-port: the HTTP server needs libmicrohttpd, which cannot be "
                   "loaded (%s)",
                   why);
        return -1;
    }
#define MHD_SYM(field, name)                                                             \
    if (!(*(void **)&mhd.field = dlsym (lib, name)))                                     \
        goto missing;
    MHD_SYM (start_daemon, "MHD_start_daemon");
    MHD_SYM (stop_daemon, "MHD_stop_daemon");
    MHD_SYM (create_response_from_buffer, "MHD_create_response_from_buffer");
    MHD_SYM (add_response_header, "MHD_add_response_header");
    MHD_SYM (queue_response, "MHD_queue_response");
    MHD_SYM (destroy_response, "MHD_destroy_response");
#undef MHD_SYM
    return 0;
missing:
    errprintf (
        err, "health-port: the loaded libmicrohttpd lacks a function: %s", dlerror ());
    dlclose (lib);
    lib = NULL;
    return -1;
}

struct health {
    elastic_agent_t *agent;
    struct MHD_Daemon *daemon;
    int fd;
    int port;
};

static mhd_result
reply (struct MHD_Connection *c, unsigned int status, const char *type, char *body)
{
    struct MHD_Response *r;
    mhd_result rc;

    r = mhd.create_response_from_buffer (strlen (body), body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    mhd.add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    mhd.add_response_header (r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    rc = mhd.queue_response (c, status, r);
    mhd.destroy_response (r);
    return rc;
}

static mhd_result on_request (void *cls,
                              struct MHD_Connection *c,
                              const char *url,
                              const char *method,
                              const char *version,
                              const char *upload_data,
                              size_t *upload_data_size,
                              void **con_cls)
{
    struct health *h = cls;
    unsigned int status;
    const char *type;
    char *body, nomem[] = "out of memory\n";
    mhd_result rc;

    /* Answer at the first call: request bodies are never read. */
    if (health_answer (h->agent, method, url, &status, &type, &body) < 0)
        return reply (
            c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", nomem);
    rc = reply (c, status, type, body);
    free (body);
    return rc;
}

static int listen_on (const char *addr, int port, int *portp, elastic_error_t *err)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd, one = 1, family;

    memset (&ss, 0, sizeof (ss));
    if (inet_pton (AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_port = htons ((uint16_t)port);
        len = sizeof (struct sockaddr_in);
    } else if (inet_pton (AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) ==
               1) {
        family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons ((uint16_t)port);
        len = sizeof (struct sockaddr_in6);
    } else {
        errprintf (err, "health-addr: '%s' is not an IPv4 or IPv6 address", addr);
        return -1;
    }
    if ((fd = socket (family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        errprintf (err, "health server: socket: %s", strerror (errno));
        return -1;
    }
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (bind (fd, (struct sockaddr *)&ss, len) < 0) {
        errprintf (
            err, "health-port: cannot listen on %s:%d: %s", addr, port, strerror (errno));
        close (fd);
        return -1;
    }
    if (listen (fd, 64) < 0 || getsockname (fd, (struct sockaddr *)&ss, &len) < 0) {
        errprintf (err, "health server: listen: %s", strerror (errno));
        close (fd);
        return -1;
    }
    *portp = family == AF_INET ? ntohs (((struct sockaddr_in *)&ss)->sin_port)
                               : ntohs (((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

struct health *
health_start (elastic_agent_t *agent, const char *addr, int port, elastic_error_t *err)
{
    struct health *h;

    if (mhd_load (err) < 0)
        return NULL;
    if (!(h = calloc (1, sizeof (*h)))) {
        errprintf (err, "health server: out of memory");
        return NULL;
    }
    h->agent = agent;
    if ((h->fd = listen_on (addr, port, &h->port, err)) < 0) {
        free (h);
        return NULL;
    }
    h->daemon = mhd.start_daemon (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL,
                                  0,
                                  NULL,
                                  NULL,
                                  on_request,
                                  h,
                                  MHD_OPTION_LISTEN_SOCKET,
                                  h->fd,
                                  MHD_OPTION_CONNECTION_LIMIT,
                                  (unsigned int)64,
                                  MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                  (unsigned int)32,
                                  MHD_OPTION_CONNECTION_TIMEOUT,
                                  (unsigned int)5,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                  (size_t)16384,
                                  MHD_OPTION_END);
    if (!h->daemon) {
        errprintf (
            err, "health server: libmicrohttpd could not start on %s:%d", addr, h->port);
        close (h->fd);
        free (h);
        return NULL;
    }
    return h;
}

int health_port (struct health *h)
{
    return h ? h->port : -1;
}

void health_stop (struct health *h)
{
    if (h) {
        mhd.stop_daemon (h->daemon); /* closes the listening socket */
        free (h);
    }
}

#else /* !HAVE_MICROHTTPD */

struct health *
health_start (elastic_agent_t *agent, const char *addr, int port, elastic_error_t *err)
{
    errprintf (
        err,
        "health-port: this build has no HTTP server (configure found no libmicrohttpd)");
    return NULL;
}

int health_port (struct health *h)
{
    return -1;
}

void health_stop (struct health *h)
{
}

#endif
