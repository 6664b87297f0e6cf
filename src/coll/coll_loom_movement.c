/*
 * Data movement: barrier, bcast, allgather(v), alltoall(v, w) (gather(v) and
 * scatter(v): coll_loom_rooted.c).
 * Same scheme as the reductions: bcast, allgather(v) and alltoall(v) run on
 * loom's kernels where the GPU path takes them (coll_loom_gpu.h), alltoallw
 * too (a typed block per peer, each of its own type); otherwise host buffers
 * go to the previous module untouched and device buffers are staged through
 * host memory.
 */
#include "coll_loom_blocks.h"
#include "coll_loom_dtgpu.h"
#include "coll_loom_exchange.h"

#include <stdlib.h>
#include <string.h>

static int barrier_any(ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    LOOM_DELEGATE(m, req, barrier, comm);
}

LOOM_RUNNER(barrier, barrier)

/* A root, or a receiver, whose type is not contiguous: its c->count bytes
 * through a packed copy (coll_loom_dtgpu.h), so that it takes the same path
 * as the others (MPI lets each rank's datatype differ, the type signature
 * alike). The root packs its buffer into it; a receiver's is unpacked once
 * the output is there. */
static int bcast_packed(loom_t *m, loom_gpu_call_t *c, void *buf, int count, ompi_datatype_t *dt, bool is_root)
{
    const int zero = 0;
    const loom_typed_blocks_t b = {.user = buf, .dt = dt, .n = 1, .counts = &count, .displs = &zero};
    const size_t at = 0; /* one block, packed from byte 0 */
    loom_gpu_unpack_t unpack;
    char *p = NULL;
    /* the root's copy is its input, and the kernels write it back: not unpacked */
    int rc = mca_coll_loom_pack_out(m, c, &b, &at, c->count, is_root, !is_root, &unpack, &p);
    c->in = c->out = p;
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_gpu_exec(m, c); /* else the others end in loom's time-out error */
    return rc;
}

static int bcast_any(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm, loom_t *m,
                     ompi_request_t **req)
{
    const bool is_root = mca_coll_loom_is_root(comm, root);
    const bool on_gpu = (is_root || mca_coll_loom_is_leaf(comm, root)) && mca_coll_loom_on_gpu(buf);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_ID(req, bcast);
    c.kind = loomCollBroadcast;
    c.dt = loomUint8;
    c.root = root;
    c.req = req;
    /* Bytes alone decide (alike on every rank); a type not contiguous here is packed. */
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    c.count = count > 0 ? size * (size_t)count : 0;
    c.why_not = 0 == c.count ? "nothing to send" : NULL;
    c.in = c.out = buf;
    c.out_bytes = c.count;
    c.in_bytes = is_root ? c.count : 0;
    int rc;
    if (mca_coll_loom_gpu_takes(m, &c, on_gpu, &rc)) {
        if (MPI_SUCCESS != rc) return rc;
        /* two elements contiguous (no gap, extent == size): any number is */
        return mca_coll_loom_contiguous(dt, count > 1 ? 2 : count) ? mca_coll_loom_gpu_exec(m, &c)
                                                                    : bcast_packed(m, &c, buf, count, dt, is_root);
    }
    if (!on_gpu) LOOM_DELEGATE(m, req, bcast, buf, count, dt, root, comm);
    mca_coll_loom_probe_call(m, req);
    mca_coll_loom_note(m, LOOM_COLL_ID(req, bcast), LOOM_PATH_STAGED);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    loom_stage_t st = {.n = 0, .changed_only = true}; /* coll_loom_stage.h */
    void *hb;
    /* The root only sends: nothing to copy back there. */
    const loom_span_t span = loom_span_of(&sh, (size_t)count);
    rc = mca_coll_loom_stage(&st, true, buf, span, !is_root, &hb);
    if (MPI_SUCCESS == rc) rc = LOOM_CALL_PREV(m, req, bcast, hb, count, dt, root, comm);
    return mca_coll_loom_request_unstage(m, &st, rc, req);
}

LOOM_RUNNER(bcast, bcast)

/* allgather on loom's kernels: blocks of bytes, in rank order. The bytes
 * alone decide (alike on every rank); types not contiguous here are packed
 * (mca_coll_loom_gather_bytes). */
