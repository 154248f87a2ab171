/* launcher.c - the rank a launcher gave this process (wrapper mode) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "launcher.h"

/* Read an integer variable; -1 if unset or not a non-negative integer. */
static int env_int (const char *name)
{
    const char *s = getenv (name);
    char *end;
    long v;

    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtol (s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 30)
        return -2;
    return (int)v;
}

/* Slurm's "4(x2),3" task counts: the count of node `node`. */
static int slurm_tasks_on_node (const char *s, int node)
{
    int nnodes = env_int ("SLURM_STEP_NUM_NODES"), n, count = -1;
    int *counts;

    if (nnodes < 1)
        nnodes = env_int ("SLURM_NNODES");
    if (nnodes < 1 || nnodes > 1 << 20)
        nnodes = 1 << 16;
    if (!s || !(counts = calloc ((size_t)nnodes, sizeof (*counts))))
        return -1;
    if ((n = slurm_expand_counts (s, counts, nnodes, NULL)) > node)
        count = counts[node];
    free (counts);
    return count;
}

static int check (struct launcher_info *info, elastic_error_t *err)
{
    if (info->rank < 0 || info->size < 1 || info->rank >= info->size)
        return errprintf (
            err,
            "%s launch: rank %d does not fit world size %d (check the launcher's "
            "environment)",
            info->name,
            info->rank,
            info->size);
    if (info->local_rank < 0)
        info->local_rank = 0;
    if (info->local_size < 1)
        info->local_size = 1;
    if (info->local_rank >= info->local_size)
        return errprintf (err,
                          "%s launch: local rank %d does not fit local size %d",
                          info->name,
                          info->local_rank,
                          info->local_size);
    return 1;
}

int launcher_detect (struct launcher_info *info, elastic_error_t *err)
{
    const char *s;

    memset (info, 0, sizeof (*info));
    if (env_int ("OMPI_COMM_WORLD_RANK") != -1) {
        info->name = "Open MPI";
        info->rank = env_int ("OMPI_COMM_WORLD_RANK");
        info->size = env_int ("OMPI_COMM_WORLD_SIZE");
        info->local_rank = env_int ("OMPI_COMM_WORLD_LOCAL_RANK");
        info->local_size = env_int ("OMPI_COMM_WORLD_LOCAL_SIZE");
        if ((s = getenv ("PMIX_NAMESPACE")) && *s)
            snprintf (info->job_id, sizeof (info->job_id), "%s", s);
        else if ((s = getenv ("OMPI_MCA_ess_base_jobid")) && *s)
            snprintf (info->job_id, sizeof (info->job_id), "ompi-%s", s);
        return check (info, err);
    }
    if (env_int ("SLURM_PROCID") != -1 &&
        (getenv ("SLURM_STEP_ID") || getenv ("SLURM_STEPID"))) {
        int node = env_int ("SLURM_NODEID");
        info->name = "Slurm";
        info->rank = env_int ("SLURM_PROCID");
        info->size = env_int ("SLURM_STEP_NUM_TASKS");
        if (info->size < 1)
            info->size = env_int ("SLURM_NTASKS");
        info->local_rank = env_int ("SLURM_LOCALID");
        s = getenv ("SLURM_STEP_TASKS_PER_NODE");
        if (!s)
            s = getenv ("SLURM_TASKS_PER_NODE");
        info->local_size = slurm_tasks_on_node (s, node < 0 ? 0 : node);
        snprintf (info->job_id,
                  sizeof (info->job_id),
                  "slurm-%s.%s",
                  getenv ("SLURM_JOB_ID") ? getenv ("SLURM_JOB_ID") : "0",
                  getenv ("SLURM_STEP_ID") ? getenv ("SLURM_STEP_ID")
                                           : getenv ("SLURM_STEPID"));
        return check (info, err);
    }
    if (env_int ("PMI_RANK") != -1 && env_int ("PMI_SIZE") != -1) {
        info->name = "MPICH Hydra";
        info->rank = env_int ("PMI_RANK");
        info->size = env_int ("PMI_SIZE");
        info->local_rank = env_int ("MPI_LOCALRANKID");
        info->local_size = env_int ("MPI_LOCALNRANKS");
        if ((s = getenv ("PMI_KVSNAME")) && *s)
            snprintf (info->job_id, sizeof (info->job_id), "%s", s);
        return check (info, err);
    }
    if (env_int ("PMIX_RANK") != -1) {
        errprintf (
            err,
            "PMIX_RANK is set but no world size was found (OMPI_COMM_WORLD_SIZE, "
            "SLURM_STEP_NUM_TASKS or PMI_SIZE); use --nproc-per-node for agent mode");
        return -1;
    }
    return 0;
}
