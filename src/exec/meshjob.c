/* meshjob.c - elastic-exec's mesh mode: map, addresses, key, leader and
 * followers, the agreed result (see meshjob.h)
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "jobmap.h"
#include "mesh/auth.h"
#include "mesh/mesh.h"
#include "mesh/proto.h"
#include "meshjob.h"
#include "pmix/pmix_transport_mesh.h"
#include "rdzv_tcp.h"

_Static_assert(MESHJOB_KEY_SIZE == MESH_KEY_SIZE, "the mesh's key size");

int meshjob_detect (char *const envp[])
{
    char *const *e;
    int tasks = 0, nodes = 0;

    if (!jobmap_slurm_detect (envp))
        return 0;
    if (!envp) {
        extern char **environ;
        envp = environ;
    }
    for (e = envp; *e; e++) {
        if (!strncmp (*e, "OMPI_COMM_WORLD_RANK=", 21) ||
            !strncmp (*e, "PRTE_LAUNCHED=", 14))
            return 0; /* mpirun's task (PRRTE starts its daemons with srun) */
        if (!strncmp (*e, "SLURM_STEP_NUM_TASKS=", 21))
            tasks = atoi (*e + 21);
        if (!strncmp (*e, "SLURM_STEP_NUM_NODES=", 21))
            nodes = atoi (*e + 21);
    }
    return tasks > 1 || nodes > 1;
}

/* ---- addresses ------------------------------------------------------------ */

static int resolve_one (const char *name, char *addr, size_t size)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;

    if (getaddrinfo (name, NULL, &hints, &res) != 0 || !res)
        return -1;
    inet_ntop (
        AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, addr, (socklen_t)size);
    freeaddrinfo (res);
    return 0;
}

/* NodeAddr of the nodes in list (comma-separated) from Slurm, into the
 * entries of addr[] still empty.  Returns 0 (some may stay empty). */
static int
resolve_by_slurm (const char *const *names, int n, const char *list, char (*addr)[64])
{
    char cmd[8192], line[4096];
    FILE *f;

    if (snprintf (cmd, sizeof (cmd), "scontrol show node -o '%s' 2>/dev/null", list) >=
        (int)sizeof (cmd))
        return -1;
    if (!(f = popen (cmd, "r")))
        return -1;
    while (fgets (line, sizeof (line), f)) {
        char name[256], a[64];
        const char *p = strstr (line, "NodeName="), *q = strstr (line, " NodeAddr=");

        if (!p || !q || sscanf (p + 9, "%255[^ \n]", name) != 1 ||
            sscanf (q + 10, "%63[^ \n]", a) != 1)
            continue;
        for (int i = 0; i < n; i++)
            if (!addr[i][0] && !strcmp (names[i], name) &&
                resolve_one (a, addr[i], sizeof (addr[i])) < 0)
                snprintf (addr[i], sizeof (addr[i]), "%s", a);
    }
    pclose (f);
    return 0;
}

int meshjob_resolve (const char *const *names,
                     int n,
                     char (*addr)[64],
                     elastic_error_t *err)
{
    char *list = NULL;
    size_t len = 0;
    int rc = 0;

    for (int i = 0; i < n; i++) {
        char *p;
        addr[i][0] = '\0';
        if (resolve_one (names[i], addr[i], sizeof (addr[i])) == 0)
            continue;
        if (!(p = realloc (list, len + strlen (names[i]) + 2))) {
            free (list);
            return errprintf (err, "out of memory");
        }
        list = p;
        len += (size_t)sprintf (list + len, "%s%s", len ? "," : "", names[i]);
    }
    if (list)
        resolve_by_slurm (names, n, list, addr);
    free (list);
    for (int i = 0; i < n && rc == 0; i++)
        if (!addr[i][0])
            rc = errprintf (err,
                            "mesh: node '%s' has no address: its name does not resolve "
                            "(getaddrinfo) and Slurm gave no NodeAddr for it",
                            names[i]);
    return rc;
}

