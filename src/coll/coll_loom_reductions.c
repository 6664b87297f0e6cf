/*
 * Reductions: allreduce, reduce, reduce_scatter(_block), scan, exscan.
 * Each is written once with req == NULL meaning blocking; loom's GPU path
 * takes the calls it covers (coll_loom_gpu.h), otherwise host buffers go to
 * the previous module untouched and device buffers are staged through host
 * memory.
 */
#include "coll_loom_dtgpu.h"
#include "coll_loom_gpu.h"
#include "coll_loom_route.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A reduction as the GPU path sees it (the mappers below fill in buffers
 * and counts); req: the non-blocking call's request (NULL: blocking).
 * c.count is in loom's elements: *per of them in each element of dt;
 * *as_is: whether the kernels read dt's buffers as they are, else its
 * elements are packed (mca_coll_loom_map_type_op). */
static loom_gpu_call_t reduction_call(int coll, loomColl kind, ompi_datatype_t *dt, int count,
                                      struct ompi_op_t *op, ompi_request_t **req, size_t *per, bool *as_is)
{
    loom_gpu_call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = coll;
    c.kind = kind;
    c.req = req;
    *per = 1;
    *as_is = true;
    c.why_not = count <= 0 ? "nothing to reduce" : mca_coll_loom_map_type_op(dt, op, &c.dt, &c.op, per, as_is);
    c.count = count > 0 ? (size_t)count * *per : 0;
    return c;
}

/* Bytes of `count` elements as the kernels see them: count x extent (the
 * type's size where it is contiguous; a value-index pair's padding included,
 * as in a C array of the struct). */
static size_t type_bytes(ompi_datatype_t *dt, size_t count)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return (size_t)extent * count;
}

/* A reduction whose datatype's elements are not contiguous (a vector of
 * floats), through packed copies (coll_loom_dtgpu.h): its input is
 * in_blocks blocks of in_count elements of dt, back to back from `in`
 * (NULL: in place, the output's own elements), its output out_count
 * elements at `out` (0: none here), unpacked there where `unpack`. */
static int run_packed(loom_t *m, loom_gpu_call_t *c, ompi_datatype_t *dt, const void *in, int in_count, int in_blocks,
                      void *out, int out_count, bool unpack)
{
    const int zero = 0;
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    /* the input's blocks (reduce_scatter's n: their elements may pass INT_MAX together) */
    int *counts = NULL;
    size_t *at = NULL;
    if (NULL != in && in_blocks > 0) {
        counts = malloc((size_t)in_blocks * sizeof(int));
        at = malloc((size_t)in_blocks * sizeof(size_t));
        if (NULL == counts || NULL == at) {
            free(counts);
            free(at);
            return MPI_ERR_NO_MEM; /* the others end in loom's time-out error */
        }
        for (int q = 0; q < in_blocks; ++q) counts[q] = in_count, at[q] = (size_t)q * (size_t)in_count * size;
    }
    const loom_typed_blocks_t ib = {.user = (void *)in, .dt = dt, .n = in_blocks, .counts = counts,
                                    .stride = (size_t)in_count};
    const loom_typed_blocks_t ob = {.user = out, .dt = dt, .n = 1, .counts = &out_count, .displs = &zero};
    const size_t at0 = 0, in_bytes = size * (size_t)in_count * (size_t)in_blocks;
    loom_gpu_unpack_t unpacking;
    char *pin = NULL, *pout = NULL;
    bool in_host = false;
    int rc = MPI_SUCCESS;
    if (out_count > 0)
        rc = mca_coll_loom_pack_out(m, c, &ob, &at0, size * (size_t)out_count, NULL == in, unpack, &unpacking, &pout);
    if (MPI_SUCCESS == rc && NULL != in && in_bytes > 0)
        rc = mca_coll_loom_pack_in(m, c->coll, &ib, at, in_bytes, &pin, &in_host);
    c->located = false;
    c->in = NULL == in ? pout : pin;
    c->out = pout;
    c->in_bytes = NULL == in ? size * (size_t)out_count : in_bytes;
    c->out_bytes = unpack ? size * (size_t)out_count : 0;
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_gpu_exec(m, c); /* else the others end in loom's time-out error */
    else mca_coll_loom_after_run(c->after, rc);              /* a host output copy freed */
    if (in_host) free(pin);
    free(counts);
    free(at);
    return rc;
}

/* Runs c where the GPU path takes it: as it is, or packed (run_packed's
 * arguments). False: the caller stages or delegates. */
static bool reduction_run(loom_t *m, loom_gpu_call_t *c, bool local_gpu, bool as_is, ompi_datatype_t *dt,
                          const void *in, int in_count, int in_blocks, void *out, int out_count, bool unpack, int *rc)
{
    if (as_is) return mca_coll_loom_gpu_run(m, c, local_gpu, rc);
    if (!mca_coll_loom_gpu_takes(m, c, local_gpu, rc)) return false;
    if (MPI_SUCCESS == *rc) *rc = run_packed(m, c, dt, in, in_count, in_blocks, out, out_count, unpack);
    return true;
}

