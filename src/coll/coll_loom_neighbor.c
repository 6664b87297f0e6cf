/*
 * Neighbourhood collectives (communicators with a Cartesian, graph or
 * distributed-graph topology): staged on device buffers, delegated on host
 * buffers. Blocks are per neighbour: indegree receive blocks, outdegree send
 * blocks, as the topology counts them (a neighbour listed twice counts twice).
 */
#include "coll_loom_exchange.h"

#include "ompi/mca/topo/base/base.h"

loom_blocks_t mca_coll_loom_neighbor_blocks(ompi_communicator_t *comm)
{
    loom_blocks_t b = {0, 0};
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, &b.in, &b.out)) b.in = b.out = 0;
    return b;
}

LOOM_BLOCKS(neighbor_allgather, mca_coll_loom_neighbor_blocks, 0, mca_coll_loom_no_gpu)
LOOM_BLOCKS(neighbor_alltoall, mca_coll_loom_neighbor_blocks, 1, mca_coll_loom_no_gpu)
LOOM_VECTOR_EXCHANGE(neighbor_alltoallv, mca_coll_loom_neighbor_blocks, mca_coll_loom_no_gpu_v)

static int neighbor_allgatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                                   const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                   ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_allgatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, displs, mca_coll_loom_neighbor_blocks(comm).in);
    LOOM_STAGED_CALL(m, req, neighbor_allgatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs,
                     rdt, comm);
}

LOOM_RUNNER(neighbor_allgatherv, allgatherv)

static int neighbor_alltoallw_any(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                  ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                  const MPI_Aint *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm,
                                  loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_alltoallw, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    const loom_blocks_t b = mca_coll_loom_neighbor_blocks(comm);
    loom_span_t s_span = mca_coll_loom_span_w(scounts, NULL, sdispls, sdts, b.out);
    loom_span_t r_span = mca_coll_loom_span_w(rcounts, NULL, rdispls, rdts, b.in);
    LOOM_STAGED_CALL(m, req, neighbor_alltoallw, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdts, hr,
                     rcounts, rdispls, rdts, comm);
}

LOOM_RUNNER(neighbor_alltoallw, neighbor_alltoallw)
