/*
 * The tests write persistent collectives in MPI-4's words (MPI_Allreduce_init
 * and friends), which Open MPI 5 has in mpi.h. Open MPI 4.1 has the same
 * calls as its pcollreq extension (MPIX_*_init in mpi-ext.h): there the
 * standard names are mapped onto them. HAVE_PERSISTENT_COLLS: 1 where
 * either exists. (MPI_VERSION is 3 on both lines: key on OMPI_MAJOR_VERSION.)
 */
#ifndef LOOM_TEST_MPI4_PERSISTENT_H
#define LOOM_TEST_MPI4_PERSISTENT_H

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define HAVE_PERSISTENT_COLLS 1
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define HAVE_PERSISTENT_COLLS 1
#define MPI_Allgather_init MPIX_Allgather_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define MPI_Allreduce_init MPIX_Allreduce_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define MPI_Alltoallw_init MPIX_Alltoallw_init
#define MPI_Barrier_init MPIX_Barrier_init
#define MPI_Bcast_init MPIX_Bcast_init
#define MPI_Exscan_init MPIX_Exscan_init
#define MPI_Gather_init MPIX_Gather_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define MPI_Reduce_init MPIX_Reduce_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define MPI_Scan_init MPIX_Scan_init
#define MPI_Scatter_init MPIX_Scatter_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#define MPI_Neighbor_allgather_init MPIX_Neighbor_allgather_init
#define MPI_Neighbor_allgatherv_init MPIX_Neighbor_allgatherv_init
#define MPI_Neighbor_alltoall_init MPIX_Neighbor_alltoall_init
#define MPI_Neighbor_alltoallv_init MPIX_Neighbor_alltoallv_init
#define MPI_Neighbor_alltoallw_init MPIX_Neighbor_alltoallw_init
#else
#define HAVE_PERSISTENT_COLLS 0
#endif

#endif
