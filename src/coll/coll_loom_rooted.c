/*
 * Rooted data movement: gather(v) and scatter(v).
 *
 * On loom's kernels a rooted call is an exchange (coll_loom_blocks.h) in
 * which only the root's pairs carry bytes: each rank sends the root one block
 * (gather), or the root sends each rank one (scatter). The choice cannot
 * depend on counts or datatypes anyway: the receive arguments of a gather
 * (send arguments of a scatter) exist only at the root. Calls off the GPU
 * path are staged (device buffers) or delegated (host buffers) as before.
 */
#include "coll_loom_blocks.h"
#include "coll_loom_route.h"

#include <stdlib.h>
#include <string.h>

/* A rooted call's MPI arguments; NULL scounts/rcounts: the fixed-count form. */
typedef struct {
    bool gather; /* else scatter */
    const void *sbuf;
    int scount;
    const int *scounts, *sdispls;
    ompi_datatype_t *sdt;
    void *rbuf;
    int rcount;
    const int *rcounts, *rdispls;
    ompi_datatype_t *rdt;
    int root;
} rooted_args_t;

/* The root's n blocks of one side (its receive side for a gather, its send
 * side for a scatter) into b's counts (and displs, v-forms; the others at q x
 * count extents, in size_t: (n - 1) x count may pass INT_MAX); in place the
 * root's own block is not moved. */
static void root_blocks(const rooted_args_t *a, int n, bool in_place, loom_typed_blocks_t *b)
{
    const int count = a->gather ? a->rcount : a->scount;
    const int *vc = a->gather ? a->rcounts : a->scounts, *vd = a->gather ? a->rdispls : a->sdispls;
    int *counts = (int *)b->counts, *displs = (int *)b->displs;
    for (int q = 0; q < n; ++q) {
        counts[q] = NULL != vc ? vc[q] : count;
        if (NULL != vc) displs[q] = vd[q];
    }
    if (NULL == vc) b->displs = NULL, b->stride = (size_t)count;
    if (in_place) counts[a->root] = 0;
}

/* This rank's send and receive blocks, one entry per peer (ints: 4n). */
static void rank_blocks(const rooted_args_t *a, int n, int me, int *ints, loom_typed_blocks_t *snd,
                        loom_typed_blocks_t *rcv)
{
    const bool is_root = me == a->root;
    const bool in_place = is_root && (a->gather ? MPI_IN_PLACE == a->sbuf : MPI_IN_PLACE == a->rbuf);
    memset(ints, 0, 4 * sizeof(int) * (size_t)n);
    *snd = (loom_typed_blocks_t){.n = n, .counts = ints, .displs = ints + n};
    *rcv = (loom_typed_blocks_t){.n = n, .counts = ints + 2 * n, .displs = ints + 3 * n};
    loom_typed_blocks_t *many = a->gather ? rcv : snd, *one = a->gather ? snd : rcv;
    if (is_root) {
        many->user = a->gather ? a->rbuf : (void *)a->sbuf;
        many->dt = a->gather ? a->rdt : a->sdt;
        root_blocks(a, n, in_place, many);
    }
    if (!in_place) { /* this rank's own block, to or from the root */
        one->user = a->gather ? (void *)a->sbuf : a->rbuf;
        one->dt = a->gather ? a->sdt : a->rdt;
        ((int *)one->counts)[a->root] = a->gather ? a->scount : a->rcount;
    }
}

static bool rooted_gpu(const rooted_args_t *a, int coll, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                       bool s_gpu, bool r_gpu, int *rc)
{
    loom_gpu_call_t c;
    mca_coll_loom_exchange_call(&c, coll, comm, req, a->sbuf, s_gpu, a->rbuf, r_gpu);
    if (!mca_coll_loom_gpu_takes(m, &c, s_gpu || r_gpu, rc)) return false;
    if (MPI_SUCCESS != *rc) return true;
    const int n = ompi_comm_size(comm);
    int *ints = mca_coll_loom_exchange_ints(m, n);
    if (NULL == ints) {
        *rc = MPI_ERR_NO_MEM;
        return true;
    }
    loom_typed_blocks_t snd, rcv;
    const int me = ompi_comm_rank(comm);
    rank_blocks(a, n, me, ints, &snd, &rcv);
    c.fan_in = a->gather;
    /* gather, scatter: one block size, known to every rank (not the v-forms,
     * whose leaves may pass NULL for the root's arrays). */
    if (LOOM_COLL_gather == coll || LOOM_COLL_scatter == coll) {
        const bool recv_side = a->gather == (me == a->root); /* the root's gather and a leaf's scatter receive */
        size_t size = 0;
        ompi_datatype_type_size(recv_side ? a->rdt : a->sdt, &size);
        c.agreed_block = (size_t)(recv_side ? a->rcount : a->scount) * size;
    }
    *rc = mca_coll_loom_exchange_blocks(m, &c, &snd, &rcv);
    return true;
}