static int make_addrs (struct meshjob *mj, elastic_error_t *err)
{
    const struct jobmap *m = mj->map;
    char (*addr)[64] = calloc ((size_t)m->nnodes, sizeof (*addr));
    const char **names = calloc ((size_t)m->nnodes, sizeof (*names));
    int rc = 0;

    if (!addr || !names ||
        !(mj->addrs = calloc ((size_t)m->nnodes, sizeof (*mj->addrs)))) {
        free (addr);
        free (names);
        return errprintf (err, "out of memory");
    }
    for (int i = 0; i < m->nnodes; i++)
        names[i] = m->node[i].name;
    if (meshjob_resolve (names, m->nnodes, addr, err) < 0)
        rc = -1;
    for (int i = 0; i < m->nnodes && rc == 0; i++)
        if (asprintf (&mj->addrs[i], "%s:%d", addr[i], m->port[0]) < 0) {
            mj->addrs[i] = NULL;
            rc = errprintf (err, "out of memory");
        }
    free (names);
    free (addr);
    return rc;
}

/* ---- authentication ---------------------------------------------------------- */

/* munged's socket: ELASTIC_MUNGE_SOCKET, else AuthInfo's socket= in
 * $SLURM_CONF (what Slurm itself uses), else "" (libmunge's default). */
static void munge_socket (char *buf, size_t size)
{
    const char *v = getenv ("ELASTIC_MUNGE_SOCKET"), *conf = getenv ("SLURM_CONF");
    char line[4096];
    FILE *f;

    buf[0] = '\0';
    if (v && *v) {
        snprintf (buf, size, "%s", v);
        return;
    }
    if (!conf || !*conf || !(f = fopen (conf, "re")))
        return;
    while (fgets (line, sizeof (line), f)) {
        const char *p = line + strspn (line, " \t"), *q;
        if (strncasecmp (p, "AuthInfo", 8) != 0 || !(q = strstr (p, "socket=")))
            continue;
        q += 7;
        snprintf (buf, size, "%.*s", (int)strcspn (q, ", \t\n"), q);
        break;
    }
    fclose (f);
}

int meshjob_auth (const char *job,
                  int slurm,
                  uint8_t key[MESHJOB_KEY_SIZE],
                  int *munge,
                  char *sock,
                  size_t socksz,
                  elastic_error_t *err)
{
    const char *s = getenv ("ELASTIC_MESH_SECRET"),
               *f = getenv ("ELASTIC_MESH_SECRET_FILE");
    elastic_error_t merr = {{0}};

    *munge = 0;
    sock[0] = '\0';
    if ((s && *s) || (f && *f) || !slurm) {
        if (mesh_auth_key_from_env (job, key, err) < 0) {
            errprefix (err, "mesh (authentication between the nodes' elastic-exec)");
            return -1;
        }
        return 0;
    }
    munge_socket (sock, socksz);
    if (mesh_auth_munge_probe (sock[0] ? sock : NULL, &merr) == 0) {
        *munge = 1;
        return 0;
    }
    return errprintf (err,
                      "mesh: the nodes' elastic-exec cannot authenticate each other: set "
                      "ELASTIC_MESH_SECRET (or ELASTIC_MESH_SECRET_FILE) for the job, or "
                      "run munged (%s)",
                      merr.text);
}

static int make_auth (struct meshjob *mj, elastic_error_t *err)
{
    return meshjob_auth (mj->map->key,
                         mj->map->source == JOBMAP_SLURM,
                         mj->key,
                         &mj->munge,
                         mj->munge_socket,
                         sizeof (mj->munge_socket),
                         err);
}

/* Room for members joining by elastic-exec --join: nslots member slots
 * (ELASTIC_MESH_JOIN_SLOTS absent ones past the map's nodes; 0: none),
 * addrs grown to them, and the job's shape for the newcomers. */
