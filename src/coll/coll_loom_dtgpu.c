#include "coll_loom_dtgpu.h"

#include <stdlib.h>
#include <string.h>

#include "coll_loom_dtplan.h"
#include "coll_loom_stage.h"
#include "loom_component.h"
#include "opal/util/output.h"

/* Why b's blocks stay off the GPU's packing (NULL: they can have it);
 * *device: b's buffer is GPU memory (only then is a reason worth saying). */
static const char *gpu_packable(const mca_coll_loom_module_t *m, const loom_typed_blocks_t *b, bool *device)
{
    const loomPointerInfo_t info = mca_coll_loom_where(b->user);
    *device = loomMemoryHost != info.kind;
    if (!*device) return "host memory";
    if (!mca_coll_loom_component.dt_gpu) return "coll_loom_dt_gpu is false";
    if (NULL == m->lcomm || info.device != m->gpu_device) return "the buffer is not on the communicator's GPU";
    for (int q = 0; q < b->n; ++q) {
        int rc = MPI_SUCCESS;
        if (b->counts[q] > 0 && NULL == mca_coll_loom_dt_plan_of(mca_coll_loom_block_type(b, q), &rc))
            return MPI_ERR_NO_MEM == rc ? "no memory for the datatype's plan" : "the datatype has no plan";
    }
    return NULL;
}

/* Once per (communicator, collective), at verbose >= 1. */
static void say_host(mca_coll_loom_module_t *m, int coll, const loom_typed_blocks_t *b, const char *why)
{
    if (mca_coll_loom_component.verbose < 1 || m->host_pack_reported[coll]) return;
    m->host_pack_reported[coll] = true;
    opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: %s: datatype %s packed through host "
                "memory: %s", ompi_comm_rank(m->comm), m->comm->c_name, mca_coll_loom_coll_names[coll],
                NULL != b->dt ? b->dt->name : "(a type per block)", why);
}

static loomDtLayout_t layout_of(ompi_datatype_t *t)
{
    int rc;
    const loom_dt_plan_t *p = mca_coll_loom_dt_plan_of(t, &rc); /* found by gpu_packable: kept with the type */
    const loomDtLayout_t l = {p->segs, (int)p->nsegs, p->extent, p->bytes};
    return l;
}

/* Blocks q.. of b that continue block q both in the user's buffer and in
 * the packed one (an alltoall's, a gather's: one type, back to back), as
 * one run: its element count, and the block after it. */
static int run_of(const loom_typed_blocks_t *b, const size_t *at, int q, const loomDtLayout_t *l, size_t *count)
{
    const ptrdiff_t offset = mca_coll_loom_block_offset(b, q);
    int next = q + 1;
    *count = (size_t)b->counts[q];
    while (NULL == b->dts && next < b->n && b->counts[next] > 0 &&
           mca_coll_loom_block_offset(b, next) == offset + (ptrdiff_t)*count * l->extent &&
           at[next] == at[q] + *count * l->bytes)
        *count += (size_t)b->counts[next++];
    return next;
}

static int by_packed(const void *x, const void *y)
{
    const loomDtBlock_t *a = x, *b = y;
    return a->packed < b->packed ? -1 : a->packed > b->packed;
}

void mca_coll_loom_view_free(loom_dt_view_t *v)
{
    free(v->layouts), free(v->types), free(v->blocks);
    memset(v, 0, sizeof(*v));
}

/* b's blocks with elements at `at` as layouts and blocks in packed order
 * (runs of one type that continue each other as one block). */
static loomResult_t view_blocks(const loom_typed_blocks_t *b, const size_t *at, loom_dt_view_t *v)
{
    memset(v, 0, sizeof(*v));
    v->layouts = malloc((size_t)b->n * sizeof(*v->layouts));
    v->types = malloc((size_t)b->n * sizeof(*v->types));
    v->blocks = malloc((size_t)b->n * sizeof(*v->blocks));
    if (NULL == v->layouts || NULL == v->types || NULL == v->blocks) {
        mca_coll_loom_view_free(v);
        return loomSystemError;
    }
    int nlayouts = 0, nblocks = 0;
    bool sorted = true;
    for (int q = 0; q < b->n;) {
        if (b->counts[q] <= 0) {
            ++q;
            continue;
        }
        ompi_datatype_t *t = mca_coll_loom_block_type(b, q);
        int k = nlayouts - 1; /* the type's layout, if among the last few: alltoallw's often repeat */
        while (k >= 0 && k >= nlayouts - 8 && v->types[k] != t) --k;
        if (k >= 0 && v->types[k] != t) k = -1;
        if (k < 0) v->types[k = nlayouts] = t, v->layouts[nlayouts++] = layout_of(t);
        size_t count;
        const int next = run_of(b, at, q, &v->layouts[k], &count);
        const loomDtBlock_t blk = {k, count, (int64_t)mca_coll_loom_block_offset(b, q), at[q]};
        sorted = sorted && (0 == nblocks || v->blocks[nblocks - 1].packed <= blk.packed);
        v->blocks[nblocks++] = blk;
        q = next;
    }
    if (!sorted) qsort(v->blocks, (size_t)nblocks, sizeof(*v->blocks), by_packed);
    const loomDtView_t view = {v->layouts, nlayouts, v->blocks, nblocks};
    v->view = view;
    return loomSuccess;
}