static int gather_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                      ompi_datatype_t *rdt, int root, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool is_root = mca_coll_loom_is_root(comm, root);
    bool s_gpu = mca_coll_loom_is_leaf(comm, root) && mca_coll_loom_on_gpu(sbuf);
    bool r_gpu = is_root && mca_coll_loom_on_gpu(rbuf);
    const rooted_args_t a = {true, sbuf, scount, NULL, NULL, sdt, rbuf, rcount, NULL, NULL, rdt, root};
    int rc;
    if (rooted_gpu(&a, LOOM_COLL_gather, comm, m, req, s_gpu, r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, gather, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = loom_span_of(&rsh, (size_t)rcount * mca_coll_loom_peers(comm));
    LOOM_STAGED_CALL(m, req, gather, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcount, rdt, root, comm);
}

LOOM_RUNNER(gather, gather)

static int scatter_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                       ompi_datatype_t *rdt, int root, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool is_root = mca_coll_loom_is_root(comm, root);
    bool s_gpu = is_root && mca_coll_loom_on_gpu(sbuf);
    bool r_gpu = mca_coll_loom_is_leaf(comm, root) && mca_coll_loom_on_gpu(rbuf);
    const rooted_args_t a = {false, sbuf, scount, NULL, NULL, sdt, rbuf, rcount, NULL, NULL, rdt, root};
    int rc;
    if (rooted_gpu(&a, LOOM_COLL_scatter, comm, m, req, s_gpu, r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, scatter, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount * mca_coll_loom_peers(comm));
    loom_span_t r_span = loom_span_of(&rsh, (size_t)rcount);
    LOOM_STAGED_CALL(m, req, scatter, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcount, rdt, root, comm);
}

LOOM_RUNNER(scatter, scatter)

static int gatherv_any(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                       const int *displs, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm, loom_t *m,
                       ompi_request_t **req)
{
    bool is_root = mca_coll_loom_is_root(comm, root);
    bool s_gpu = mca_coll_loom_is_leaf(comm, root) && mca_coll_loom_on_gpu(sbuf);
    bool r_gpu = is_root && mca_coll_loom_v_on_gpu(rbuf, rdt, rcounts, displs, (int)mca_coll_loom_peers(comm));
    const rooted_args_t a = {true, sbuf, scount, NULL, NULL, sdt, rbuf, 0, rcounts, displs, rdt, root};
    int rc;
    if (rooted_gpu(&a, LOOM_COLL_gatherv, comm, m, req, s_gpu, r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, gatherv, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = loom_span_of(&ssh, (size_t)scount);
    loom_span_t r_span = r_gpu ? loom_span_of_v(&rsh, rcounts, displs, (int)mca_coll_loom_peers(comm)) : (loom_span_t){0, 0};
    LOOM_STAGED_CALL(m, req, gatherv, s_gpu, s_span, r_gpu, r_span, hs, scount, sdt, hr, rcounts, displs, rdt, root,
                     comm);
}

LOOM_RUNNER(gatherv, gatherv)

static int scatterv_any(const void *sbuf, const int *scounts, const int *displs, ompi_datatype_t *sdt, void *rbuf,
                        int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm, loom_t *m,
                        ompi_request_t **req)
{
    bool is_root = mca_coll_loom_is_root(comm, root);
    bool s_gpu = is_root && mca_coll_loom_v_on_gpu(sbuf, sdt, scounts, displs, (int)mca_coll_loom_peers(comm));
    bool r_gpu = mca_coll_loom_is_leaf(comm, root) && mca_coll_loom_on_gpu(rbuf);
    const rooted_args_t a = {false, sbuf, 0, scounts, displs, sdt, rbuf, rcount, NULL, NULL, rdt, root};
    int rc;
    if (rooted_gpu(&a, LOOM_COLL_scatterv, comm, m, req, s_gpu, r_gpu, &rc)) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, scatterv, sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm);
    loom_type_shape_t ssh = mca_coll_loom_shape(sdt), rsh = mca_coll_loom_shape(rdt);
    loom_span_t s_span = s_gpu ? loom_span_of_v(&ssh, scounts, displs, (int)mca_coll_loom_peers(comm)) : (loom_span_t){0, 0};
    loom_span_t r_span = loom_span_of(&rsh, (size_t)rcount);
    LOOM_STAGED_CALL(m, req, scatterv, s_gpu, s_span, r_gpu, r_span, hs, scounts, displs, sdt, hr, rcount, rdt, root,
                     comm);
}

LOOM_RUNNER(scatterv, scatterv)
