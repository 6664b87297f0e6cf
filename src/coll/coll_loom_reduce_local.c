/*
 * MPI_Reduce_local: Open MPI hands it to MPI_COMM_SELF's coll module (loom
 * takes single-rank communicators too). inoutbuf = inbuf op inoutbuf.
 * Device or managed buffers of one GPU, with a type and op loom reduces:
 * loom's elementwise kernel (loomReduceLocal). Other calls with a buffer
 * on a GPU (one buffer in host memory, two GPUs, a derived type, a user
 * op): staged through host memory. Host buffers: the previous module.
 */
#include "coll_loom_gpu.h"
#include "coll_loom_stage.h"

int mca_coll_loom_reduce_local(const void *inbuf, void *inoutbuf, int count, struct ompi_datatype_t *dt,
                               struct ompi_op_t *op, mca_coll_base_module_t *module)
{
    loom_t *m = LOOM(module);
    loomPointerInfo_t in_info, io_info;
    const bool in_gpu = mca_coll_loom_locate(inbuf, &in_info), io_gpu = mca_coll_loom_locate(inoutbuf, &io_info);
    if (!in_gpu && !io_gpu) {
        mca_coll_loom_note(m, LOOM_COLL_reduce_local, LOOM_PATH_DELEGATED);
        return m->prev.reduce_local(inbuf, inoutbuf, count, dt, op, m->prev.reduce_local_module);
    }
    loomDataType_t ldt;
    loomRedOp_t lop;
    size_t per = 1;
    bool as_is = false;
    const char *why = mca_coll_loom_map_type_op(dt, op, &ldt, &lop, &per, &as_is);
    if (NULL == why && !as_is && !mca_coll_loom_contiguous(dt, count)) why = "the datatype is not contiguous";
    if (NULL == why && (loomMemoryHost == in_info.kind || loomMemoryHost == io_info.kind))
        why = "one of its buffers is in host memory";
    if (NULL == why && in_info.device != io_info.device) why = "its buffers are on two GPUs";
    if (NULL == why) {
        loomResult_t r = loomReduceLocal(inbuf, inoutbuf, (size_t)count * per, ldt, lop);
        if (loomSuccess != r) {
            mca_coll_loom_report_error(m, "reduce_local", r);
            return loomInvalidArgument == r ? MPI_ERR_ARG : MPI_ERR_OTHER;
        }
        mca_coll_loom_note(m, LOOM_COLL_reduce_local, LOOM_PATH_GPU);
        return MPI_SUCCESS;
    }
    mca_coll_loom_report_why(m, LOOM_COLL_reduce_local, why);
    mca_coll_loom_note(m, LOOM_COLL_reduce_local, LOOM_PATH_STAGED);
    const loom_type_shape_t shape = mca_coll_loom_shape(dt);
    const loom_span_t span = loom_span_of(&shape, (size_t)count);
    loom_stage_t st = {.n = 0, .changed_only = true};
    const void *hin;
    void *hio;
    int rc = mca_coll_loom_stage_pair(&st, inbuf, in_gpu, span, inoutbuf, io_gpu, span, &hin, &hio);
    if (MPI_SUCCESS == rc) rc = m->prev.reduce_local(hin, hio, count, dt, op, m->prev.reduce_local_module);
    return mca_coll_loom_unstage(&st, rc, NULL);
}
