/* probe.h - what the environment offers: Open MPI's flavour, ULFM, Slurm */
#ifndef ELASTIC_MPIRUN_PROBE_H
#define ELASTIC_MPIRUN_PROBE_H

#include <stddef.h>

#include "hostlist.h"

struct mpi_info {
    char path[4096];  /* the mpirun that will run */
    char version[64]; /* "5.0.7" */
    int major;        /* 4, 5, ... */
    int ulfm;         /* --with-ft ulfm works */
    char how[256];    /* how ulfm was decided */
};

/* Run argv (no shell) with stdin from /dev/null, capture stdout (and
 * stderr if merge) into out (NUL-terminated, truncated to size), wait at
 * most timeout seconds.  Returns the exit status (0..255, 128+signal), or
 * -1 with errno if it could not be started (ENOENT: not found) or timed out
 * (ETIMEDOUT). */
int run_capture (char *const argv[], int merge, double timeout, char *out, size_t size);

/* Parse the first line of `mpirun --version` ("mpirun (Open MPI) 5.0.7",
 * "mpirun.openmpi (OpenRTE) 4.1.4").  Returns 0 with version/major set, or
 * -1 if it is not Open MPI's. */
int probe_parse_version (const char *text, char *version, size_t size, int *major);

/* Find and query mpirun: `path` (must be executable), its version, and
 * whether it has ULFM (ompi_info beside it says "FT MPI support: yes"; else
 * the configure-time answer when path is the configured mpirun).  want_ulfm
 * is -1 auto, 0 no, 1 yes (an error if it has none).  Returns 0, or -1 with
 * err. */
int probe_mpi (const char *path,
               int want_ulfm,
               struct mpi_info *mi,
               elastic_error_t *err);

/* Inside a Slurm allocation (SLURM_JOB_ID and a node list set)? */
int slurm_inside (void);

/* Add the allocation's hosts (scontrol show hostnames) with slots from
 * SLURM_TASKS_PER_NODE, and mark those sinfo shows down.  Returns the
 * number of hosts, or -1 with err. */
int slurm_load_hosts (struct hostlist *hl, elastic_error_t *err);

/* Re-query sinfo and mark hosts Slurm now shows down.  Returns how many it
 * marked (0 when sinfo cannot be asked). */
int slurm_refresh_down (struct hostlist *hl);

#endif /* ELASTIC_MPIRUN_PROBE_H */
