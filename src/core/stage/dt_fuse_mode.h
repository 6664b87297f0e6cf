/*
 * Which side of a datatype exchange its kernel reads or writes in place,
 * per call (LOOM_DT_FUSE, src/base/param_table.cc): 0 neither (the pack
 * and unpack kernels run around the call), 1 both, 2 the side this rank
 * copies itself in a direct pair (the receive side pulled, the send side
 * pushed), so that the other side, packed, stays readable in place by the
 * peer. -1 is 2 where that side has a block of at least LOOM_DT_FUSE_BYTES
 * and pieces that are not small, else 0: whole-GPU pack and unpack passes
 * run at HBM speed, the exchange kernel's in-place copy per CTA at 60-80%
 * of a plain copy and at 1-3% for small pieces (a struct's fields, which
 * only the whole-GPU kernels copy a lane each), so one pass less pays for
 * large blocks of long pieces only (docs/performance.md). Each rank decides
 * alone: mode 2 changes nothing its peers read or write.
 */
#pragma once

#include <algorithm>
#include <cstddef>

#include "core/comm/params.h"
#include "device/datatype/dt_view.h"

namespace loom {

// views[0], counts[0]: the send side's view (no blocks where the side is
// contiguous) and packed bytes per peer; [1] the receive side's. push: the
// call's direct pairs are copied by their senders, so this rank copies its
// send side itself; else its receive side.
inline int dtFuseMode(const Params &p, bool push, const DtView views[2], const size_t *const counts[2], int n) {
    if (p.dtFuse >= 0) return p.dtFuse;
    const int side = push ? 0 : 1;
    const DtView &copied = views[side];
    if (!copied.nblocks || dtPiecesAreSmall(copied.bytes, copied.pieces)) return 0;
    size_t largest = 0;
    for (int q = 0; q < n; ++q) largest = std::max(largest, counts[side][q]);
    return largest >= (size_t)p.dtFuseBytes ? 2 : 0;
}

} // namespace loom
