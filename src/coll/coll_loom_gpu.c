#include "coll_loom_gpu.h"
#include "coll_loom_request.h"
#include "coll_loom_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param_table.h"
#include "loom_component.h"
#include "opal/util/output.h"
#include "opal/datatype/opal_datatype_internal.h"

/* opal's basic type ids -> loom's types (-1: none). MPI_CHAR is INT1,
 * MPI_BYTE and MPI_UNSIGNED_CHAR UINT1, MPI_C_BOOL BOOL (one byte, 0 or 1). */
static int loom_type_of_opal(int id)
{
    switch (id) {
    case OPAL_DATATYPE_INT1: return loomInt8;
    case OPAL_DATATYPE_UINT1: case OPAL_DATATYPE_BOOL: return loomUint8;
    case OPAL_DATATYPE_INT2: return loomInt16;
    case OPAL_DATATYPE_UINT2: return loomUint16;
    case OPAL_DATATYPE_INT4: return loomInt32;
    case OPAL_DATATYPE_UINT4: return loomUint32;
    case OPAL_DATATYPE_INT8: case OPAL_DATATYPE_LONG: return loomInt64;
    case OPAL_DATATYPE_UINT8: case OPAL_DATATYPE_UNSIGNED_LONG: return loomUint64;
    case OPAL_DATATYPE_FLOAT2: return loomFloat16;
    case OPAL_DATATYPE_FLOAT4: return loomFloat32;
    case OPAL_DATATYPE_FLOAT8: return loomFloat64;
    case OPAL_DATATYPE_FLOAT_COMPLEX: return loomFloatComplex;
    case OPAL_DATATYPE_DOUBLE_COMPLEX: return loomDoubleComplex;
    default: return -1;
    }
}

const char *mca_coll_loom_map_type(ompi_datatype_t *dt, int count, loomDataType_t *out)
{
    uint32_t used = dt->super.bdt_used;
    if (0 == used || 0 != (used & (used - 1))) return "the datatype is not made of one predefined type";
    int id = __builtin_ctz(used), t = loom_type_of_opal(id);
    if (t < 0) return "loom has no GPU reduction for this predefined type (long double, long double complex, wchar, 128-bit)";
    if (!mca_coll_loom_contiguous(dt, count)) return "the datatype is not contiguous";
    *out = (loomDataType_t)t;
    return NULL;
}

/* MPI's value-index pair types (MINLOC/MAXLOC): the C structs {value; int}. */
static int loom_pair_type(ompi_datatype_t *dt)
{
    if (dt == MPI_FLOAT_INT) return loomFloatInt;
    if (dt == MPI_DOUBLE_INT) return loomDoubleInt;
    if (dt == MPI_LONG_INT) return loomLongInt;
    if (dt == MPI_2INT) return loomIntInt;
    if (dt == MPI_SHORT_INT) return loomShortInt;
    return -1;
}

const char *mca_coll_loom_map_type_op(ompi_datatype_t *dt, struct ompi_op_t *op, loomDataType_t *ldt,
                                      loomRedOp_t *lop, size_t *per, bool *as_is)
{
    const struct { MPI_Op mpi; loomRedOp_t loom; } ops[] = {
        {MPI_SUM, loomSum},   {MPI_PROD, loomProd}, {MPI_MIN, loomMin},   {MPI_MAX, loomMax},
        {MPI_BAND, loomBand}, {MPI_BOR, loomBor},   {MPI_BXOR, loomBxor}, {MPI_LAND, loomLand},
        {MPI_LOR, loomLor},   {MPI_LXOR, loomLxor}, {MPI_MINLOC, loomMinloc}, {MPI_MAXLOC, loomMaxloc},
    };
    size_t i = 0;
    while (i < sizeof(ops) / sizeof(ops[0]) && ops[i].mpi != op) ++i;
    if (i == sizeof(ops) / sizeof(ops[0])) return "the op is not one loom reduces on the GPU (user-defined, REPLACE, NO_OP)";
    const int pair = loom_pair_type(dt);
    if (pair >= 0) {
        /* The pair's extent is the element (its padding travels along, as in
         * a host memcpy of the struct array); lb must be 0. */
        ptrdiff_t lb, extent;
        ompi_datatype_get_extent(dt, &lb, &extent);
        if (0 != lb || (size_t)extent != loomTypeSize((loomDataType_t)pair)) return "unexpected layout of a value-index pair type";
        *ldt = (loomDataType_t)pair;
        *per = 1;
        *as_is = true;
    } else {
        /* A derived type of one predefined type reduces element by element:
         * its elements, packed where they are not contiguous. */
        uint32_t used = dt->super.bdt_used;
        if (0 == used || 0 != (used & (used - 1))) return "the datatype is not made of one predefined type";
        const int t = loom_type_of_opal(__builtin_ctz(used));
        if (t < 0) return "loom has no GPU reduction for this predefined type (long double, long double complex, wchar, 128-bit)";
        size_t size = 0;
        ompi_datatype_type_size(dt, &size);
        *ldt = (loomDataType_t)t;
        *per = size / loomTypeSize(*ldt);
        *as_is = mca_coll_loom_contiguous(dt, 2);
    }
    if (!loomOpSupported(*ldt, ops[i].loom)) return "loom does not reduce this datatype with this op";
    *lop = ops[i].loom;
    return NULL;
}