static int make_join_slots (struct meshjob *mj, elastic_error_t *err)
{
    const char *v = getenv ("ELASTIC_MESH_JOIN_SLOTS");
    long extra = MESHJOB_JOIN_SLOTS ((long)mj->map->nnodes);
    char **grown;

    if (v && *v) {
        char *end;
        errno = 0;
        extra = strtol (v, &end, 10);
        if (errno || *end || extra < 0 || extra > 65536)
            return errprintf (err,
                              "ELASTIC_MESH_JOIN_SLOTS: '%s' is not accepted (expected "
                              "0..65536 member slots for elastic-exec --join)",
                              v);
    }
    if (mj->map->nnodes + extra > (long)MESH_MAX_MEMBERS)
        extra = (long)MESH_MAX_MEMBERS - mj->map->nnodes;
    mj->nslots = (uint32_t)(mj->map->nnodes + extra);
    if (extra == 0)
        return 0;
    if (!(grown = realloc (mj->addrs, mj->nslots * sizeof (*grown))))
        return errprintf (err, "out of memory");
    mj->addrs = grown;
    for (uint32_t i = (uint32_t)mj->map->nnodes; i < mj->nslots; i++)
        mj->addrs[i] = NULL;
    if (!(mj->admit_info = meshjob_shape (mj->map)))
        return errprintf (err, "out of memory");
    return 0;
}

/* ---- create --------------------------------------------------------------- */

struct meshjob *meshjob_create (const struct meshjob_opts *opts, elastic_error_t *err)
{
    struct jobmap_opts jo = {.nproc_per_node = opts ? opts->nproc_per_node : 0};
    struct meshjob *mj = calloc (1, sizeof (*mj));
    const char *tmp = getenv ("TMPDIR");

    if (!mj) {
        errprintf (err, "out of memory");
        return NULL;
    }
    pthread_mutex_init (&mj->lock, NULL);
    mj->listen_fd = -1;
    mj->node_timeout = opts && opts->node_timeout > 0 ? opts->node_timeout : 2.0;
    if (!(mj->map = jobmap_from_slurm (&jo, NULL, err)))
        goto fail;
    if (mj->map->nnodes > 1 && make_addrs (mj, err) < 0)
        goto fail;
    if (mj->map->nnodes > 1 && make_auth (mj, err) < 0)
        goto fail;
    if (mj->map->nnodes > 1 && make_join_slots (mj, err) < 0)
        goto fail;
    if (!tmp || !*tmp || tmp[0] != '/')
        tmp = "/tmp";
    if (snprintf (mj->nodedir,
                  sizeof (mj->nodedir),
                  "%s/elastic-%d.%s.%s",
                  tmp,
                  (int)getuid (),
                  mj->map->key,
                  mj->map->node[mj->map->node_id].name) >= (int)sizeof (mj->nodedir)) {
        errprintf (err, "mesh: TMPDIR is too long: %s", tmp);
        goto fail;
    }
    mj->nfollowers = mj->map->node[mj->map->node_id].ntasks - 1;
    return mj;
fail:
    meshjob_destroy (mj);
    return NULL;
}

