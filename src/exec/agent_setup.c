/* agent_setup.c - what an attempt needs before its workers start: a
 * checked rendezvous answer, MASTER_ADDR/MASTER_PORT, the run id and the
 * run directory
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_impl.h"
#include "util.h"

int agent_check_rdzv_info (const struct elastic_agent_rdzv_info *info,
                           int nproc,
                           elastic_error_t *err)
{
    if (info->group_world_size < 1 || info->group_rank < 0 ||
        info->group_rank >= info->group_world_size) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "rendezvous: group rank %d is not in 0..%d",
                         info->group_rank,
                         info->group_world_size - 1);
    }
    if (info->world_size < 0 || info->local_rank_base < 0 || info->node_local_size < 0) {
        return errcodef (
            err, ELASTIC_ERR_INVAL, "rendezvous: negative world size or local rank");
    }
    if (info->rank_base >= 0 && info->world_size > 0 &&
        info->rank_base + nproc > info->world_size) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "rendezvous: ranks %d..%d do not fit in world size %d",
                         info->rank_base,
                         info->rank_base + nproc - 1,
                         info->world_size);
    }
    if (info->master_port < -1 || info->master_port > 65535) {
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "rendezvous: master port %d is not in -1..65535",
                         info->master_port);
    }
    return ELASTIC_OK;
}

/* Bind port on all interfaces (0: any free port).  Returns the port bound
 * and closes the socket, or -1 with errno. */
static int probe_port (int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof (sa);
    int fd, one = 1, saved;

    if ((fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    sa.sin_addr.s_addr = htonl (INADDR_ANY);
    sa.sin_port = htons ((uint16_t)port);
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        getsockname (fd, (struct sockaddr *)&sa, &len) < 0) {
        saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    close (fd);
    return ntohs (sa.sin_port);
}

void agent_make_run_id (char *buf, size_t size)
{
    unsigned char r[8] = {0};
    int fd;

    if ((fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
        if (read (fd, r, sizeof (r)) != (ssize_t)sizeof (r))
            memset (r, 0, sizeof (r));
        close (fd);
    }
    if (r[0] == 0 && r[1] == 0) {
        uint64_t x = mono_ns () ^ ((uint64_t)getpid () << 32);
        memcpy (r, &x, sizeof (r));
    }
    snprintf (buf,
              size,
              "%02x%02x%02x%02x-%02x%02x-%02x%02x",
              r[0],
              r[1],
              r[2],
              r[3],
              r[4],
              r[5],
              r[6],
              r[7]);
}

/* Where a temporary run directory that holds only small files goes. */
#define SMALL_RUN_DIR "/dev/shm"

/* 1 if a run directory would hold only the workers' heartbeats (mapped
 * shared memory anyway) and error files: no output logs, no filtered
 * copies, no function results.  On a disk file system its directories
 * cost a journal update and, with online discard, a synchronous discard
 * each; on tmpfs they cost neither. */
static int run_dir_is_small (const struct elastic_agent_spec *spec)
{
    return !spec->redirects.is_map && spec->redirects.value == 0 && !spec->tee.is_map &&
           spec->tee.value == 0 && spec->ndup_out == 0 && spec->ndup_err == 0 &&
           !spec->fn;
}

/* Decide the base directory once the first rendezvous told us our group:
 * --log-dir, else a temporary directory in TMPDIR when it is set, else in
 * /dev/shm when it holds only small files (run_dir_is_small), else in
 * /tmp. */
int agent_setup_base_dir (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int n;

    if (agent->base_dir[0])
        return 0;
    if (spec->log_dir) {
        if (agent->rinfo.group_world_size > 1)
            n = snprintf (agent->base_dir,
                          sizeof (agent->base_dir),
                          "%s/%s/group_%d",
                          spec->log_dir,
                          agent->run_id,
                          agent->rinfo.group_rank);
        else
            n = snprintf (agent->base_dir,
                          sizeof (agent->base_dir),
                          "%s/%s",
                          spec->log_dir,
                          agent->run_id);
        if (n >= (int)sizeof (agent->base_dir) - 64) {
            agent->base_dir[0] = '\0';
            return errprintf (err, "log-dir: '%s' is too long", spec->log_dir);
        }
        if (mkdir_p (agent->base_dir) < 0) {
            errprintf (
                err, "log-dir: cannot create %s: %s", agent->base_dir, strerror (errno));
            agent->base_dir[0] = '\0';
            return -1;
        }
        return 0;
    }
    const char *tmp = getenv ("TMPDIR");
    if ((!tmp || *tmp == '\0') && run_dir_is_small (spec)) {
        /* heartbeats and error files only: shared memory, no disk */
        snprintf (agent->base_dir,
                  sizeof (agent->base_dir),
                  "%s/elastic-%.64s-XXXXXX",
                  SMALL_RUN_DIR,
                  agent->run_id);
        if (mkdtemp (agent->base_dir)) {
            agent->base_is_tmp = 1;
            return 0;
        }
    }
    if (!tmp || *tmp == '\0' || strlen (tmp) > 512)
        tmp = "/tmp";
    snprintf (agent->base_dir,
              sizeof (agent->base_dir),
              "%s/elastic-%.64s-XXXXXX",
              tmp,
              agent->run_id);
    if (!mkdtemp (agent->base_dir)) {
        errprintf (err, "cannot create a directory in %s: %s", tmp, strerror (errno));
        agent->base_dir[0] = '\0';
        return -1;
    }
    agent->base_is_tmp = 1;
    return 0;
}

/* MASTER_ADDR / MASTER_PORT for this attempt, from the rendezvous info and
 * the spec.  Returns ELASTIC_OK, or an error with err. */
int agent_set_master (elastic_agent_t *agent,
                      const struct elastic_agent_rdzv_info *info,
                      elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;

    if (info->master_port < 0) {
        agent->master_port = -1;
        agent->master_addr[0] = '\0';
        agent->port_fresh = 1;
    } else {
        const char *addr = info->master_addr[0] ? info->master_addr
                           : spec->master_addr  ? spec->master_addr
                           : spec->local_addr   ? spec->local_addr
                                                : "127.0.0.1";
        int port = info->master_port > 0 ? info->master_port : spec->master_port;
        snprintf (agent->master_addr, sizeof (agent->master_addr), "%s", addr);
        agent->port_fresh = port == 0;
        if (port == 0) {
            if ((port = probe_port (0)) < 0) {
                return errcodef (err,
                                 ELASTIC_ERR_IO,
                                 "cannot find a free port for MASTER_PORT: %s",
                                 strerror (errno));
            }
        } else if (!agent->started && info->group_rank == 0 && probe_port (port) < 0) {
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "master-port: port %d cannot be used (%s); pick another or leave it out",
                port,
                strerror (errno));
        }
        agent->master_port = port;
    }
    return ELASTIC_OK;
}