/* Every block with elements packed (unpack false) or unpacked, on loom's
 * stream, in one kernel (a single run by the plan kernel: the core's
 * choice). */
static loomResult_t each_gpu_block(loomComm_t lcomm, const loom_typed_blocks_t *b, const size_t *at, char *packed,
                                   bool unpack)
{
    loom_dt_view_t v;
    loomResult_t r = view_blocks(b, at, &v);
    if (loomSuccess != r) return r;
    const loomDtView_t *w = &v.view;
    r = unpack ? loomCommDtUnpackBlocks(lcomm, w->layouts, w->nlayouts, w->blocks, w->nblocks, packed, b->user)
               : loomCommDtPackBlocks(lcomm, w->layouts, w->nlayouts, w->blocks, w->nblocks, b->user, packed);
    mca_coll_loom_view_free(&v);
    return r;
}

static loomResult_t gpu_unpack_run(mca_coll_loom_gpu_step_t *self, loomComm_t lcomm)
{
    loom_gpu_unpack_t *u = (loom_gpu_unpack_t *)self;
    return each_gpu_block(lcomm, u->b, u->at, (char *)u->packed, true);
}

/* The module's call lock for work on loom's stream outside
 * mca_coll_loom_gpu_exec; false inside a call on the same communicator
 * that progress re-entered (exec fails such a call). */
static bool lock_calls(mca_coll_loom_module_t *m)
{
    if (__atomic_load_n(&m->busy, __ATOMIC_ACQUIRE) && pthread_equal(m->call_owner, pthread_self())) return false;
    OPAL_THREAD_LOCK(&m->call_lock);
    return true;
}

/* The communicator's packed buffer `which` (0 input, 1 output), with b's
 * blocks packed into it when `fill`. *why: set where it could not be had
 * (the host path then), else the result. */
static loomResult_t gpu_buffer(mca_coll_loom_module_t *m, int which, const loom_typed_blocks_t *b, const size_t *at,
                               size_t total, bool fill, char **packed, const char **why)
{
    if (!lock_calls(m)) {
        *why = "a call re-entered through progress";
        return loomSuccess;
    }
    void *buf = NULL;
    loomResult_t r = loomCommPackedBuffer(m->lcomm, which, total, &buf);
    if (loomSuccess != r) *why = "no device memory for the packed copy";
    else if (fill) r = each_gpu_block(m->lcomm, b, at, buf, false);
    OPAL_THREAD_UNLOCK(&m->call_lock);
    *packed = buf;
    return NULL != *why ? loomSuccess : r;
}

int mca_coll_loom_pack_in(mca_coll_loom_module_t *m, int coll, const loom_typed_blocks_t *b, const size_t *at,
                          size_t total, char **packed, bool *host)
{
    bool device;
    const char *why = gpu_packable(m, b, &device);
    if (NULL == why) {
        const loomResult_t r = gpu_buffer(m, 0, b, at, total, true, packed, &why);
        if (NULL == why && loomSuccess != r) mca_coll_loom_report_error(m, mca_coll_loom_coll_names[coll], r);
        *host = false;
        if (NULL == why) return mca_coll_loom_mpi_error(r);
    }
    if (device) say_host(m, coll, b, why);
    *host = true;
    return mca_coll_loom_pack(b, at, total, packed);
}

int mca_coll_loom_pack_out(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *b,
                           const size_t *at, size_t total, bool prefill, bool unpack, loom_gpu_unpack_t *u,
                           char **packed)
{
    bool device;
    const char *why = gpu_packable(m, b, &device);
    if (NULL == why) {
        const loomResult_t r = gpu_buffer(m, 1, b, at, total, prefill, packed, &why);
        if (NULL == why && loomSuccess != r) {
            mca_coll_loom_report_error(m, mca_coll_loom_coll_names[c->coll], r);
            return mca_coll_loom_mpi_error(r);
        }
        if (NULL == why && unpack) {
            u->super.run = gpu_unpack_run;
            u->b = b;
            u->at = at;
            u->packed = *packed;
            c->then = &u->super;
        }
        if (NULL == why) return MPI_SUCCESS;
    }
    if (device) say_host(m, c->coll, b, why);
    int rc = prefill ? mca_coll_loom_pack(b, at, total, packed)
                     : NULL == (*packed = malloc(total ? total : 1)) ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    /* the host copy is unpacked (or only freed) at the output's completion */
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_unpack_after(c, unpack ? b : NULL, at, *packed);
    return rc;
}

bool mca_coll_loom_view_of(mca_coll_loom_module_t *m, const loom_typed_blocks_t *b, const size_t *at, int which,
                           size_t total, loom_dt_view_t *v)
{
    bool device;
    memset(v, 0, sizeof(*v));
    if (NULL != gpu_packable(m, b, &device) || !lock_calls(m)) return false;
    /* loom packs a side the exchange kernel does not read in place into
     * this buffer: had now, or the host packs (as mca_coll_loom_pack_in) */
    void *buf = NULL;
    const bool room = loomSuccess == loomCommPackedBuffer(m->lcomm, which, total, &buf);
    OPAL_THREAD_UNLOCK(&m->call_lock);
    return room && loomSuccess == view_blocks(b, at, v);
}