struct meshjob *meshjob_create_torchrun (const struct meshjob_torchrun_opts *o,
                                         elastic_error_t *err)
{
    struct jobmap_torchrun t = {
        .nnodes = o->nnodes,
        .node_rank = o->node_rank >= 0 ? o->node_rank : 0, /* placed by the server */
        .nproc_per_node = o->nproc_per_node,
        .rdzv_endpoint = o->endpoint,
        .run_id = o->run_id,
    };
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl (INADDR_ANY)};
    socklen_t sl = sizeof (sa);
    struct rdzv_tcp_opts ro = {0};
    char who[48];
    struct meshjob *mj = calloc (1, sizeof (*mj));

    if (!mj) {
        errprintf (err, "out of memory");
        return NULL;
    }
    pthread_mutex_init (&mj->lock, NULL);
    mj->listen_fd = -1;
    mj->node_timeout = o->node_timeout > 0 ? o->node_timeout : 2.0;
    if (!(mj->map = jobmap_from_torchrun (&t, err)))
        goto fail;
    if (mesh_auth_key_from_env (mj->map->key, mj->key, err) < 0) {
        errprefix (err, "mesh (authentication between the nodes' elastic-exec)");
        goto fail;
    }
    /* the mesh's socket: any address (peers reach the one the rendezvous
     * tells them), a port the kernel picks */
    if ((mj->listen_fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind (mj->listen_fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (mj->listen_fd, 128) < 0 ||
        getsockname (mj->listen_fd, (struct sockaddr *)&sa, &sl) < 0) {
        errprintf (err, "mesh: cannot listen: %s", strerror (errno));
        goto fail;
    }
    if (o->node_rank >= 0)
        snprintf (who, sizeof (who), "node rank %d", o->node_rank);
    else
        snprintf (who, sizeof (who), "a node without --node-rank");
    if (o->min_nodes > 0 && o->min_nodes < o->nnodes)
        log_info ("rendezvous at %s:%d as %s of %d to %d nodes (mesh port %d)",
                  mj->map->rdzv_host,
                  mj->map->rdzv_port,
                  who,
                  o->min_nodes,
                  o->nnodes,
                  (int)ntohs (sa.sin_port));
    else
        log_info ("rendezvous at %s:%d as %s of %d (mesh port %d)",
                  mj->map->rdzv_host,
                  mj->map->rdzv_port,
                  who,
                  o->nnodes,
                  (int)ntohs (sa.sin_port));
    ro.key = mj->key;
    ro.self_port = (int)ntohs (sa.sin_port);
    ro.timeout = o->join_timeout > 0 ? o->join_timeout : 300;
    ro.min_nodes = o->min_nodes;
    ro.last_call = o->last_call >= 0 ? o->last_call : 30;
    ro.any_rank = o->node_rank < 0;
    ro.slots = o->joins ? (uint32_t)MESHJOB_SLOTS (o->nnodes) : 0;
    mj->max_nodes = o->nnodes;
    if (rdzv_tcp_exchange (&mj->map, &ro, &mj->addrs, o->joins ? &mj->joins : NULL, err) <
        0)
        goto fail;
    if (mj->joins.late)
        log_info ("joined the running job as node %d (epoch %u)",
                  mj->map->node_id,
                  mj->joins.epoch);
    else if (ro.slots ? (int)mj->joins.base < o->nnodes
                      : mj->map->nnodes < o->nnodes || mj->map->node_id != o->node_rank)
        log_info ("the job started with %d of at most %d nodes; this is node %d",
                  ro.slots ? (int)mj->joins.base : mj->map->nnodes,
                  o->nnodes,
                  mj->map->node_id);
    /* nodes that share an address (several "nodes" on one host, as in a
     * test) get distinct names: Open MPI takes ranks on nodes of one name
     * for neighbours on one machine (with joins, slots without a member
     * have no name yet: rdzv_mesh.c names them as they join) */
    for (int i = 0; i < mj->map->nnodes; i++)
        for (int j = 0; j < i && mj->map->node[i].name; j++)
            if (mj->map->node[j].name &&
                !strcmp (mj->map->node[i].name, mj->map->node[j].name)) {
                for (int k = 0; k < mj->map->nnodes; k++) {
                    char name[300];
                    if (!mj->map->node[k].name)
                        continue;
                    snprintf (name, sizeof (name), "%s-%d", mj->map->node[k].name, k);
                    if (jobmap_set_host (mj->map, k, name, err) < 0)
                        goto fail;
                }
                i = j = mj->map->nnodes; /* done */
            }
    snprintf (mj->nodedir, sizeof (mj->nodedir), "/nonexistent");
    mj->nfollowers = 0;
    return mj;
fail:
    meshjob_destroy (mj);
    return NULL;
}

void meshjob_destroy (struct meshjob *mj)
{
    int saved = errno;

    if (!mj)
        return;
    if (mj->listen_fd >= 0)
        close (mj->listen_fd);
    rdzv_tcp_joins_free (&mj->joins); /* stops the endpoint's server */
    /* (the entries past the map's nodes, for members joining, stay NULL) */
    for (int i = 0; mj->addrs && mj->map && i < mj->map->nnodes; i++)
        free (mj->addrs[i]);
    free (mj->addrs);
    free (mj->admit_info);
    if (mj->admission) {
        mesh_admission_free (mj->admission);
        free (mj->admission);
    }
    free (mj->join_ports);
    jobmap_destroy (mj->map);
    pthread_mutex_destroy (&mj->lock);
    free (mj);
    errno = saved;
}

int meshjob_is_leader (const struct meshjob *mj)
{
    return mj->map->leader;
}

int meshjob_joined (const struct meshjob *mj, uint32_t *member, int *free_slots)
{
    if (member)
        *member = mj && mj->joined ? mj->member : 0;
    if (free_slots)
        *free_slots = mj && mj->joined ? mj->free_slots : 0;
    return mj && mj->joined;
}

const char *meshjob_self_name (const struct meshjob *mj)
{
    return mj ? mj->self_name : "";
}

/* ---- the job's shape (for members joining it) ------------------------- */

char *meshjob_shape (const struct jobmap *m)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream (&buf, &size);

    if (!f)
        return NULL;
    fprintf (f, "elastic-join 1\njob %s\nworld %d\n", m->key, m->world_size);
    for (int i = 0; i < m->nnodes; i++)
        fprintf (f, "node %s %d\n", m->node[i].name, m->node[i].nranks);
    if (fclose (f) != 0) {
        free (buf);
        return NULL;
    }
    return buf;
}

