/*
 * Non-contiguous datatypes packed and unpacked on the GPU for the
 * component (loom_component.h: loomCommPackedBuffer, loomCommDtPack,
 * loomCommDtUnpack), with the plan kernel of device/datatype/dt_copy.h.
 *
 * Ordering, the invariant that makes one buffer per direction enough: a
 * pack or unpack goes on loom's stream as a collective's kernel does,
 * after the application's legacy-stream work (orderAfterApplication) and
 * after a non-blocking call still pending on the resident kernel
 * (residentOrder: it may still read an earlier packed input or write the
 * user buffer this pack reads). Every reader and writer of the packed
 * buffers and of the long plans' device table is then on loom's stream in
 * call order, so the next call may overwrite them; a buffer outgrown is
 * retired, not freed (growDeviceBuffer), since the stream may still use it.
 */
#include <cstring>
#include <vector>

#include "base/debug.h"
#include "core/comm/comm.h"
#include "core/comm/on_device.h"
#include "core/stream/pinned_uploads.h"
#include "core/stream/resident.h"
#include "device/datatype/dt_copy.h"
#include "loom_component.h"

namespace {

using namespace loom;

loomResult_t dtCopy(loomComm *comm, const loomDtLayout_t *l, size_t count, const void *user, void *packed,
                    bool unpack) {
    const char *what = unpack ? "loomCommDtUnpack" : "loomCommDtPack";
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    if (comm->ras.failed) return failedEarlier(comm, what);
    if (!l || l->nsegs < 0 || (l->nsegs && !l->segs)) return fail(loomInvalidArgument, "%s: no layout", what);
    if (count == 0 || l->nsegs == 0 || l->bytes == 0) return loomSuccess;
    if (!user || !packed) return fail(loomInvalidArgument, "%s: NULL %s buffer", what, user ? "packed" : "user");
    OnDevice on(comm->cudaDev);
    if (comm->resident) residentOrder(comm);
    orderAfterApplication(comm, comm->stream);
    const size_t tableBytes = dtTableBytes(l->nsegs);
    std::vector<char> table(tableBytes);
    if (tableBytes) {
        void *was = comm->stage.dtTable;
        loomResult_t r = growDeviceBuffer(comm, &comm->stage.dtTable, &comm->stage.dtTableBytes, tableBytes,
                                          "datatype plan table");
        if (r != loomSuccess) return r;
        if (comm->stage.dtTable != was) comm->stage.dtTableLast.clear(); // a new buffer holds nothing yet
    }
    DtPlanDev plan;
    dtPlanDev(l->segs, l->nsegs, l->extent, l->bytes, table.data(), comm->stage.dtTable, &plan);
    cudaError_t e = cudaSuccess;
    // A table like the last one uploaded (alltoallw's blocks of one type)
    // is there already: each upload holds a pinned slot until its copy
    // ran, behind the call's kernel for an unpack (pinned_uploads.h).
    std::vector<char> &last = comm->stage.dtTableLast;
    if (tableBytes && (last.size() != tableBytes || memcmp(last.data(), table.data(), tableBytes) != 0)) {
        e = PinnedUploads::upload(comm, comm->stage.dtTable, table.data(), tableBytes, comm->stream);
        if (e == cudaSuccess) last = table;
        else last.clear();
    }
    if (e == cudaSuccess) e = launchDtCopy(plan, count, user, packed, unpack, 0, comm->stream);
    if (e != cudaSuccess) return cudaFailed(comm, unpack ? "unpacking a datatype" : "packing a datatype", "launch", e);
    streamBusy(comm);
    return loomSuccess;
}

} // namespace

extern "C" loomResult_t loomCommPackedBuffer(loomComm_t comm, int which, size_t bytes, void **ptr) {
    if (!comm || !ptr || (which != 0 && which != 1))
        return fail(loomInvalidArgument, "loomCommPackedBuffer: %s", !comm || !ptr ? "NULL argument" : "which is 0 or 1");
    loomResult_t r = growDeviceBuffer(comm, &comm->stage.packed[which], &comm->stage.packedBytes[which],
                                      bytes ? bytes : 1, which ? "packed output" : "packed input");
    if (r == loomSuccess) *ptr = comm->stage.packed[which];
    return r;
}

extern "C" loomResult_t loomCommDtPack(loomComm_t comm, const loomDtLayout_t *layout, size_t count, const void *user,
                                       void *packed) {
    return dtCopy(comm, layout, count, user, packed, false);
}

extern "C" loomResult_t loomCommDtUnpack(loomComm_t comm, const loomDtLayout_t *layout, size_t count,
                                         const void *packed, void *user) {
    return dtCopy(comm, layout, count, user, const_cast<void *>(packed), true);
}
