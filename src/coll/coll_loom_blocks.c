#include "coll_loom_blocks.h"

#include <stdlib.h>
#include <string.h>

#include "coll_loom_dtgpu.h"
#include "coll_loom_stage.h"

void mca_coll_loom_exchange_call(loom_gpu_call_t *c, int coll, ompi_communicator_t *comm, ompi_request_t **req,
                                 const void *sbuf, bool s_gpu, void *rbuf, bool r_gpu)
{
    /* The non-blocking twins follow the blocking ones in the same order (coll_loom.h). */
    _Static_assert(LOOM_COLL_ialltoall - LOOM_COLL_alltoall == LOOM_COLL_iallgather - LOOM_COLL_allgather &&
                       LOOM_COLL_igather - LOOM_COLL_gather == LOOM_COLL_iallgather - LOOM_COLL_allgather &&
                       LOOM_COLL_iscatterv - LOOM_COLL_scatterv == LOOM_COLL_iallgather - LOOM_COLL_allgather &&
                       LOOM_COLL_ialltoallw - LOOM_COLL_alltoallw == LOOM_COLL_iallgather - LOOM_COLL_allgather,
                   "LOOM_NONBLOCKING_COLLS lists the blocking ones' twins in order");
    memset(c, 0, sizeof(*c));
    c->coll = NULL != req ? coll + (LOOM_COLL_iallgather - LOOM_COLL_allgather) : coll;
    c->kind = loomCollAllToAll;
    c->dt = loomUint8;
    c->why_not = OMPI_COMM_IS_INTER(comm) ? mca_coll_loom_why_intercomm : NULL;
    c->req = req;
    c->in = s_gpu && MPI_IN_PLACE != sbuf ? sbuf : NULL;
    c->out = r_gpu ? rbuf : NULL;
}

/* The module's tables at n peers: 4n byte-table entries, then 4n ints. */
static size_t *exchange_tables(mca_coll_loom_module_t *m, int n)
{
    const size_t need = 4 * (size_t)n * (sizeof(size_t) + sizeof(int));
    if (m->exchange_tables_bytes < need) {
        void *t = realloc(m->exchange_tables, need);
        if (NULL == t) return NULL;
        m->exchange_tables = t;
        m->exchange_tables_bytes = need;
    }
    return (size_t *)m->exchange_tables;
}

int *mca_coll_loom_exchange_ints(mca_coll_loom_module_t *m, int n)
{
    size_t *table = exchange_tables(m, n);
    return NULL == table ? NULL : (int *)(table + 4 * (size_t)n);
}

int mca_coll_loom_exchange_blocks(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *snd,
                                  const loom_typed_blocks_t *rcv)
{
    const int n = snd->n;
    size_t *table = exchange_tables(m, n); /* the same n as the caller's ints: no move */
    char *spacked = NULL, *rpacked = NULL;
    bool s_packed = false, r_packed = false, s_host = false;
    loom_gpu_unpack_t unpack;
    loom_dt_view_t sview, rview;
    memset(&sview, 0, sizeof(sview));
    memset(&rview, 0, sizeof(rview));
    int rc = NULL == table ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    if (MPI_SUCCESS == rc) {
        void *in, *out;
        c->send_counts = table;
        c->send_displs = table + n;
        c->counts = table + 2 * n;
        c->displs = table + 3 * n;
        c->in_bytes = mca_coll_loom_byte_blocks(snd, table, table + n, &in, &s_packed);
        c->out_bytes = mca_coll_loom_byte_blocks(rcv, table + 2 * n, table + 3 * n, &out, &r_packed);
        c->in = in;
        c->out = out;
        /* Blocks the GPU can pack stay in the user's layout: the exchange
         * reads (writes) them in place. Not an output that is the input (MPI's
         * in place): it is written while still read, so it is packed. */
        if (s_packed && mca_coll_loom_view_of(m, snd, table + n, 0, c->in_bytes, &sview)) {
            s_packed = false;
            c->in = snd->user;
            c->send_view = &sview.view;
        }
        if (r_packed && rcv->user != snd->user &&
            mca_coll_loom_view_of(m, rcv, table + 3 * n, 1, c->out_bytes, &rview)) {
            r_packed = false;
            c->out = rcv->user;
            c->recv_view = &rview.view;
        }
        if (s_packed) rc = mca_coll_loom_pack_in(m, c->coll, snd, table + n, c->in_bytes, &spacked, &s_host);
        if (s_packed) c->in = spacked;
        /* unpacked after the call's kernel (GPU) or once the output is in place (host: c->after) */
        if (MPI_SUCCESS == rc && r_packed)
            rc = mca_coll_loom_pack_out(m, c, rcv, table + 3 * n, c->out_bytes, false, true, &unpack, &rpacked);
        if (r_packed) c->out = rpacked;
    }
    /* A rank that failed here still leaves the others waiting for its
     * blocks: their calls end in loom's time-out error, not a hang. A host
     * packed input is copied in by the time the call returns. */
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_gpu_exec(m, c);
    if (s_host) free(spacked);
    mca_coll_loom_view_free(&sview);
    mca_coll_loom_view_free(&rview);
    return rc;
}