struct jobmap *meshjob_shape_parse (const char *text, elastic_error_t *err)
{
    char key[512] = "", name[256];
    char **names = NULL;
    int *nranks = NULL, n = 0, world = -1, len, r;
    struct jobmap *m = NULL;
    const char *p = text;

    if (sscanf (p, "elastic-join 1\njob %511s\nworld %d\n%n", key, &world, &len) != 2) {
        errprintf (err, "the job's shape: not one this elastic-exec reads");
        return NULL;
    }
    for (p += len; *p; p += len) {
        const char *nl = strchr (p, '\n');
        char line[320];
        void *a, *b;
        len = nl ? (int)(nl - p) + 1 : (int)strlen (p);
        snprintf (line, sizeof (line), "%.*s", len < 319 ? len : 319, p);
        if (len >= 319 || sscanf (line, "node %255s %d", name, &r) != 2 ||
            n >= JOBMAP_MAX_NODES) {
            errprintf (err, "the job's shape: a bad line after %d nodes", n);
            goto out;
        }
        if (!(a = realloc (names, (size_t)(n + 1) * sizeof (*names))) ||
            !((names = a), (b = realloc (nranks, (size_t)(n + 1) * sizeof (*nranks))))) {
            errprintf (err, "out of memory");
            goto out;
        }
        nranks = b;
        if (!(names[n] = strdup (name))) {
            errprintf (err, "out of memory");
            goto out;
        }
        nranks[n++] = r;
    }
    if (!(m = jobmap_from_shape (key, n, (const char *const *)names, nranks, err)))
        goto out;
    if (m->world_size != world) {
        errprintf (err,
                   "the job's shape: %d ranks on its nodes, world %d",
                   m->world_size,
                   world);
        jobmap_destroy (m);
        m = NULL;
    }
out:
    for (int i = 0; i < n; i++)
        free (names[i]);
    free (names);
    free (nranks);
    return m;
}

int meshjob_join_parse (const char *s,
                        char *job,
                        size_t jobsz,
                        char *step,
                        size_t stepsz,
                        elastic_error_t *err)
{
    size_t j = s ? strspn (s, "0123456789") : 0, k = 0;

    if (s && j > 0 && s[j] == '.')
        k = strspn (s + j + 1, "0123456789");
    if (!s || j == 0 || j >= jobsz ||
        (s[j] && (s[j] != '.' || k == 0 || s[j + 1 + k] || k >= stepsz)))
        return errprintf (err,
                          "--join: '%s' is not a job step (expected JOBID or JOBID.STEP, "
                          "e.g. 1234 or 1234.0)",
                          s ? s : "");
    snprintf (job, jobsz, "%.*s", (int)j, s);
    snprintf (step, stepsz, "%s", s[j] ? s + j + 1 : "0");
    return 0;
}

/* ---- leader and followers --------------------------------------------------- */

static int write_atomic (const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64], tmp[PATH_MAX + 80];
    size_t n = strlen (text);
    int fd;

    snprintf (path, sizeof (path), "%s/%s", dir, name);
    snprintf (tmp, sizeof (tmp), "%s/.%s.%d", dir, name, (int)getpid ());
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return -1;
    if (write (fd, text, n) != (ssize_t)n) {
        close (fd);
        unlink (tmp);
        return -1;
    }
    close (fd);
    return rename (tmp, path);
}

