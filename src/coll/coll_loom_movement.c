/*
 * Data movement: barrier, bcast, allgather(v), alltoall(v, w) (gather(v) and
 * scatter(v): coll_loom_rooted.c).
 * Same scheme as the reductions: bcast, allgather(v) and alltoall(v) run on
 * loom's kernels where the GPU path takes them (coll_loom_gpu.h); otherwise
 * host buffers go to the previous module untouched and device buffers are
 * staged through host memory (alltoallw for now).
 */
#include "coll_loom_exchange.h"

#include <stdlib.h>
#include <string.h>

static int barrier_any(ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    LOOM_DELEGATE(m, req, barrier, comm);
}

int mca_coll_loom_barrier(ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return barrier_any(comm, LOOM(module), NULL);
}

int mca_coll_loom_ibarrier(ompi_communicator_t *comm, ompi_request_t **req, mca_coll_base_module_t *module)
{
    return barrier_any(comm, LOOM(module), req);
}

static int bcast_any(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm, loom_t *m,
                     ompi_request_t **req)
{
    const bool is_root = mca_coll_loom_is_root(comm, root);
    const bool on_gpu = (is_root || mca_coll_loom_is_leaf(comm, root)) && mca_coll_loom_on_gpu(buf);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_bcast;
    c.kind = LOOM_GPU_BCAST;
    c.dt = loomUint8;
    c.root = root;
    c.why_not = NULL != req ? "non-blocking collectives are not on loom's kernels yet"
              : count <= 0 ? "nothing to send"
              : mca_coll_loom_map_bytes(dt, count, &c.count);
    c.in = c.out = buf;
    c.out_bytes = c.count;
    c.in_bytes = is_root ? c.count : 0;
    int rc;
    if (mca_coll_loom_gpu_run(m, &c, on_gpu, &rc)) return rc;
    if (!on_gpu) LOOM_DELEGATE(m, req, bcast, buf, count, dt, root, comm);
    mca_coll_loom_probe(m);
    mca_coll_loom_note(m, LOOM_COLL_ID(req, bcast), LOOM_PATH_STAGED);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    loom_stage_t st = {.n = 0};
    void *hb;
    /* The root only sends: nothing to copy back there. */
    rc = mca_coll_loom_stage(&st, true, buf, loom_span_of(&sh, (size_t)count), !is_root, &hb);
    if (MPI_SUCCESS == rc) rc = LOOM_CALL_PREV(m, req, bcast, hb, count, dt, root, comm);
    return mca_coll_loom_unstage(&st, rc, req);
}

int mca_coll_loom_bcast(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    return bcast_any(buf, count, dt, root, comm, LOOM(module), NULL);
}

int mca_coll_loom_ibcast(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm,
                         ompi_request_t **req, mca_coll_base_module_t *module)
{
    return bcast_any(buf, count, dt, root, comm, LOOM(module), req);
}

/* allgather on loom's kernels: blocks of contiguous bytes, in rank order. */
static bool allgather_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                          ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                          bool local_gpu, int *rc)
{
    const size_t n = (size_t)ompi_comm_size(comm);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_allgather;
    c.kind = LOOM_GPU_ALLGATHER;
    c.dt = loomUint8;
    size_t total = 0, sbytes = 0;
    c.why_not = NULL != req ? "non-blocking collectives are not on loom's kernels yet"
              : rcount <= 0 ? "nothing to gather"
              : mca_coll_loom_map_bytes(rdt, (size_t)rcount * n, &total);
    if (NULL == c.why_not && MPI_IN_PLACE != sbuf) c.why_not = mca_coll_loom_map_bytes(sdt, scount, &sbytes);
    c.count = total / n;
    c.out = rbuf;
    c.out_bytes = total;
    c.in = MPI_IN_PLACE == sbuf ? (const char *)rbuf + (size_t)ompi_comm_rank(comm) * c.count : sbuf;
    c.in_bytes = c.count;
    return mca_coll_loom_gpu_run(m, &c, local_gpu, rc);
}

LOOM_BLOCKS(allgather, mca_coll_loom_peer_blocks, 0, allgather_gpu)

