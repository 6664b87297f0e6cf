/*
 * Generators of the staged per-peer collectives, shared by the plain ones
 * (allgather, alltoall, alltoallv: a block per peer, the remote group's ranks
 * on an intercommunicator) and the neighbourhood ones (a block per in/out
 * neighbour of the communicator's topology). Host buffers go to the previous
 * module untouched; device buffers are staged.
 */
#ifndef COLL_LOOM_EXCHANGE_H
#define COLL_LOOM_EXCHANGE_H

#include "coll_loom_gpu.h"
#include "coll_loom_route.h"

/* Receive blocks (in) and send blocks (out) of a per-peer collective. */
typedef struct {
    int in, out;
} loom_blocks_t;

/* One per peer, both ways. */
static inline loom_blocks_t mca_coll_loom_peer_blocks(ompi_communicator_t *comm)
{
    const int n = (int)mca_coll_loom_peers(comm);
    return (loom_blocks_t){n, n};
}

/* One per neighbour of the communicator's topology (a neighbour listed
 * twice counts twice; coll_loom_neighbor.c). */
loom_blocks_t mca_coll_loom_neighbor_blocks(ompi_communicator_t *comm);

/* For collectives loom's kernels do not run (yet). */
static inline bool mca_coll_loom_no_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                                        ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                                        ompi_request_t **req, bool local_gpu, int *rc)
{
    return false;
}

/* allgather-like (one send block: per_peer_send 0) and alltoall-like (a send
 * block per out-block) collectives of fixed-size blocks; gpu_try may take the
 * call onto loom's kernels first. */
#define LOOM_BLOCKS(name, blocks_of, per_peer_send, gpu_try)                                                 \
    static int name##_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,         \
                          ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)   \
    {                                                                                                         \
        bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);                          \
        int rc;                                                                                               \
        if (gpu_try(sbuf, scount, sdt, rbuf, rcount, rdt, comm, m, req, s_gpu || r_gpu, &rc)) return rc;      \
        if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, name, sbuf, scount, sdt, rbuf, rcount, rdt, comm);        \
        const loom_blocks_t b = blocks_of(comm);                                                              \
        loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);                     \
        loom_span_t s_span = loom_span_of(&ssh, (size_t)scount * (size_t)((per_peer_send) ? b.out : 1));      \
        loom_span_t r_span = loom_span_of(&rsh, (size_t)rcount * (size_t)b.in);                               \
        LOOM_STAGED_CALL(m, req, name, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcount, rdt, comm); \
    }                                                                                                         \
    LOOM_RUNNER(name, allgather)

/* The same for ragged ones. */
static inline bool mca_coll_loom_no_gpu_v(const void *sbuf, const int *scounts, const int *sdispls,
                                          ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                                          ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                                          ompi_request_t **req, bool local_gpu, int *rc)
{
    return false;
}

/* alltoallv-like collectives: ragged blocks at displacements (in extents);
 * gpu_try may take the call onto loom's kernels first. In place (sbuf
 * MPI_IN_PLACE, never on the GPU) MPI ignores the send arguments, so they
 * are not read. The spans, computed once, say where each side's bytes are
 * (mca_coll_loom_span_on_gpu) and what staging copies. */
#define LOOM_VECTOR_EXCHANGE(name, blocks_of, gpu_try)                                                        \
    static int name##_any(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt,     \
                          void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *rdt,           \
                          ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)                         \
    {                                                                                                         \
        const loom_blocks_t b = blocks_of(comm);                                                              \
        loom_span_t s_span = {0, 0}, r_span = {0, 0};                                                         \
        if (MPI_IN_PLACE != sbuf && NULL != sbuf) {                                                           \
            const loom_type_shape_t ssh = mca_coll_loom_shape(sdt);                                           \
            s_span = loom_span_of_v(&ssh, scounts, sdispls, b.out);                                           \
        }                                                                                                     \
        if (NULL != rbuf) {                                                                                   \
            const loom_type_shape_t rsh = mca_coll_loom_shape(rdt);                                           \
            r_span = loom_span_of_v(&rsh, rcounts, rdispls, b.in);                                            \
        }                                                                                                     \
        const bool s_gpu = mca_coll_loom_span_on_gpu(sbuf, s_span);                                           \
        const bool r_gpu = mca_coll_loom_span_on_gpu(rbuf, r_span);                                           \
        int rc;                                                                                               \
        if (gpu_try(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm, m, req, s_gpu || r_gpu,   \
                    &rc))                                                                                     \
            return rc;                                                                                        \
        if (!s_gpu && !r_gpu)                                                                                 \
            LOOM_DELEGATE(m, req, name, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm);      \
        if (!s_gpu) s_span = (loom_span_t){0, 0};                                                             \
        LOOM_STAGED_CALL(m, req, name, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdt, hr, rcounts,  \
                         rdispls, rdt, comm);                                                                 \
    }                                                                                                         \
    LOOM_RUNNER(name, alltoallv)

#endif