int meshjob_lead (struct meshjob *mj, elastic_error_t *err)
{
    char pid[32];

    if (mj->nfollowers <= 0)
        return 0;
    if (mkdir (mj->nodedir, 0700) < 0 && errno != EEXIST)
        return errprintf (err, "mesh: cannot make %s: %s", mj->nodedir, strerror (errno));
    snprintf (pid, sizeof (pid), "%d\n", (int)getpid ());
    if (write_atomic (mj->nodedir, "leader", pid) < 0)
        return errprintf (
            err, "mesh: cannot write %s/leader: %s", mj->nodedir, strerror (errno));
    return 0;
}

static void remove_nodedir (struct meshjob *mj)
{
    char path[PATH_MAX + 64];
    const char *names[] = {"leader", "result"};

    for (size_t i = 0; i < sizeof (names) / sizeof (names[0]); i++) {
        snprintf (path, sizeof (path), "%s/%s", mj->nodedir, names[i]);
        unlink (path);
    }
    for (int k = 1; k <= mj->nfollowers; k++) {
        snprintf (path, sizeof (path), "%s/read.%d", mj->nodedir, k);
        unlink (path);
    }
    rmdir (mj->nodedir);
}

void meshjob_publish (struct meshjob *mj, int status, const char *status_file)
{
    char line[1200];

    snprintf (line,
              sizeof (line),
              "%d %s\n",
              status,
              mj->summary[0] ? mj->summary : "(no summary)");
    if (status_file) {
        char tmp[PATH_MAX + 32];
        FILE *f;
        snprintf (tmp, sizeof (tmp), "%s.%d", status_file, (int)getpid ());
        if ((f = fopen (tmp, "we")) && fputs (line, f) >= 0 && fclose (f) == 0) {
            if (rename (tmp, status_file) < 0)
                log_warn ("status-file %s: %s", status_file, strerror (errno));
        } else {
            log_warn ("status-file %s: %s", status_file, strerror (errno));
            unlink (tmp);
        }
    }
    if (mj->nfollowers <= 0)
        return;
    if (write_atomic (mj->nodedir, "result", line) < 0) {
        log_warn ("mesh: cannot write %s/result: %s", mj->nodedir, strerror (errno));
        return;
    }
    /* the followers read it and say so (up to 10 s: they poll every 0.1 s) */
    for (int tries = 0; tries < 100; tries++) {
        int seen = 0;
        for (int k = 1; k <= mj->nfollowers; k++) {
            char path[PATH_MAX + 32];
            snprintf (path, sizeof (path), "%s/read.%d", mj->nodedir, k);
            seen += access (path, F_OK) == 0;
        }
        if (seen >= mj->nfollowers)
            break;
        usleep (100000);
    }
    remove_nodedir (mj);
}

static int read_text (const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX + 64];
    ssize_t n;
    int fd;

    snprintf (path, sizeof (path), "%s/%s", dir, name);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, size - 1);
    close (fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

int meshjob_follow (struct meshjob *mj)
{
    double t0 = mono_now ();
    char buf[1300];
    int leader = -1, pidfd = -1, status = 1;

    /* the preemption signals and Ctrl-C are the leader's to act on */
    signal (SIGTERM, SIG_IGN);
    signal (SIGINT, SIG_IGN);
    signal (SIGUSR1, SIG_IGN);
    signal (SIGUSR2, SIG_IGN);
    signal (SIGHUP, SIG_IGN);
    log_info ("task %d of node %s follows the node's leader (task 0), which starts "
              "this node's ranks",
              mj->map->local_id,
              mj->map->node[mj->map->node_id].name);
    for (;;) {
        if (read_text (mj->nodedir, "result", buf, sizeof (buf)) == 0) {
            char *sp = strchr (buf, ' '), path[PATH_MAX + 32];
            status = atoi (buf);
            if (sp) {
                sp[strcspn (sp, "\n")] = '\0';
                fprintf (stderr, "elastic-exec: %s\n", sp + 1);
            }
            snprintf (path, sizeof (path), "read.%d", mj->map->local_id);
            write_atomic (mj->nodedir, path, "1\n");
            break;
        }
        if (leader < 0 && read_text (mj->nodedir, "leader", buf, sizeof (buf)) == 0) {
            leader = atoi (buf);
            pidfd = (int)syscall (SYS_pidfd_open, leader, 0);
            if (pidfd < 0 && errno == ESRCH) {
                log_err ("the node's leader (pid %d) is gone", leader);
                break;
            }
        }
        if (leader < 0 && mono_now () - t0 > 120) {
            log_err ("the node's leader (task 0) did not start within 120 s (%s)",
                     mj->nodedir);
            break;
        }
        if (pidfd >= 0) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            if (poll (&p, 1, 100) > 0) {
                /* it ended: its result, if any, was written before */
                if (read_text (mj->nodedir, "result", buf, sizeof (buf)) == 0)
                    continue;
                log_err ("the node's leader (pid %d) ended without a result: this "
                         "node's ranks are lost",
                         leader);
                break;
            }
        } else
            usleep (100000);
    }
    if (pidfd >= 0)
        close (pidfd);
    return status;
}