const char mca_coll_loom_why_intercomm[] = "an intercommunicator (loom's kernels run within one group)";

static loomResult_t launch_call(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, const void *in, void *out);

/* A non-blocking call may not wait on the host for other ranks (every rank
 * of it is non-blocking too: MPI matches them only with each other). */
static loomResult_t launch(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, const void *in, void *out)
{
    if (NULL != c->req) loomCommSetHostWait(m->lcomm, 0);
    const loomResult_t r = launch_call(m, c, in, out);
    if (NULL != c->req) loomCommSetHostWait(m->lcomm, 1);
    return r;
}

static loomResult_t launch_call(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, const void *in, void *out)
{
    switch (c->kind) {
    case loomCollAllReduce: return loomAllReduce(in, out, c->count, c->dt, c->op, m->lcomm, NULL);
    case loomCollBroadcast: return loomBroadcast(in, out, c->count, c->dt, c->root, m->lcomm, NULL);
    case loomCollReduce: return loomReduce(in, out, c->count, c->dt, c->op, c->root, m->lcomm, NULL);
    case loomCollAllGather:
        return c->ragged ? loomAllGatherV(in, c->count, out, c->counts, c->displs, c->dt, m->lcomm, NULL)
                         : loomAllGather(in, out, c->count, c->dt, m->lcomm, NULL);
    case loomCollReduceScatter:
        return c->ragged ? loomReduceScatterV(in, out, c->counts, c->dt, c->op, m->lcomm, NULL)
                         : loomReduceScatter(in, out, c->count, c->dt, c->op, m->lcomm, NULL);
    case loomCollAllToAll:
        if (NULL != c->send_view || NULL != c->recv_view)
            return loomExchangeTyped(in, c->send_counts, c->send_displs, c->send_view, out, c->counts, c->displs,
                                     c->recv_view, c->agreed_block, c->fan_in, m->lcomm);
        return loomExchange(in, c->send_counts, c->send_displs, out, c->counts, c->displs, c->agreed_block, c->fan_in,
                            m->lcomm, NULL);
    case loomCollScan: return loomScan(in, out, c->count, c->dt, c->op, m->lcomm, NULL);
    case loomCollExScan: return loomExScan(in, out, c->count, c->dt, c->op, m->lcomm, NULL);
    default: return loomInternalError;
    }
}

/* Whether the communicator's kernels can use a buffer as it is. */
static bool usable(const mca_coll_loom_module_t *m, loomPointerInfo_t info)
{
    return loomMemoryHost != info.kind && info.device == m->gpu_device;
}

/* One block of the output back from the staged buffer: now (a call that
 * finishes here), or recorded for the request's completion (staged). */
static loomResult_t out_block(mca_coll_loom_module_t *m, loomStaged_t staged, char *dst, const char *src, size_t bytes)
{
    return NULL != staged ? loomStagedOut(staged, dst, src, bytes) : loomCommStageOut(m->lcomm, dst, src, bytes);
}

