/* launcher.h - the rank a launcher gave this process (wrapper mode)
 *
 * `mpirun -n 8 elastic-exec ./app` or `srun elastic-exec ./app` start one
 * elastic-exec per task; each supervises one worker whose rank is the
 * task's.  Recognised, in order: Open MPI / PRRTE (OMPI_COMM_WORLD_*),
 * Slurm tasks (SLURM_PROCID within a step), MPICH Hydra (PMI_RANK,
 * MPI_LOCALRANKID), and PMIx (PMIX_RANK with one of the sizes above).
 */
#ifndef ELASTIC_EXEC_LAUNCHER_H
#define ELASTIC_EXEC_LAUNCHER_H

#include <stddef.h>

#include "common/error.h"

struct launcher_info {
    const char *name; /* "Open MPI", "Slurm", ... */
    int rank;
    int size;
    int local_rank;
    int local_size;
    char job_id[128]; /* shared by every task of the job, "" if unknown */
};

/* Fill *info from the environment.  Returns 1 if a launcher was found, 0
 * if none, -1 with one line in err if its variables are inconsistent. */
int launcher_detect (struct launcher_info *info, elastic_error_t *err);

#endif /* ELASTIC_EXEC_LAUNCHER_H */
