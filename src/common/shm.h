/* shm.h - the /dev/shm segments of Open MPI ranks, as their maps show them
 *
 * Open MPI names a job's shared-memory segments after the job
 * (sm_segment.HOST.UID.JOBID.RANK): everything up to the last dot, with at
 * least four dots, is the job's prefix.  elastic-exec and elastic-mpirun
 * read the prefixes from the ranks' /proc/PID/maps while they live, to
 * remove what a killed job leaves.
 */
#ifndef ELASTIC_COMMON_SHM_H
#define ELASTIC_COMMON_SHM_H

#include <stddef.h>

/* If the /proc/PID/maps line maps a /dev/shm file named as above, copy
 * its prefix (the name up to and with its last dot) to buf and return 1;
 * else (or if buf is too small) return 0. */
int shm_prefix_of_maps_line (const char *line, char *buf, size_t size);

#endif /* ELASTIC_COMMON_SHM_H */