/* reduce_scatter(_block): n blocks of count in (rbuf in place), one out. */
static void scatter_buffers(loom_gpu_call_t *c, const void *sbuf, void *rbuf, ompi_datatype_t *dt, int count,
                            ompi_communicator_t *comm)
{
    c->in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
    c->out = rbuf;
    c->out_bytes = type_bytes(dt, count > 0 ? (size_t)count : 0);
    c->in_bytes = c->out_bytes * (size_t)ompi_comm_size(comm);
}

/* Blocking allreduce on device buffers tries loom's GPU path first. */
static int allreduce_any(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                         ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    loomPointerInfo_t s_info, r_info;
    bool s_gpu = mca_coll_loom_locate(sbuf, &s_info), r_gpu = mca_coll_loom_locate(rbuf, &r_info);
    size_t per;
    bool as_is;
    loom_gpu_call_t c = reduction_call(LOOM_COLL_ID(req, allreduce), loomCollAllReduce, dt, count, op, req, &per, &as_is);
    c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
    c.out = rbuf;
    c.located = true;
    c.in_info = MPI_IN_PLACE == sbuf ? r_info : s_info;
    c.out_info = r_info;
    c.in_bytes = c.out_bytes = type_bytes(dt, (size_t)count);
    int rc;
    if (reduction_run(m, &c, s_gpu || r_gpu, as_is, dt, MPI_IN_PLACE == sbuf ? NULL : sbuf, count, 1, rbuf, count,
                      true, &rc))
        return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, allreduce, sbuf, rbuf, count, dt, op, comm);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    loom_span_t span = loom_span_of(&sh, (size_t)count);
    LOOM_STAGED_CALL(m, req, allreduce, s_gpu, span, r_gpu, span, hs, hr, count, dt, op, comm);
}

LOOM_RUNNER(allreduce, allreduce)

/* scan and exscan on loom's kernels: a prefix along the ranks; exscan
 * leaves rank 0's output alone (MPI: undefined there). */
static bool prefix_gpu(int coll, loomColl kind, const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                       struct ompi_op_t *op, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req,
                       bool local_gpu, int *rc)
{
    size_t per;
    bool as_is;
    loom_gpu_call_t c = reduction_call(coll, kind, dt, count, op, req, &per, &as_is);
    c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
    c.out = rbuf;
    c.in_bytes = c.out_bytes = type_bytes(dt, (size_t)count);
    const bool no_output = loomCollExScan == kind && 0 == ompi_comm_rank(comm);
    if (no_output) c.out_bytes = 0;
    return reduction_run(m, &c, local_gpu, as_is, dt, MPI_IN_PLACE == sbuf ? NULL : sbuf, count, 1, rbuf, count,
                         !no_output, rc);
}

/* scan and exscan share a signature and the span of both buffers. */
#define LOOM_ELEMENTWISE(name, kind)                                                                       \
    static int name##_any(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,      \
                          ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)                       \
    {                                                                                                       \
        bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);                        \
        int rc;                                                                                             \
        if (prefix_gpu(LOOM_COLL_ID(req, name), kind, sbuf, rbuf, count, dt, op, comm, m, req, s_gpu || r_gpu, &rc)) \
            return rc;                                                                                      \
        if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, name, sbuf, rbuf, count, dt, op, comm);                  \
        loom_type_shape_t sh = mca_coll_loom_shape(dt);                                                     \
        loom_span_t span = loom_span_of(&sh, (size_t)count);                                                \
        LOOM_STAGED_CALL(m, req, name, s_gpu, span, r_gpu, span, hs, hr, count, dt, op, comm);              \
    }                                                                                                       \
    LOOM_RUNNER(name, name)

LOOM_ELEMENTWISE(scan, loomCollScan)
LOOM_ELEMENTWISE(exscan, loomCollExScan)

static int reduce_any(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op, int root,
                      ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    /* rbuf means something only at the root. */
    const bool is_root = mca_coll_loom_is_root(comm, root);
    bool s_gpu = mca_coll_loom_is_leaf(comm, root) && mca_coll_loom_on_gpu(sbuf);
    bool r_gpu = is_root && mca_coll_loom_on_gpu(rbuf);
    size_t per;
    bool as_is;
    loom_gpu_call_t c = reduction_call(LOOM_COLL_ID(req, reduce), loomCollReduce, dt, count, op, req, &per, &as_is);
    c.root = root;
    c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf; /* in place: root only */
    c.out = is_root ? rbuf : NULL;
    c.in_bytes = type_bytes(dt, (size_t)count);
    c.out_bytes = is_root ? c.in_bytes : 0;
    int rc;
    if (reduction_run(m, &c, s_gpu || r_gpu, as_is, dt, MPI_IN_PLACE == sbuf ? NULL : sbuf, count, 1,
                      is_root ? rbuf : NULL, is_root ? count : 0, is_root, &rc))
        return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, reduce, sbuf, rbuf, count, dt, op, root, comm);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    loom_span_t span = loom_span_of(&sh, (size_t)count);
    LOOM_STAGED_CALL(m, req, reduce, s_gpu, span, r_gpu, span, hs, hr, count, dt, op, root, comm);
}