/* The output's blocks: the whole buffer, or the v-forms' blocks only (gaps are the caller's). */
static loomResult_t stage_out_blocks(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, loomStaged_t staged,
                                     char *out, const char *kout)
{
    if (!(loomCollAllGather == c->kind && c->ragged) && loomCollAllToAll != c->kind)
        return out_block(m, staged, out, kout, c->out_bytes);
    loomResult_t r = loomSuccess;
    const int n = ompi_comm_size(m->comm);
    for (int q = 0; q < n && loomSuccess == r; ++q)
        if (c->counts[q]) r = out_block(m, staged, out + c->displs[q], kout + c->displs[q], c->counts[q]);
    return r;
}

/* Runs the call, moving this rank's buffers through a staging buffer where
 * the kernels cannot use them (host memory, another GPU). A non-blocking
 * call returns after the launch (*deferred: its request completes by
 * progress); where it stages, through a buffer of its own whose copies back
 * run at completion (*staged, loomStagedCreate: no wait on other ranks here).
 * Blocking calls, and non-blocking ones where no such buffer can be had,
 * stage through the communicator's scratch buffer and finish here. */
static loomResult_t run_here(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, loomPointerInfo_t in_info,
                             loomPointerInfo_t out_info, mca_coll_loom_timer_t *timer, bool *deferred,
                             loomStaged_t *staged)
{
    const char *in = (const char *)c->in;
    char *out = (char *)c->out;
    const bool in_inside_out = c->in_bytes && c->out_bytes && in >= out && in + c->in_bytes <= out + c->out_bytes;
    const bool stage_out = c->out_bytes && !usable(m, out_info);
    const bool stage_in = c->in_bytes && (in_inside_out ? stage_out : !usable(m, in_info));
    const size_t out_at = stage_in && !in_inside_out ? (c->in_bytes + 255) / 256 * 256 : 0;
    const bool stages = stage_in || stage_out;
    const size_t scratch_bytes = out_at + (stage_out ? c->out_bytes : 0);
    void *scratch = NULL;
    loomResult_t r = loomSuccess;
    *staged = NULL;
    if (stages && NULL != c->req) r = loomStagedCreate(m->lcomm, scratch_bytes, &scratch, staged);
    if (stages && loomSuccess == r && NULL == *staged) r = loomCommScratch(m->lcomm, scratch_bytes, &scratch);
    const char *kin = in;
    char *kout = out;
    if (loomSuccess == r && stage_out) kout = (char *)scratch + out_at;
    if (loomSuccess == r && stage_in) {
        kin = in_inside_out ? kout + (in - out) : (const char *)scratch;
        r = NULL != *staged ? loomStagedIn(*staged, (void *)kin, in, c->in_bytes)
                            : loomCommStageIn(m->lcomm, (void *)kin, in, c->in_bytes);
    }
    if (!c->in_bytes && in == (const char *)out) kin = kout; /* a broadcast's receiver: in is out */
    if (loomSuccess == r) r = launch(m, c, kin, kout);
    mca_coll_loom_timer_posted(timer);
    if (loomSuccess == r && NULL != c->then) r = c->then->run(c->then, m->lcomm);
    mca_coll_loom_timer_mark(timer, LOOM_PROFILE_ENQUEUE);
    if (loomSuccess == r && stage_out && NULL != *staged) r = stage_out_blocks(m, c, *staged, out, kout);
    *deferred = loomSuccess == r && NULL != c->req && (NULL != *staged || !stages);
    if (*deferred) return r;
    if (NULL != *staged) { /* the launch failed: nothing to copy back (and the error is the call's) */
        loomStagedFinish(*staged, 0);
        *staged = NULL;
    }
    if (loomSuccess == r) r = loomCommWait(m->lcomm);
    mca_coll_loom_timer_mark(timer, LOOM_PROFILE_WAIT);
    if (loomSuccess == r && stage_out) r = stage_out_blocks(m, c, NULL, out, kout);
    mca_coll_loom_timer_mark(timer, LOOM_PROFILE_STAGE);
    return r;
}

static bool stay_off(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, bool local_gpu, const char *why)
{
    if (local_gpu) mca_coll_loom_report_why(m, c->coll, why);
    return false;
}