/* Equal blocks (every one the size of the first) not at q x block. */
static bool equal_elsewhere(const size_t *bytes, const size_t *at, int n)
{
    bool equal = true, canonical = true;
    for (int q = 0; q < n; ++q) {
        equal = equal && bytes[q] == bytes[0];
        canonical = canonical && at[q] == (size_t)q * bytes[0];
    }
    return equal && !canonical;
}

int mca_coll_loom_gather_bytes(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *snd,
                               const loom_typed_blocks_t *rcv, int me)
{
    const int n = rcv->n;
    size_t *table = exchange_tables(m, n);
    if (NULL == table) return MPI_ERR_NO_MEM; /* the others' calls end in loom's time-out error */
    size_t *bytes = table, *at = table + n, *sbytes = table + 2 * n, *sat = table + 3 * n;
    void *out = NULL, *in = NULL;
    bool r_packed = false, s_packed = false;
    c->out_bytes = mca_coll_loom_byte_blocks(rcv, bytes, at, &out, &r_packed);
    if (!r_packed && equal_elsewhere(bytes, at, n)) { /* repacked back to back */
        r_packed = true;
        c->out_bytes = 0;
        for (int q = 0; q < n; ++q) at[q] = c->out_bytes, c->out_bytes += bytes[q];
    }
    char *rpacked = NULL, *spacked = NULL;
    bool s_host = false;
    loom_gpu_unpack_t unpack;
    int rc = MPI_SUCCESS;
    /* in place: its own block is the input, packed with the others first; the
     * output unpacked after the call's kernel (GPU) or once it is in place
     * (host: c->after) */
    if (r_packed) rc = mca_coll_loom_pack_out(m, c, rcv, at, c->out_bytes, NULL == snd, true, &unpack, &rpacked);
    if (r_packed) out = rpacked;
    if (MPI_SUCCESS == rc && NULL != snd) {
        c->in_bytes = mca_coll_loom_byte_blocks(snd, sbytes, sat, &in, &s_packed);
        if (s_packed) rc = mca_coll_loom_pack_in(m, c->coll, snd, sat, c->in_bytes, &spacked, &s_host);
        if (s_packed && MPI_SUCCESS == rc) in = spacked;
        if (MPI_SUCCESS == rc && c->in_bytes != bytes[me]) rc = MPI_ERR_TRUNCATE; /* type signatures differ */
    } else if (MPI_SUCCESS == rc) {
        in = (char *)out + at[me];
        c->in_bytes = bytes[me];
    }
    c->in = in;
    c->out = out;
    c->count = bytes[me];
    c->counts = bytes;
    c->displs = at;
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_gpu_exec(m, c);
    else mca_coll_loom_after_run(c->after, rc); /* a host output copy freed */
    if (s_host) free(spacked); /* copied in by the time the call returns */
    return rc;
}