/* alltoall(v) on loom's kernels: per-peer blocks of contiguous bytes. */
static void exchange_call(loom_gpu_call_t *c, int coll, ompi_communicator_t *comm, ompi_request_t **req)
{
    memset(c, 0, sizeof(*c));
    c->coll = coll;
    c->kind = LOOM_GPU_ALLTOALLV;
    c->dt = loomUint8;
    c->why_not = OMPI_COMM_IS_INTER(comm) ? mca_coll_loom_why_intercomm
               : NULL != req ? "non-blocking collectives are not on loom's kernels yet"
               : NULL;
}

/* table: 4 x n entries (send counts, send displacements, receive counts,
 * receive displacements, bytes), owned by the caller. In place, MPI reads
 * the send blocks where the receive blocks are. */
static bool alltoallv_run(loom_gpu_call_t *c, const void *sbuf, void *rbuf, size_t *table, int n, loom_t *m,
                          bool local_gpu, int *rc)
{
    size_t in_end = 0, out_end = 0;
    if (NULL == c->why_not) {
        if (MPI_IN_PLACE == sbuf) memcpy(table, table + 2 * n, 2 * sizeof(size_t) * (size_t)n);
        for (int q = 0; q < n; ++q) {
            if (table[q] && table[n + q] + table[q] > in_end) in_end = table[n + q] + table[q];
            if (table[2 * n + q] && table[3 * n + q] + table[2 * n + q] > out_end)
                out_end = table[3 * n + q] + table[2 * n + q];
        }
        c->send_counts = table;
        c->send_displs = table + n;
        c->counts = table + 2 * n;
        c->displs = table + 3 * n;
        c->in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
        c->in_bytes = in_end;
        c->out = rbuf;
        c->out_bytes = out_end;
    }
    return mca_coll_loom_gpu_run(m, c, local_gpu, rc);
}

static bool alltoall_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                         ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                         bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm);
    loom_gpu_call_t c;
    exchange_call(&c, LOOM_COLL_alltoall, comm, req);
    size_t rtotal = 0, stotal = 0;
    if (NULL == c.why_not)
        c.why_not = rcount <= 0 ? "nothing to exchange" : mca_coll_loom_map_bytes(rdt, (size_t)rcount * (size_t)n, &rtotal);
    if (NULL == c.why_not && MPI_IN_PLACE != sbuf &&
        (NULL != mca_coll_loom_map_bytes(sdt, (size_t)scount * (size_t)n, &stotal) || stotal != rtotal))
        c.why_not = "the send type is not contiguous bytes of the receive block's size";
    size_t *table = NULL;
    if (NULL == c.why_not && NULL == (table = malloc(4 * sizeof(size_t) * (size_t)n))) c.why_not = "out of host memory";
    const size_t block = rtotal / (size_t)n;
    for (int q = 0; NULL == c.why_not && q < n; ++q) {
        table[q] = table[2 * n + q] = block;
        table[n + q] = table[3 * n + q] = (size_t)q * block;
    }
    bool took = alltoallv_run(&c, sbuf, rbuf, table, n, m, local_gpu, rc);
    free(table);
    return took;
}

static bool alltoallv_gpu(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *rdispls, ompi_datatype_t *rdt, ompi_communicator_t *comm,
                          loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm);
    loom_gpu_call_t c;
    exchange_call(&c, LOOM_COLL_alltoallv, comm, req);
    size_t ssize = 0, rsize = 0; /* of two elements: displacements count extents, extent == size */
    if (NULL == c.why_not) c.why_not = mca_coll_loom_map_bytes(rdt, 2, &rsize);
    if (NULL == c.why_not && MPI_IN_PLACE != sbuf && NULL != mca_coll_loom_map_bytes(sdt, 2, &ssize))
        c.why_not = "the send type is not contiguous";
    size_t *table = NULL;
    if (NULL == c.why_not && NULL == (table = malloc(4 * sizeof(size_t) * (size_t)n))) c.why_not = "out of host memory";
    for (int q = 0; NULL == c.why_not && q < n; ++q) {
        const bool bad_send = MPI_IN_PLACE != sbuf && (scounts[q] < 0 || sdispls[q] < 0);
        if (bad_send || rcounts[q] < 0 || rdispls[q] < 0) {
            c.why_not = "a negative count or displacement";
            break;
        }
        table[q] = MPI_IN_PLACE != sbuf ? (size_t)scounts[q] * (ssize / 2) : 0;
        table[n + q] = MPI_IN_PLACE != sbuf ? (size_t)sdispls[q] * (ssize / 2) : 0;
        table[2 * n + q] = (size_t)rcounts[q] * (rsize / 2);
        table[3 * n + q] = (size_t)rdispls[q] * (rsize / 2);
    }
    bool took = alltoallv_run(&c, sbuf, rbuf, table, n, m, local_gpu, rc);
    free(table);
    return took;
}