/* A module whose host-side set-up timed out (said then, once): the call fails. */
static bool broken(int *rc)
{
    *rc = MPI_ERR_OTHER;
    return true;
}

bool mca_coll_loom_gpu_takes(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, bool local_gpu, int *rc)
{
    *rc = MPI_SUCCESS;
    if (LOOM_GPU_BROKEN == m->gpu_state) return broken(rc);
    /* A non-blocking call never waits on the host for other ranks: it takes
     * loom's kernels once the loom communicator exists, made by a blocking
     * collective on device buffers or by the non-blocking set-up inside
     * progress (coll_loom_defer.h: a call that gets here before is on the
     * previous module on every rank), and it runs none of the one-time
     * agreements itself. Open MPI makes such calls from inside progress (a
     * communicator's context id is agreed through MPI_Iallreduce on its
     * parent): a blocking wait there deadlocks under MPI_THREAD_MULTIPLE. */
    if (NULL != c->req && LOOM_GPU_UNKNOWN == m->gpu_state)
        return stay_off(m, c, local_gpu, "a non-blocking call before the communicator's loom communicator was "
                                         "made (by a blocking collective on device buffers, or by the "
                                         "non-blocking set-up at a vote point: coll_loom_defer.h)");
    mca_coll_loom_setup_bound(m, local_gpu);
    mca_coll_loom_probe(m);
    if (LOOM_GPU_BROKEN == m->gpu_state) return broken(rc);
    if (NULL != c->why_not) return stay_off(m, c, local_gpu, c->why_not);
    /* Host buffers here, so (promised) host buffers on every rank. */
    if (!local_gpu && mca_coll_loom_component.uniform_memory) return false;
    if (OMPI_COMM_IS_INTER(m->comm)) return stay_off(m, c, local_gpu, mca_coll_loom_why_intercomm);
    if (!m->gpu_capable) return stay_off(m, c, local_gpu, "a rank of the communicator sees no GPU");
    if (LOOM_GPU_UNAVAILABLE == m->gpu_state) return stay_off(m, c, local_gpu, "no loom communicator (see above)");
    if (NULL != c->req) {
        /* The exchanges and scans: once their pairs are connected (by a
         * blocking one, alike on every rank). */
        int connected = 1;
        const bool pairs = loomCollAllToAll == c->kind || loomCollScan == c->kind || loomCollExScan == c->kind;
        if (pairs && loomSuccess == loomCommPeersConnected(m->lcomm, &connected) && !connected)
            return stay_off(m, c, local_gpu, "a non-blocking exchange or scan before a blocking one connected "
                                             "every pair of ranks");
    }
    if (LOOM_GPU_UNKNOWN == m->gpu_state) {
        /* Does any rank have device buffers? Only then is a loom communicator made. */
        int any = 0;
        if (MPI_SUCCESS != mca_coll_loom_any_device_buffers(m, local_gpu, &any) && LOOM_GPU_BROKEN == m->gpu_state)
            return broken(rc);
        if (!any) return false;
        /* On the GPU of this rank's buffers (the current one when both are in host memory). */
        const loomPointerInfo_t out_info = mca_coll_loom_where(c->out), in_info = mca_coll_loom_where(c->in);
        const loomPointerInfo_t info = loomMemoryHost != out_info.kind ? out_info : in_info;
        int device = loomMemoryHost != info.kind ? info.device : -1;
        const int made = mca_coll_loom_create_comm(m, device);
        if (LOOM_GPU_BROKEN == m->gpu_state) return broken(rc);
        m->gpu_state = made ? LOOM_GPU_READY : LOOM_GPU_UNAVAILABLE;
        if (LOOM_GPU_READY != m->gpu_state) return false;
        m->gpu_device = device;
        if (device < 0) loomCommDevice(m->lcomm, &m->gpu_device);
        m->pairs_unconnected = true;
    }
    return true;
}

/* A buffer MPI forbids where the call moves bytes (NULL, or MPI_IN_PLACE
 * left as an output: Open MPI's argument checks let both through): the
 * call's error on this rank before anything is staged or enqueued, so that a
 * call made so on every rank leaves loom's communicator usable. */