static bool allgather_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                          ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                          bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_ID(req, allgather);
    c.kind = loomCollAllGather;
    c.dt = loomUint8;
    c.req = req;
    size_t rsize = 0;
    ompi_datatype_type_size(rdt, &rsize);
    c.why_not = OMPI_COMM_IS_INTER(comm) ? mca_coll_loom_why_intercomm
              : rcount <= 0 || 0 == rsize ? "nothing to gather" : NULL;
    c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf; /* for the GPU choice; set again with the blocks */
    c.out = rbuf;
    if (!mca_coll_loom_gpu_takes(m, &c, local_gpu, rc)) return false;
    if (MPI_SUCCESS != *rc) return true;
    int *t = mca_coll_loom_exchange_ints(m, n);
    if (NULL == t) {
        *rc = MPI_ERR_NO_MEM;
        return true;
    }
    const int zero = 0;
    for (int q = 0; q < n; ++q) t[q] = rcount;
    const loom_typed_blocks_t snd = {.user = (void *)sbuf, .dt = sdt, .n = 1, .counts = &scount, .displs = &zero};
    /* block q at q x rcount extents, in size_t: (n - 1) x rcount may pass INT_MAX */
    const loom_typed_blocks_t rcv = {.user = rbuf, .dt = rdt, .n = n, .counts = t, .stride = (size_t)rcount};
    *rc = mca_coll_loom_gather_bytes(m, &c, MPI_IN_PLACE == sbuf ? NULL : &snd, &rcv, me);
    return true;
}

LOOM_BLOCKS(allgather, mca_coll_loom_peer_blocks, 0, allgather_gpu)

/* alltoall on loom's kernels: an exchange of typed blocks
 * (coll_loom_blocks.h), whatever this rank's datatypes and displacements. In
 * place, MPI reads the send blocks where the receive blocks are. */
static bool alltoall_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                         ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                         bool local_gpu, int *rc)
{
    loom_gpu_call_t c;
    mca_coll_loom_exchange_call(&c, LOOM_COLL_alltoall, comm, req, sbuf, local_gpu, rbuf, local_gpu);
    size_t rsize = 0;
    ompi_datatype_type_size(rdt, &rsize);
    /* rcount x its type's size, alike on every rank (a zero-size type may come with any count) */
    if (NULL == c.why_not && (rcount <= 0 || 0 == rsize)) c.why_not = "nothing to exchange";
    if (!mca_coll_loom_gpu_takes(m, &c, local_gpu, rc)) return false;
    if (MPI_SUCCESS != *rc) return true;
    const int n = ompi_comm_size(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    int *ints = mca_coll_loom_exchange_ints(m, n);
    if (NULL == ints) {
        *rc = MPI_ERR_NO_MEM;
        return true;
    }
    for (int q = 0; q < n; ++q) ints[q] = in_place ? rcount : scount, ints[n + q] = rcount;
    /* block q at q x count extents, in size_t: (n - 1) x count may pass INT_MAX */
    const loom_typed_blocks_t snd = {.user = in_place ? rbuf : (void *)sbuf, .dt = in_place ? rdt : sdt, .n = n,
                                     .counts = ints, .stride = (size_t)ints[0]};
    const loom_typed_blocks_t rcv = {.user = rbuf, .dt = rdt, .n = n, .counts = ints + n, .stride = (size_t)rcount};
    c.agreed_block = (size_t)rcount * rsize; /* every rank's block, by MPI's matching rule */
    *rc = mca_coll_loom_exchange_blocks(m, &c, &snd, &rcv);
    return true;
}

/* alltoallv and alltoallw on loom's kernels: the exchange of this rank's
 * typed blocks snd and rcv (in place, MPI reads the send blocks where the
 * receive blocks are: rcv both ways). */
static bool ragged_exchange(int coll, const void *sbuf, const loom_typed_blocks_t *snd, void *rbuf,
                            const loom_typed_blocks_t *rcv, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                            bool local_gpu, int *rc)
{
    loom_gpu_call_t c;
    mca_coll_loom_exchange_call(&c, coll, comm, req, sbuf, local_gpu, rbuf, local_gpu);
    if (!mca_coll_loom_gpu_takes(m, &c, local_gpu, rc)) return false;
    if (MPI_SUCCESS == *rc) *rc = mca_coll_loom_exchange_blocks(m, &c, MPI_IN_PLACE == sbuf ? rcv : snd, rcv);
    return true;
}

static bool alltoallv_gpu(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *rdispls, ompi_datatype_t *rdt, ompi_communicator_t *comm,
                          loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm); /* an intercommunicator stays off the GPU path */
    const loom_typed_blocks_t snd = {.user = (void *)sbuf, .dt = sdt, .n = n, .counts = scounts, .displs = sdispls};
    const loom_typed_blocks_t rcv = {.user = rbuf, .dt = rdt, .n = n, .counts = rcounts, .displs = rdispls};
    return ragged_exchange(LOOM_COLL_alltoallv, sbuf, &snd, rbuf, &rcv, comm, m, req, local_gpu, rc);
}

LOOM_BLOCKS(alltoall, mca_coll_loom_peer_blocks, 1, alltoall_gpu)