/* ---- /metrics ----------------------------------------------------------- */

void meshjob_set_transport (struct meshjob *mj, struct pmixhost_mesh *tp)
{
    pthread_mutex_lock (&mj->lock);
    mj->tp = tp;
    pthread_mutex_unlock (&mj->lock);
}

char *meshjob_metrics (struct meshjob *mj)
{
    const struct jobmap *m = mj->map;
    struct pmixhost_mesh_counts c;
    struct mesh_stats st;
    struct mesh *mesh;
    double *age;
    char *buf = NULL;
    size_t size = 0;
    FILE *f;

    if (!(age = calloc ((size_t)m->nnodes, sizeof (*age))) ||
        !(f = open_memstream (&buf, &size))) {
        free (age);
        return NULL;
    }
    pthread_mutex_lock (&mj->lock);
    if (!mj->tp || !(mesh = pmixhost_mesh_get (mj->tp))) {
        pthread_mutex_unlock (&mj->lock);
        fclose (f);
        free (buf);
        free (age);
        return NULL;
    }
    mesh_get_stats (mesh, &st);
    mesh_get_ages (mesh, age, (uint32_t)m->nnodes);
    pmixhost_mesh_counts (mj->tp, &c);
    pthread_mutex_unlock (&mj->lock);
    fprintf (f,
             "# HELP elastic_mesh_members Members of the job's mesh (nodes).\n"
             "# TYPE elastic_mesh_members gauge\nelastic_mesh_members %d\n"
             "# HELP elastic_mesh_members_alive Members this one sees alive.\n"
             "# TYPE elastic_mesh_members_alive gauge\nelastic_mesh_members_alive %u\n"
             "# HELP elastic_mesh_epoch Membership epoch (members lost so far).\n"
             "# TYPE elastic_mesh_epoch gauge\nelastic_mesh_epoch %u\n"
             "# HELP elastic_mesh_heartbeat_age_seconds Seconds since each tree "
             "neighbour was last heard from.\n"
             "# TYPE elastic_mesh_heartbeat_age_seconds gauge\n",
             m->nnodes,
             st.nlive,
             st.epoch);
    for (int i = 0; i < m->nnodes; i++)
        if (age[i] >= 0)
            fprintf (f,
                     "elastic_mesh_heartbeat_age_seconds{member=\"%d\",node=\"%s\"} "
                     "%.3f\n",
                     i,
                     m->node[i].name ? m->node[i].name : "",
                     age[i]);
    fprintf (f,
             "# HELP elastic_mesh_fences_total Fences over the mesh completed.\n"
             "# TYPE elastic_mesh_fences_total counter\nelastic_mesh_fences_total %u\n"
             "# HELP elastic_mesh_failures_seen_total Ranks of other nodes reported "
             "failed to this node's ranks.\n"
             "# TYPE elastic_mesh_failures_seen_total counter\n"
             "elastic_mesh_failures_seen_total %u\n"
             "# HELP elastic_mesh_failures_sent_total This node's rank failures sent "
             "to the others.\n"
             "# TYPE elastic_mesh_failures_sent_total counter\n"
             "elastic_mesh_failures_sent_total %u\n"
             "# HELP elastic_mesh_sent_bytes_total Bytes this member sent.\n"
             "# TYPE elastic_mesh_sent_bytes_total counter\n"
             "elastic_mesh_sent_bytes_total %llu\n"
             "# HELP elastic_mesh_self_fenced 1 once this member was cut off and "
             "killed its ranks.\n"
             "# TYPE elastic_mesh_self_fenced gauge\nelastic_mesh_self_fenced %d\n",
             st.fences,
             c.reported,
             c.failures_sent,
             (unsigned long long)st.sent_bytes,
             st.fenced);
    fclose (f);
    free (age);
    return buf;
}