LOOM_RUNNER(reduce, reduce)

static int reduce_scatter_any(const void *sbuf, void *rbuf, const int *rcounts, ompi_datatype_t *dt,
                              struct ompi_op_t *op, ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    size_t total = 0;
    bool equal = true;
    for (int r = 0; r < ompi_comm_size(comm); ++r) total += (size_t)rcounts[r], equal &= rcounts[r] == rcounts[0];
    /* Equal counts run as reduce_scatter_block; ragged ones with the counts. */
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    size_t per;
    bool as_is;
    loom_gpu_call_t c = reduction_call(LOOM_COLL_ID(req, reduce_scatter), loomCollReduceScatter, dt,
                                       equal ? rcounts[0] : (int)(total < INT_MAX ? total : INT_MAX), op, req, &per,
                                       &as_is);
    size_t *counts = NULL;
    c.ragged = !equal;
    /* the ragged path counts in int (all ranks know total alike) */
    if (!equal && NULL == c.why_not && total > INT_MAX) c.why_not = "more than INT_MAX elements in all";
    if (equal) {
        scatter_buffers(&c, sbuf, rbuf, dt, rcounts[0], comm);
    } else if (NULL == c.why_not) {
        if (NULL == (counts = malloc(sizeof(size_t) * (size_t)n))) c.why_not = "out of host memory";
        for (int q = 0; NULL != counts && q < n; ++q) counts[q] = (size_t)rcounts[q] * per;
        c.counts = counts;
        c.in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
        c.out = rbuf;
        c.in_bytes = type_bytes(dt, total);
        c.out_bytes = type_bytes(dt, (size_t)rcounts[me]);
    }
    int rc;
    /* in place: the whole input is rbuf, its own block goes to rbuf's start (packed: two copies) */
    bool took = reduction_run(m, &c, s_gpu || r_gpu, as_is, dt, MPI_IN_PLACE == sbuf ? rbuf : sbuf,
                              equal ? rcounts[0] : (int)(total < INT_MAX ? total : INT_MAX), equal ? n : 1, rbuf,
                              rcounts[me], true, &rc);
    free(counts);
    if (took) return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, reduce_scatter, sbuf, rbuf, rcounts, dt, op, comm);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    loom_span_t s_span = loom_span_of(&sh, total);
    /* In place, rbuf holds the whole input. */
    loom_span_t r_span = MPI_IN_PLACE == sbuf ? s_span : loom_span_of(&sh, (size_t)rcounts[ompi_comm_rank(comm)]);
    LOOM_STAGED_CALL(m, req, reduce_scatter, s_gpu, s_span, r_gpu, r_span, hs, hr, rcounts, dt, op, comm);
}

LOOM_RUNNER(reduce_scatter, reduce_scatter)

static int reduce_scatter_block_any(const void *sbuf, void *rbuf, int rcount, ompi_datatype_t *dt, struct ompi_op_t *op,
                                    ompi_communicator_t *comm, loom_t *m, ompi_request_t **req)
{
    bool s_gpu = mca_coll_loom_on_gpu(sbuf), r_gpu = mca_coll_loom_on_gpu(rbuf);
    size_t per;
    bool as_is;
    loom_gpu_call_t c = reduction_call(LOOM_COLL_ID(req, reduce_scatter_block), loomCollReduceScatter, dt, rcount, op,
                                       req, &per, &as_is);
    scatter_buffers(&c, sbuf, rbuf, dt, rcount, comm);
    int rc;
    if (reduction_run(m, &c, s_gpu || r_gpu, as_is, dt, MPI_IN_PLACE == sbuf ? rbuf : sbuf, rcount,
                      ompi_comm_size(comm), rbuf, rcount, true, &rc))
        return rc;
    if (!s_gpu && !r_gpu) LOOM_DELEGATE(m, req, reduce_scatter_block, sbuf, rbuf, rcount, dt, op, comm);
    loom_type_shape_t sh = mca_coll_loom_shape(dt);
    /* rcount blocks per rank of the local group, on an intercommunicator too
     * (there the other group's sum is scattered over this group). */
    loom_span_t s_span = loom_span_of(&sh, (size_t)rcount * (size_t)ompi_comm_size(comm));
    loom_span_t r_span = MPI_IN_PLACE == sbuf ? s_span : loom_span_of(&sh, (size_t)rcount);
    LOOM_STAGED_CALL(m, req, reduce_scatter_block, s_gpu, s_span, r_gpu, r_span, hs, hr, rcount, dt, op, comm);
}

LOOM_RUNNER(reduce_scatter_block, reduce_scatter_block)