LOOM_BLOCKS(alltoall, mca_coll_loom_peer_blocks, 1, alltoall_gpu)

/* allgatherv on loom's kernels: ragged blocks of contiguous bytes at any
 * displacements (counts and displacements are the same on every rank, so
 * every rank decides alike). */
static bool allgatherv_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                           const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                           ompi_request_t **req, bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_allgatherv;
    c.kind = LOOM_GPU_ALLGATHERV;
    c.dt = loomUint8;
    size_t esize = 0, total = 0, end = 0;
    /* On an intercommunicator rcounts has one entry per remote rank: not read here. */
    for (int q = 0; q < n && !OMPI_COMM_IS_INTER(comm); ++q) total += (size_t)rcounts[q];
    c.why_not = OMPI_COMM_IS_INTER(comm) ? mca_coll_loom_why_intercomm
              : NULL != req ? "non-blocking collectives are not on loom's kernels yet"
              : 0 == total ? "nothing to gather"
              : mca_coll_loom_map_bytes(rdt, 2, &esize); /* displacements count extents: extent == size */
    esize /= 2;
    for (int q = 0; NULL == c.why_not && q < n; ++q)
        if (displs[q] < 0) c.why_not = "a negative displacement";
    size_t *table = NULL;
    if (NULL == c.why_not && NULL == (table = malloc(2 * sizeof(size_t) * (size_t)n))) c.why_not = "out of host memory";
    if (NULL == c.why_not) {
        for (int q = 0; q < n; ++q) {
            table[q] = (size_t)rcounts[q] * esize;
            table[n + q] = (size_t)displs[q] * esize;
            if (table[n + q] + table[q] > end) end = table[n + q] + table[q];
        }
        c.counts = table;
        c.displs = table + n;
        c.count = table[me];
        c.out = rbuf;
        c.out_bytes = end;
        c.in = MPI_IN_PLACE == sbuf ? (const char *)rbuf + table[n + me] : sbuf;
        c.in_bytes = c.count;
        size_t sbytes = 0;
        if (MPI_IN_PLACE != sbuf && (NULL != mca_coll_loom_map_bytes(sdt, scount, &sbytes) || sbytes != c.count))
            c.why_not = "the send type is not contiguous bytes of the receive block's size";
    }
    bool took = mca_coll_loom_gpu_run(m, &c, local_gpu, rc);
    free(table);
    return took;
}

static int allgatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                          const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                          ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    int rc;
    if (allgatherv_gpu(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m, req, s_gpu || r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, allgatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, displs, (int)mca_coll_loom_peers(comm));
    LOOM_STAGED_CALL(m, req, allgatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs, rdt,
                     comm);
}

int mca_coll_loom_allgatherv(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                             const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm,
                             mca_coll_base_module_t *module)
{
    return allgatherv_any(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, LOOM(module), NULL);
}

int mca_coll_loom_iallgatherv(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                              const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm,
                              ompi_request_t **req, mca_coll_base_module_t *module)
{
    return allgatherv_any(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, LOOM(module), req);
}

LOOM_VECTOR_EXCHANGE(alltoallv, mca_coll_loom_peer_blocks, alltoallv_gpu)

static int alltoallw_any(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts,
                         void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts,
                         ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, alltoallw, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    const int n = (int)mca_coll_loom_peers(comm);
    /* In place (sbuf MPI_IN_PLACE: s_gpu false), MPI ignores the send arguments. */
    loom_span_t s_span = s_gpu ? mca_coll_loom_span_w(scounts, sdispls, NULL, sdts, n) : (loom_span_t){0, 0};
    loom_span_t r_span = mca_coll_loom_span_w(rcounts, rdispls, NULL, rdts, n);
    LOOM_STAGED_CALL(m, req, alltoallw, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdts, hr, rcounts,
                     rdispls, rdts, comm);
}

int mca_coll_loom_alltoallw(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts,
                            void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts,
                            ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return alltoallw_any(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm, LOOM(module), NULL);
}

int mca_coll_loom_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts,
                             void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts,
                             ompi_communicator_t *comm, ompi_request_t **req, mca_coll_base_module_t *module)
{
    return alltoallw_any(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm, LOOM(module), req);
}