/* ---- the agreed result -------------------------------------------------- */

void meshjob_outcome (
    char *buf, size_t size, int status, int ranks, int lost, int failed, int suspended)
{
    snprintf (buf,
              size,
              "outcome 1 status=%d ranks=%d lost=%d failed=%d suspended=%d",
              status,
              ranks,
              lost,
              failed,
              suspended);
}

static int parse_outcome (const char *s, int v[5])
{
    int n = 0;

    if (!s ||
        sscanf (s,
                "outcome 1 status=%d ranks=%d lost=%d failed=%d suspended=%d%n",
                &v[0],
                &v[1],
                &v[2],
                &v[3],
                &v[4],
                &n) != 5 ||
        s[n] != '\0' || v[0] < 0 || v[0] > 255 || v[1] < 0 || v[2] < 0 || v[3] < 0 ||
        v[4] < 0)
        return -1;
    return 0;
}

/* Append name to list (comma-separated, bounded). */
static void name_add (char *list, size_t size, size_t *off, const char *name)
{
    if (*off < size - 1)
        *off +=
            (size_t)snprintf (list + *off, size - *off, "%s%s", *off ? "," : "", name);
}

void meshjob_decide (struct meshjob *mj,
                     const struct meshjob_member *mm,
                     int n,
                     int agreed)
{
    const struct jobmap *m = mj->map;
    int failed_status = -1, suspended = 0, ranks_lost = 0, nlost = 0, unknown = 0;
    int njoined = 0;
    char lostnames[128] = "", joinednames[128] = "", names[272], how[128], more[48] = "";
    size_t off = 0, joff = 0;

    for (int i = 0; i < n; i++) {
        int v[5], joined = i >= m->nnodes;
        if (joined && mm[i].absent)
            continue;
        njoined += joined;
        if (mm[i].outcome && parse_outcome (mm[i].outcome, v) == 0) {
            ranks_lost += v[2];
            if ((v[3] > 0 || (v[0] != 0 && v[0] != 75)) && failed_status < 0)
                failed_status = v[0] ? v[0] : 1;
            suspended += v[4] > 0 || v[0] == 75;
            continue;
        }
        if (mm[i].lost) {
            nlost++;
            ranks_lost += (joined ? 0 : m->node[i].nranks) + mm[i].spawned;
            if (joined)
                name_add (joinednames,
                          sizeof (joinednames),
                          &joff,
                          mm[i].name ? mm[i].name : "?");
            else
                name_add (lostnames, sizeof (lostnames), &off, m->node[i].name);
        } else
            unknown++;
    }
    snprintf (names,
              sizeof (names),
              "%s%s%s%s",
              lostnames,
              off && joff ? "; " : "",
              joff ? "joined: " : "",
              joinednames);
    if (njoined)
        snprintf (
            more, sizeof (more), ", %d node%s joined", njoined, njoined == 1 ? "" : "s");
    if (failed_status >= 0)
        mj->status = failed_status, snprintf (how, sizeof (how), "FAILED");
    else if (unknown || !agreed)
        mj->status = 1,
        snprintf (how, sizeof (how), "unknown (not every member answered)");
    else if (suspended)
        mj->status = 75, snprintf (how, sizeof (how), "suspended (exit 75: resume it)");
    else
        mj->status = 0,
        snprintf (how,
                  sizeof (how),
                  "%s",
                  ranks_lost ? "completed after in-place recovery" : "completed");
    snprintf (mj->summary,
              sizeof (mj->summary),
              "job %s: %d ranks on %d nodes%s; %d node%s lost%s%s%s, %d rank%s lost; %s "
              "(exit %d)",
              m->key,
              m->world_size,
              m->nnodes,
              more,
              nlost,
              nlost == 1 ? "" : "s",
              nlost ? " (" : "",
              names,
              nlost ? ")" : "",
              ranks_lost,
              ranks_lost == 1 ? "" : "s",
              how,
              mj->status);
    mj->agreed = agreed && !unknown;
    mj->decided = 1;
}
