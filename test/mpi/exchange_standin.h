/*
 * The GPU path stood in on the CPU for the exchanges' host-side checks
 * (exchange_tables_check.c, neighbor_map_check.c): mca_coll_loom_gpu_exec
 * moves exactly the bytes loom's exchange kernel would (an MPI_Alltoallv of
 * MPI_BYTE over the call's byte tables on exec_comm, each block checked to
 * stay inside the buffers the call declares) and runs the call's
 * after-work; what else the linked component code reads is defined here.
 */
#ifndef EXCHANGE_STANDIN_H
#define EXCHANGE_STANDIN_H

#include <mpi.h>

extern MPI_Comm exec_comm; /* the communicator the stand-in moves bytes on */
extern long exec_calls;    /* calls that reached the stand-in */
extern long bad;           /* failures found (the stand-in's and the caller's) */

#endif
