/*
 * Neighbourhood collectives (communicators with a Cartesian, graph or
 * distributed-graph topology): staged on device buffers, delegated on host
 * buffers. Blocks are per neighbour: indegree receive blocks, outdegree send
 * blocks, as the topology counts them (a neighbour listed twice counts twice).
 */
#include "coll_loom_gpu.h"
#include "coll_loom_stage.h"

#include "ompi/mca/topo/base/base.h"

static void degrees(ompi_communicator_t *comm, int *in, int *out)
{
    *in = *out = 0;
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, in, out)) *in = *out = 0;
}

/* neighbor_allgather (one send block) and neighbor_alltoall (one per out-neighbour). */
#define LOOM_NEIGHBOR_BLOCKS(name, alltoall)                                                                  \
    static int name##_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,          \
                          ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)    \
    {                                                                                                          \
        bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);                           \
        if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, name, sbuf, scount, sdt, rbuf, rcount, rdt, comm);         \
        int in, out;                                                                                           \
        degrees(comm, &in, &out);                                                                              \
        loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);                      \
        loom_span_t s_span = loom_span_of(&ssh, (size_t)scount * (size_t)((alltoall) ? out : 1));              \
        loom_span_t r_span = loom_span_of(&rsh, (size_t)rcount * (size_t)in);                                  \
        LOOM_STAGED_CALL(m, req, name, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcount, rdt, comm);  \
    }                                                                                                          \
    int mca_coll_loom_##name(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,      \
                             ompi_datatype_t *rdt, ompi_communicator_t *comm, mca_coll_base_module_t *module)  \
    {                                                                                                          \
        return name##_any(sbuf, scount, sdt, rbuf, rcount, rdt, comm, LOOM(module), NULL);                     \
    }                                                                                                          \
    int mca_coll_loom_i##name(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,     \
                              ompi_datatype_t *rdt, ompi_communicator_t *comm, ompi_request_t **req,           \
                              mca_coll_base_module_t *module)                                                  \
    {                                                                                                          \
        return name##_any(sbuf, scount, sdt, rbuf, rcount, rdt, comm, LOOM(module), req);                      \
    }

LOOM_NEIGHBOR_BLOCKS(neighbor_allgather, 0)
LOOM_NEIGHBOR_BLOCKS(neighbor_alltoall, 1)

static int neighbor_allgatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                                   const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                   ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_allgatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    int in, out;
    degrees(comm, &in, &out);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, displs, in);
    LOOM_STAGED_CALL(m, req, neighbor_allgatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs,
                     rdt, comm);
}

int mca_coll_loom_neighbor_allgatherv(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                                      const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                      ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return neighbor_allgatherv_any(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, LOOM(module), NULL);
}

int mca_coll_loom_ineighbor_allgatherv(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                                       const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                       ompi_communicator_t *comm, ompi_request_t **req, mca_coll_base_module_t *module)
{
    return neighbor_allgatherv_any(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, LOOM(module), req);
}

static int neighbor_alltoallv_any(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt,
                                  void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *rdt,
                                  ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_alltoallv, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm);
    int in, out;
    degrees(comm, &in, &out);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of_v(&ssh, scounts, sdispls, out);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, rdispls, in);
    LOOM_STAGED_CALL(m, req, neighbor_alltoallv, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdt, hr, rcounts,
                     rdispls, rdt, comm);
}

int mca_coll_loom_neighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt,
                                     void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *rdt,
                                     ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return neighbor_alltoallv_any(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm, LOOM(module), NULL);
}

int mca_coll_loom_ineighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt,
                                      void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *rdt,
                                      ompi_communicator_t *comm, ompi_request_t **req, mca_coll_base_module_t *module)
{
    return neighbor_alltoallv_any(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm, LOOM(module), req);
}

static int neighbor_alltoallw_any(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                  ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                  const MPI_Aint *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm,
                                  loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, neighbor_alltoallw, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    int in, out;
    degrees(comm, &in, &out);
    loom_span_t s_span = mca_coll_loom_span_w(scounts, NULL, sdispls, sdts, out);
    loom_span_t r_span = mca_coll_loom_span_w(rcounts, NULL, rdispls, rdts, in);
    LOOM_STAGED_CALL(m, req, neighbor_alltoallw, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdts, hr,
                     rcounts, rdispls, rdts, comm);
}

int mca_coll_loom_neighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                     ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                     const MPI_Aint *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module)
{
    return neighbor_alltoallw_any(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm, LOOM(module),
                                  NULL);
}

int mca_coll_loom_ineighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                      ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                      const MPI_Aint *rdispls, ompi_datatype_t *const *rdts,
                                      ompi_communicator_t *comm, ompi_request_t **req, mca_coll_base_module_t *module)
{
    return neighbor_alltoallw_any(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm, LOOM(module),
                                  req);
}
