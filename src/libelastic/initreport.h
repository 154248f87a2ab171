/* initreport.h - tell elastic-mpirun which ranks have finished MPI_Init
 * (internal; see initreport.c)
 */
#ifndef ELASTIC_INITREPORT_H
#define ELASTIC_INITREPORT_H

/* If this rank reports (ELASTIC_REPORT_INIT=1) and has not said so yet,
 * and MPI is initialized: append its "rank_initialized" line.  Cheap
 * after the first call that finds MPI initialized; never fails. */
void initreport_mpi_ready (void);

#endif /* ELASTIC_INITREPORT_H */
