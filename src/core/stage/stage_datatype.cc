/*
 * Non-contiguous datatypes packed and unpacked on the GPU for the
 * component (loom_component.h: loomCommPackedBuffer, loomCommDtPack,
 * loomCommDtUnpack, and the *Blocks forms for a call's blocks of several
 * types), with the kernels of device/datatype/dt_copy.h; and exchanges
 * whose blocks stay in their datatypes' layouts (loomExchangeTyped): the
 * exchange kernel reads and writes them in place through packed views
 * (device/datatype/dt_view.h), with no packed copy, where the call goes to
 * it; other calls are packed and unpacked around.
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
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/debug.h"
#include "core/comm/comm.h"
#include "core/comm/on_device.h"
#include "core/stream/pinned_uploads.h"
#include "core/stream/resident.h"
#include "device/datatype/dt_copy.h"
#include "device/datatype/dt_view_build.h"
#include "core/enqueue/exchange_views.h"
#include "core/stage/dt_fuse_mode.h"
#include "core/select/select.h"
#include "loom_component.h"

namespace {

using namespace loom;

// The checks and the ordering every pack and unpack starts with; false:
// *r is the answer (an error, or success with nothing to do when !work).
bool dtStart(loomComm *comm, const char *what, bool work, const void *user, const void *packed, loomResult_t *r) {
    *r = loomSuccess;
    if (comm->ras.failed) *r = failedEarlier(comm, what);
    else if (work && (!user || !packed))
        *r = fail(loomInvalidArgument, "%s: NULL %s buffer", what, user ? "packed" : "user");
    if (*r != loomSuccess || !work) return false;
    if (comm->resident) residentOrder(comm);
    orderAfterApplication(comm, comm->stream);
    return true;
}

// The device table (of `bytes`) the next kernel reads, grown when needed;
// fill(devTable, image) builds its host image for that address. Uploaded
// unless it holds that image already (alltoallw's blocks of one type, a
// loop's repeated call): each upload holds a pinned slot until its copy
// ran, behind the call's kernel for an unpack (pinned_uploads.h).
template <typename Fill> cudaError_t dtTable(loomComm *comm, size_t bytes, Fill fill, loomResult_t *r) {
    *r = loomSuccess;
    std::vector<char> image;
    if (bytes) {
        void *was = comm->stage.dtTable;
        *r = growDeviceBuffer(comm, &comm->stage.dtTable, &comm->stage.dtTableBytes, bytes, "datatype plan table");
        if (*r != loomSuccess) return cudaSuccess;
        if (comm->stage.dtTable != was) comm->stage.dtTableLast.clear(); // a new buffer holds nothing yet
    }
    fill(comm->stage.dtTable, &image);
    std::vector<char> &last = comm->stage.dtTableLast;
    if (image.empty() || (last.size() == image.size() && memcmp(last.data(), image.data(), image.size()) == 0))
        return cudaSuccess;
    const cudaError_t e = PinnedUploads::upload(comm, comm->stage.dtTable, image.data(), image.size(), comm->stream);
    if (e == cudaSuccess) last.swap(image);
    else last.clear();
    return e;
}

loomResult_t dtLaunched(loomComm *comm, bool unpack, cudaError_t e) {
    if (e != cudaSuccess) return cudaFailed(comm, unpack ? "unpacking a datatype" : "packing a datatype", "launch", e);
    streamBusy(comm);
    return loomSuccess;
}

loomResult_t dtCopy(loomComm *comm, const loomDtLayout_t *l, size_t count, const void *user, void *packed,
                    bool unpack) {
    const char *what = unpack ? "loomCommDtUnpack" : "loomCommDtPack";
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    if (!l || l->nsegs < 0 || (l->nsegs && !l->segs)) return fail(loomInvalidArgument, "%s: no layout", what);
    loomResult_t r;
    OnDevice on(comm->cudaDev);
    if (!dtStart(comm, what, count != 0 && l->nsegs != 0 && l->bytes != 0, user, packed, &r)) return r;
    loom_dt_seg_t one;
    loomDtLayout_t folded;
    if (dtFoldElements(l->segs, l->nsegs, l->extent, count, &one)) { // count elements as one
        folded = loomDtLayout_t{&one, 1, l->extent * (int64_t)count, l->bytes * count};
        l = &folded;
        count = 1;
    }
    DtPlanDev plan;
    cudaError_t e = dtTable(comm, dtTableBytes(l->nsegs), [&](const void *dev, std::vector<char> *image) {
        image->resize(dtTableBytes(l->nsegs));
        dtPlanDev(l->segs, l->nsegs, l->extent, l->bytes, image->data(), dev, &plan);
    }, &r);
    if (r != loomSuccess) return r;
    if (e == cudaSuccess) e = launchDtCopy(plan, count, user, packed, unpack, 0, comm->stream);
    return dtLaunched(comm, unpack, e);
}

// A view's layouts as the builder takes them; false: a layout without segments.
bool viewLayouts(const loomDtView_t *v, std::vector<DtViewLayout> *ls, std::vector<DtViewInput> *ins) {
    ls->resize((size_t)v->nlayouts);
    for (int k = 0; k < v->nlayouts; ++k) {
        const loomDtLayout_t &l = v->layouts[k];
        if (l.nsegs < 0 || (l.nsegs && !l.segs)) return false;
        (*ls)[k] = DtViewLayout{l.segs, l.nsegs, l.extent, l.bytes};
    }
    ins->resize((size_t)v->nblocks);
    for (int k = 0; k < v->nblocks; ++k) {
        const loomDtBlock_t &b = v->blocks[k];
        (*ins)[k] = DtViewInput{b.layout, b.count, b.user, b.packed};
    }
    return true;
}

bool badView(const loomDtView_t *v) {
    return v && (v->nlayouts < 0 || v->nblocks < 0 || (v->nlayouts && !v->layouts) || (v->nblocks && !v->blocks));
}

// Every typed block of a call in one kernel, over a packed view (device/datatype/dt_view.h).
loomResult_t dtCopyBlocks(loomComm *comm, const loomDtLayout_t *layouts, int nlayouts, const loomDtBlock_t *blocks,
                          int nblocks, const void *user, void *packed, bool unpack) {
    const char *what = unpack ? "loomCommDtUnpackBlocks" : "loomCommDtPackBlocks";
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    const loomDtView_t view = {layouts, nlayouts, blocks, nblocks};
    if (badView(&view)) return fail(loomInvalidArgument, "%s: no layouts or blocks", what);
    if (nblocks == 1 && blocks[0].layout >= 0 && blocks[0].layout < nlayouts) // one block: the plan kernel
        return dtCopy(comm, &layouts[blocks[0].layout], blocks[0].count,
                      static_cast<const char *>(user) + blocks[0].user, static_cast<char *>(packed) + blocks[0].packed,
                      unpack);
    std::vector<DtViewLayout> ls;
    std::vector<DtViewInput> ins;
    if (!viewLayouts(&view, &ls, &ins)) return fail(loomInvalidArgument, "%s: a layout without segments", what);
    const DtViewInput *in = ins.data();
    // The view is built twice: once for its size (and to check the blocks),
    // once at the device table's address.
    std::vector<char> probe;
    DtView v;
    if (!dtViewBuild(ls.data(), nlayouts, in, nblocks, nullptr, &probe, &v))
        return fail(loomInvalidArgument, "%s: blocks out of packed order, overlapping, or of an unknown layout", what);
    loomResult_t r;
    OnDevice on(comm->cudaDev);
    if (!dtStart(comm, what, v.pieces != 0, user, packed, &r)) return r;
    cudaError_t e = dtTable(comm, probe.size(), [&](const void *dev, std::vector<char> *image) {
        dtViewBuild(ls.data(), nlayouts, in, nblocks, dev, image, &v);
    }, &r);
    if (r != loomSuccess) return r;
    if (e == cudaSuccess) e = launchDtViewCopy(v, user, packed, 0, v.bytes, unpack, comm->stream);
    return dtLaunched(comm, unpack, e);
}

// The bytes of a side's packed blocks (the tables' span).
size_t packedSpan(const size_t *counts, const size_t *displs, int n) {
    size_t span = 0;
    for (int q = 0; q < n; ++q)
        if (counts[q]) span = std::max(span, displs[q] + counts[q]);
    return span;
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

extern "C" loomResult_t loomCommDtPackBlocks(loomComm_t comm, const loomDtLayout_t *layouts, int nlayouts,
                                             const loomDtBlock_t *blocks, int nblocks, const void *user, void *packed) {
    return dtCopyBlocks(comm, layouts, nlayouts, blocks, nblocks, user, packed, false);
}

extern "C" loomResult_t loomCommDtUnpackBlocks(loomComm_t comm, const loomDtLayout_t *layouts, int nlayouts,
                                               const loomDtBlock_t *blocks, int nblocks, const void *packed,
                                               void *user) {
    return dtCopyBlocks(comm, layouts, nlayouts, blocks, nblocks, user, const_cast<void *>(packed), true);
}

// A side not read or written in place (LOOM_DT_FUSE, one-shot calls, a
// communicator of one) is packed into the communicator's packed buffer
// before the exchange or unpacked from it after; the fused sides' views go
// in one image in the datatype table (one upload; the kernel reads it in
// stream order, as the plan kernels do).
extern "C" loomResult_t loomExchangeTyped(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls,
                                          const loomDtView_t *sendView, void *recvbuff, const size_t *recvcounts,
                                          const size_t *rdispls, const loomDtView_t *recvView, size_t agreedBlock,
                                          int fanIn, loomComm_t comm) {
    const char *what = "loomExchangeTyped";
    if (!comm) return fail(loomInvalidArgument, "%s: comm is NULL", what);
    if (badView(sendView) || badView(recvView)) return fail(loomInvalidArgument, "%s: a view without its arrays", what);
    if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        return fail(loomInvalidArgument, "%s: NULL counts or displacements", what);
    if (!sendView && !recvView)
        return exchangeCall(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, agreedBlock, fanIn, nullptr,
                            comm, nullptr);
    OnDevice on(comm->cudaDev);
    const int n = comm->nranks;
    std::vector<DtViewLayout> ls[2];
    std::vector<DtViewInput> ins[2];
    const loomDtView_t *vs[2] = {sendView, recvView};
    std::vector<char> probe[2];
    DtView v[2] = {};
    for (int k = 0; k < 2; ++k) {
        if (!vs[k]) continue;
        if (!viewLayouts(vs[k], &ls[k], &ins[k]) ||
            !dtViewBuild(ls[k].data(), vs[k]->nlayouts, ins[k].data(), vs[k]->nblocks, nullptr, &probe[k], &v[k]))
            return fail(loomInvalidArgument, "%s: %s blocks out of packed order, overlapping, or of an unknown or "
                        "empty layout", what, k ? "receive" : "send");
    }
    // A view must fit its side's tables: its packed bytes are the tables'
    // (the packed copies are sized by them).
    const size_t span[2] = {packedSpan(sendcounts, sdispls, n), packedSpan(recvcounts, rdispls, n)};
    for (int k = 0; k < 2; ++k)
        if (vs[k] && v[k].bytes > span[k])
            return fail(loomInvalidArgument, "%s: the %s view's blocks end at packed byte %llu, past the %zu bytes "
                        "of its counts and displacements", what, k ? "receive" : "send",
                        (unsigned long long)v[k].bytes, span[k]);
    // Which sides the kernel reads or writes in place (dt_fuse_mode.h): none
    // off the exchange kernel.
    const char *why = nullptr;
    const bool kernel = n > 1 && !exchangeOneShot(comm, agreedBlock, &why);
    const bool push = exchangePushes(exchangeKnobs(), fanIn != 0, agreedBlock);
    const size_t *const counts[2] = {sendcounts, recvcounts};
    const int mode = dtFuseMode(params(), push, v, counts, n);
    // A side with one-shot pairs' blocks is packed: LL lines carry plain bytes (exchange_schedule.h).
    const size_t pairs = agreedBlock ? 0 : exchangeOneShotPairBound(comm);
    const bool fuse[2] = {kernel && v[0].nblocks && (mode == 1 || (mode == 2 && push)) &&
                              !exchangeOneShotBlocks(pairs, sendcounts, n, comm->rank),
                          kernel && v[1].nblocks && (mode == 1 || (mode == 2 && !push)) &&
                              !exchangeOneShotBlocks(pairs, recvcounts, n, comm->rank)};
    LOOM_TRACE(kColl, "rank %d: datatype exchange, LOOM_DT_FUSE %d (set %d): send side %s, receive side %s",
               comm->rank, kernel ? mode : 0, params().dtFuse, !sendView ? "contiguous" : fuse[0] ? "in place" : "packed",
               !recvView ? "contiguous" : fuse[1] ? "in place" : "packed");
    const void *in = sendbuff;
    void *out = recvbuff, *packedIn = nullptr, *packedOut = nullptr;
    loomResult_t r = loomSuccess;
    if (sendView && !fuse[0])
        r = loomCommPackedBuffer(comm, 0, span[0], &packedIn);
    if (r == loomSuccess && packedIn)
        r = loomCommDtPackBlocks(comm, sendView->layouts, sendView->nlayouts, sendView->blocks, sendView->nblocks,
                                 sendbuff, packedIn);
    if (r == loomSuccess && recvView && !fuse[1])
        r = loomCommPackedBuffer(comm, 1, span[1], &packedOut);
    if (r != loomSuccess) return r;
    if (packedIn) in = packedIn;
    if (packedOut) out = packedOut;
    ExchangeViews ev{DtView{}, DtView{}, nullptr};
    if (fuse[0] || fuse[1]) {
        // One image: the send view's tables, then the receive view's (16-aligned).
        const size_t outAt = fuse[0] ? (probe[0].size() + 15) / 16 * 16 : 0;
        const size_t bytes = outAt + (fuse[1] ? probe[1].size() : 0);
        cudaError_t e = dtTable(comm, bytes, [&](const void *dev, std::vector<char> *image) {
            std::vector<char> part;
            image->assign(bytes, 0);
            for (int k = 0; k < 2; ++k) {
                if (!fuse[k]) continue;
                dtViewBuild(ls[k].data(), vs[k]->nlayouts, ins[k].data(), vs[k]->nblocks,
                            static_cast<const char *>(dev) + (k ? outAt : 0), &part, &v[k]);
                memcpy(image->data() + (k ? outAt : 0), part.data(), part.size());
            }
        }, &r);
        if (r != loomSuccess) return r;
        if (e != cudaSuccess) return cudaFailed(comm, "alltoallv", "datatype view tables", e);
        if (fuse[0]) ev.in = v[0];
        if (fuse[1]) ev.out = v[1];
        const int me = comm->rank;
        if (fuse[0] && fuse[1] && sendcounts[me]) { // the own block's chunks go through scratch
            void *scratch = nullptr;
            if ((r = loomCommPackedBuffer(comm, 0, sendcounts[me], &scratch)) != loomSuccess) return r;
            ev.selfScratch = static_cast<char *>(scratch);
        }
    }
    r = exchangeCall(in, sendcounts, sdispls, out, recvcounts, rdispls, agreedBlock, fanIn,
                     fuse[0] || fuse[1] ? &ev : nullptr, comm, nullptr);
    if (r == loomSuccess && packedOut)
        r = loomCommDtUnpackBlocks(comm, recvView->layouts, recvView->nlayouts, recvView->blocks, recvView->nblocks,
                                   packedOut, recvbuff);
    return r;
}