/* allgatherv on loom's kernels: ragged blocks of bytes. The counts' bytes
 * alone decide (alike on every rank: the type signatures match); this
 * rank's types and displacements only shape its own tables, packed where
 * they must be (mca_coll_loom_gather_bytes). */
static bool allgatherv_gpu(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                           const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                           ompi_request_t **req, bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = LOOM_COLL_ID(req, allgatherv);
    c.kind = loomCollAllGather;
    c.ragged = true;
    c.dt = loomUint8;
    size_t rsize = 0, total = 0;
    ompi_datatype_type_size(rdt, &rsize);
    /* On an intercommunicator rcounts has one entry per remote rank: not read here. */
    for (int q = 0; q < n && !OMPI_COMM_IS_INTER(comm); ++q) total += rcounts[q] > 0 ? (size_t)rcounts[q] * rsize : 0;
    c.req = req;
    c.why_not = OMPI_COMM_IS_INTER(comm) ? mca_coll_loom_why_intercomm : 0 == total ? "nothing to gather" : NULL;
    c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf; /* for the GPU choice; set again with the blocks */
    c.out = rbuf;
    if (!mca_coll_loom_gpu_takes(m, &c, local_gpu, rc)) return false;
    if (MPI_SUCCESS != *rc) return true;
    const int zero = 0;
    const loom_typed_blocks_t snd = {.user = (void *)sbuf, .dt = sdt, .n = 1, .counts = &scount, .displs = &zero};
    const loom_typed_blocks_t rcv = {.user = rbuf, .dt = rdt, .n = n, .counts = rcounts, .displs = displs};
    *rc = mca_coll_loom_gather_bytes(m, &c, MPI_IN_PLACE == sbuf ? NULL : &snd, &rcv, me);
    return true;
}

static int allgatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                          const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm, loom_t *m,
                          ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf);
    bool r_gpu = mca_coll_loom_v_on_gpu(rbuf, rdt, rcounts, displs, (int)mca_coll_loom_peers(comm));
    int rc;
    if (allgatherv_gpu(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m, req, s_gpu || r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, allgatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of_v(&rsh, rcounts, displs, (int)mca_coll_loom_peers(comm));
    LOOM_STAGED_CALL(m, req, allgatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs, rdt,
                     comm);
}

LOOM_RUNNER(allgatherv, allgatherv)

LOOM_VECTOR_EXCHANGE(alltoallv, mca_coll_loom_peer_blocks, alltoallv_gpu)

/* alltoallw on loom's kernels: alltoallv's exchange, with block q of its own
 * type at a displacement in bytes (a rank whose blocks are not all
 * contiguous bytes packs them: coll_loom_pack.h). Block q's bytes at both
 * ends agree by MPI's type-signature rule, as alltoallv's do. */
static bool alltoallw_gpu(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts,
                          void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts,
                          ompi_communicator_t *comm, loom_t *m, ompi_request_t **req, bool local_gpu, int *rc)
{
    const int n = ompi_comm_size(comm);
    const loom_typed_blocks_t snd = {.user = (void *)sbuf, .dts = sdts, .n = n, .counts = scounts, .displs = sdispls};
    const loom_typed_blocks_t rcv = {.user = rbuf, .dts = rdts, .n = n, .counts = rcounts, .displs = rdispls};
    return ragged_exchange(LOOM_COLL_alltoallw, sbuf, &snd, rbuf, &rcv, comm, m, req, local_gpu, rc);
}

static int alltoallw_any(const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts,
                         void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts,
                         ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    const int n = (int)mca_coll_loom_peers(comm);
    /* In place (sbuf MPI_IN_PLACE), MPI ignores the send arguments. */
    loom_span_t s_span = MPI_IN_PLACE == sbuf ? (loom_span_t){0, 0} : mca_coll_loom_span_w(scounts, sdispls, NULL, sdts, n);
    loom_span_t r_span = mca_coll_loom_span_w(rcounts, rdispls, NULL, rdts, n);
    bool s_gpu = mca_coll_loom_span_on_gpu(sbuf, s_span), r_gpu = mca_coll_loom_span_on_gpu(rbuf, r_span);
    int rc;
    if (alltoallw_gpu(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm, m, req, s_gpu || r_gpu, &rc))
        return rc;
    if (!s_gpu && !r_gpu)
        LOOM_DELEGATE(m, req, alltoallw, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    if (!s_gpu) s_span = (loom_span_t){0, 0};
    LOOM_STAGED_CALL(m, req, alltoallw, s_gpu, s_span, r_gpu, r_span, hs, scounts, sdispls, sdts, hr, rcounts,
                     rdispls, rdts, comm);
}

LOOM_RUNNER(alltoallw, alltoallw)
