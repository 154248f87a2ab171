/* summary.h - the summary of a job: its attempts, failures, time lost */
#ifndef ELASTIC_MPIRUN_SUMMARY_H
#define ELASTIC_MPIRUN_SUMMARY_H

#include "job.h"

/* Print the summary of j, which ended as `end`, to stderr and (unless a
 * dry run) to RUNDIR/summary.txt. */
void summary_print (const struct job *j, const struct job_end *end);

#endif /* ELASTIC_MPIRUN_SUMMARY_H */