static bool forbidden_buffer(const mca_coll_loom_module_t *m, const loom_gpu_call_t *c)
{
    const bool bad_in = c->in_bytes && (NULL == c->in || MPI_IN_PLACE == c->in);
    const bool bad_out = c->out_bytes && (NULL == c->out || MPI_IN_PLACE == c->out);
    if (!bad_in && !bad_out) return false;
    const void *p = bad_in ? c->in : c->out;
    opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: %s: the %s buffer is %s with %zu bytes "
                "to move: MPI_ERR_BUFFER", ompi_comm_rank(m->comm), m->comm->c_name,
                mca_coll_loom_coll_names[c->coll], bad_in ? "input" : "output",
                NULL == p ? "NULL" : "MPI_IN_PLACE", bad_in ? c->in_bytes : c->out_bytes);
    return true;
}

int mca_coll_loom_gpu_exec(mca_coll_loom_module_t *m, const loom_gpu_call_t *c)
{
    if (forbidden_buffer(m, c)) return mca_coll_loom_after_run(c->after, MPI_ERR_BUFFER);
    mca_coll_loom_note(m, c->coll, LOOM_PATH_GPU);
    mca_coll_loom_timer_t timer;
    mca_coll_loom_timer_start(&m->profile, &timer, c->coll, c->in_bytes > c->out_bytes ? c->in_bytes : c->out_bytes);
    const loomPointerInfo_t in_info = c->located ? c->in_info : mca_coll_loom_where(c->in);
    const loomPointerInfo_t out_info = c->located ? c->out_info : mca_coll_loom_where(c->out);
    mca_coll_loom_timer_mark(&timer, LOOM_PROFILE_WHERE);
    bool deferred = false;
    loomStaged_t staged = NULL;
    /* A call made by progress that runs inside this thread's call on the
     * same communicator (Open MPI's own collectives for an MPI_Comm_idup
     * still pending, progressed while loom's bootstrap waits): loom's
     * communicator is mid-call, and its lock is this thread's. */
    if (__atomic_load_n(&m->busy, __ATOMIC_ACQUIRE) && pthread_equal(m->call_owner, pthread_self())) {
        opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: %s started from inside another "
                    "collective on the same communicator (Open MPI progressed a pending operation, such as "
                    "MPI_Comm_idup, while loom was setting up); not supported: finish such operations first",
                    ompi_comm_rank(m->comm), m->comm->c_name, mca_coll_loom_coll_names[c->coll]);
        return mca_coll_loom_after_run(c->after, MPI_ERR_OTHER);
    }
    OPAL_THREAD_LOCK(&m->call_lock); /* another thread's progress leaves this loom communicator alone */
    m->call_owner = pthread_self();
    __atomic_store_n(&m->busy, true, __ATOMIC_RELEASE); /* and so does progress run from inside this call */
    loomResult_t r = run_here(m, c, in_info, out_info, &timer, &deferred, &staged);
    __atomic_store_n(&m->busy, false, __ATOMIC_RELEASE);
    mca_coll_loom_timer_stop(&timer);
    if (loomSuccess != r) mca_coll_loom_report_error(m, mca_coll_loom_coll_names[c->coll], r);
    int rc = mca_coll_loom_mpi_error(r);
    if (NULL != c->req && deferred) /* the request's mark goes on the loom communicator too */
        rc = mca_coll_loom_request_pending(m, c, staged);
    else if (NULL != c->req)
        rc = mca_coll_loom_request_done(m, c->coll, mca_coll_loom_after_run(c->after, rc), c->req);
    else
        rc = mca_coll_loom_after_run(c->after, rc);
    OPAL_THREAD_UNLOCK(&m->call_lock);
    if (NULL == c->req) mca_coll_loom_requests_settle(m);
    return rc;
}

bool mca_coll_loom_gpu_run(mca_coll_loom_module_t *m, loom_gpu_call_t *c, bool local_gpu, int *rc)
{
    if (!mca_coll_loom_gpu_takes(m, c, local_gpu, rc)) return false;
    if (MPI_SUCCESS == *rc) *rc = mca_coll_loom_gpu_exec(m, c);
    return true;
}
