/*
 * Neighbourhood collectives (communicators with a Cartesian, graph or
 * distributed-graph topology). Blocks are per neighbour: indegree receive
 * blocks, outdegree send blocks, as the topology counts them (a neighbour
 * listed twice counts twice). On device buffers they run as loom's exchange
 * with a block per rank (coll_loom_neighbor_map.h), their types packed as
 * the other exchanges' are (on the GPU where it can: coll_loom_dtgpu.h);
 * a neighbourhood that does not fit the exchange is staged; host buffers go
 * to the previous module.
 */
#include "coll_loom_blocks.h"
#include "coll_loom_exchange.h"
#include "coll_loom_neighbor_map.h"

#include "ompi/mca/topo/base/base.h"

_Static_assert(LOOM_COLL_ineighbor_alltoallw - LOOM_COLL_neighbor_alltoallw ==
                       LOOM_COLL_iallgather - LOOM_COLL_allgather &&
                   LOOM_COLL_ineighbor_allgather - LOOM_COLL_neighbor_allgather ==
                       LOOM_COLL_iallgather - LOOM_COLL_allgather,
               "mca_coll_loom_exchange_call finds the non-blocking twin at the allgather's offset");

loom_blocks_t mca_coll_loom_neighbor_blocks(ompi_communicator_t *comm)
{
    loom_blocks_t b = {0, 0};
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, &b.in, &b.out)) b.in = b.out = 0;
    return b;
}

/* The call on loom's exchange, its blocks as a's arguments give them
 * (mca_coll_loom_neighbor_blocks_of). False where the exchange does not
 * take it (alike on every rank: the agreed fit and mca_coll_loom_gpu_takes'
 * choice). */
static bool neighbor_exchange(int coll, const mca_coll_loom_call_args_t *a, loom_t *m, ompi_request_t **req,
                              bool local_gpu, int *rc)
{
    loom_gpu_call_t c;
    mca_coll_loom_exchange_call(&c, coll, a->comm, req, a->sbuf, local_gpu, a->rbuf, local_gpu);
    if (!mca_coll_loom_gpu_takes(m, &c, local_gpu, rc)) return false;
    if (MPI_SUCCESS != *rc) return true;
    if (1 != m->neighbor_fit || NULL == m->neighbors) {
        if (local_gpu)
            mca_coll_loom_report_why(m, c.coll, "a rank listed twice among some rank's neighbours (a periodic "
                                                "Cartesian dimension of 1 or 2 ranks, or parallel graph edges): "
                                                "loom's exchange moves one block per pair of ranks");
        return false;
    }
    if (MPI_IN_PLACE == a->sbuf || MPI_IN_PLACE == a->rbuf) { /* not for neighbourhood collectives */
        *rc = MPI_ERR_BUFFER;
        return true;
    }
    loom_typed_blocks_t snd, rcv;
    int scount, rcount;
    mca_coll_loom_neighbor_blocks_of(a, coll, m->neighbors->indeg, m->neighbors->outdeg, &snd, &scount, &rcv,
                                     &rcount);
    const loom_typed_blocks_t by_rank_snd = mca_coll_loom_neighbor_by_rank(m->neighbors, 0, &snd, scount);
    const loom_typed_blocks_t by_rank_rcv = mca_coll_loom_neighbor_by_rank(m->neighbors, 1, &rcv, rcount);
    *rc = mca_coll_loom_exchange_blocks(m, &c, &by_rank_snd, &by_rank_rcv);
    return true;
}

static bool neighbor_allgather_gpu(LOOM_PARAMS_allgather, loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const mca_coll_loom_call_args_t a = {LOOM_FIELDS_allgather};
    return neighbor_exchange(LOOM_COLL_neighbor_allgather, &a, m, req, local_gpu, rc);
}

static bool neighbor_alltoall_gpu(LOOM_PARAMS_alltoall, loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const mca_coll_loom_call_args_t a = {LOOM_FIELDS_alltoall};
    return neighbor_exchange(LOOM_COLL_neighbor_alltoall, &a, m, req, local_gpu, rc);
}

static bool neighbor_alltoallv_gpu(LOOM_PARAMS_alltoallv, loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const mca_coll_loom_call_args_t a = {LOOM_FIELDS_alltoallv};
    return neighbor_exchange(LOOM_COLL_neighbor_alltoallv, &a, m, req, local_gpu, rc);
}

LOOM_BLOCKS(neighbor_allgather, mca_coll_loom_neighbor_blocks, 0, neighbor_allgather_gpu)
LOOM_BLOCKS(neighbor_alltoall, mca_coll_loom_neighbor_blocks, 1, neighbor_alltoall_gpu)
LOOM_VECTOR_EXCHANGE(neighbor_alltoallv, mca_coll_loom_neighbor_blocks, neighbor_alltoallv_gpu)

static int neighbor_allgatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                                   const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                   ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    const loom_blocks_t b = mca_coll_loom_neighbor_blocks(comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, displs, b.in);
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_span_on_gpu(rbuf, r_span);
    const mca_coll_loom_call_args_t a = {LOOM_FIELDS_allgatherv};
    int rc;
    if (neighbor_exchange(LOOM_COLL_neighbor_allgatherv, &a, m, req, s_gpu || r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_allgatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    LOOM_STAGED_CALL(m, req, neighbor_allgatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs,
                     rdt, comm);
}

LOOM_RUNNER(neighbor_allgatherv, allgatherv)

static int neighbor_alltoallw_any(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                  ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                  const MPI_Aint *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm,
                                  loom_t *m, ompi_request_t **req)
{
    const loom_blocks_t b = mca_coll_loom_neighbor_blocks(comm);
    loom_span_t s_span = mca_coll_loom_span_w(scounts, NULL, sdispls, sdts, b.out);
    loom_span_t r_span = mca_coll_loom_span_w(rcounts, NULL, rdispls, rdts, b.in);
    bool s_gpu = mca_coll_loom_span_on_gpu(sbuf, s_span), r_gpu = mca_coll_loom_span_on_gpu(rbuf, r_span);
    const mca_coll_loom_call_args_t a = {LOOM_FIELDS_neighbor_alltoallw};
    int rc;
    if (neighbor_exchange(LOOM_COLL_neighbor_alltoallw, &a, m, req, s_gpu || r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_alltoallw, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    LOOM_STAGED_CALL(m, req, neighbor_alltoallw, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdts, hr,
                     rcounts, rdispls, rdts, comm);
}

LOOM_RUNNER(neighbor_alltoallw, neighbor_alltoallw)
