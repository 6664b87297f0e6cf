/*
 * One warp's copy of a datatype piece (dt_pieces.h), or one lane's of a
 * small one, shared by the plan kernels (dt_copy.cu) and kernels that read
 * or write a packed view in place (dt_view_copy.h). A piece is nr runs of
 * n bytes in the user's layout, `stride` apart, and the same bytes back to
 * back in a flat buffer (packed bytes, a FIFO slot, a peer's block): only
 * the user's side needs a run's place. Each lane keeps kDtUnroll words in
 * flight, the widest words (dtPartWordBytes, dt_pieces.h) that every
 * address, length and stride of the piece, and the ends of its part being
 * copied, allow.
 */
#pragma once

#include <cstdint>

#include "device/datatype/dt_pieces.h"

namespace loom {

// Words in flight per lane (8 was no faster per CTA and spilled in the
// exchange kernel, 16 slower still: docs/performance.md).
constexpr int kDtUnroll = 4;

template <typename T>
__device__ inline T *dtUserWord(char *user, int64_t stride, DtRunWord p) {
    return reinterpret_cast<T *>(user + (int64_t)p.run * stride) + p.word;
}

// Words [u0, u1) of the piece (unitsPerRun words of T to a run) by kLanes
// lanes (32: the warp, every lane calling it; 1: this lane alone, lane 0),
// a lane's words kLanes apart: each lane loads its kDtUnroll words before
// it stores them. The stores step through the same words again rather
// than keep their places in registers.
template <typename T, bool kToUser, uint32_t kLanes>
__device__ inline void dtRuns(char *user, int64_t stride, char *flat, uint32_t unitsPerRun, uint32_t u0, uint32_t u1,
                              int lane) {
    T *f = reinterpret_cast<T *>(flat);
    const DtRunStep step(kLanes, unitsPerRun);
    DtRunWord at = step.at(u0 + lane);
    for (uint32_t base = u0 + lane; base < u1; base += kLanes * kDtUnroll) {
        T v[kDtUnroll];
        DtRunWord load = at;
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j, step.next(load)) {
            // L2 only (as Simple reads its slots): the source may be a FIFO
            // slot or a block another GPU wrote, whose lines this SM may hold
            // from an earlier step.
            const uint32_t i = base + kLanes * j;
            if (i < u1) v[j] = __ldcg(kToUser ? f + i : dtUserWord<T>(user, stride, load));
        }
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j, step.next(at)) {
            const uint32_t i = base + kLanes * j;
            if (i < u1) *(kToUser ? dtUserWord<T>(user, stride, at) : f + i) = v[j];
        }
    }
}

// Bytes [lo, hi) of the piece's nr runs of n bytes (counted run after
// run) between user (runs stride apart) and flat (back to back): by the
// warp (every lane calls it), or by this lane alone.
template <bool kAlone = false>
__device__ inline void dtPieceCopy(char *user, int64_t stride, char *flat, uint32_t n, uint32_t nr, uint32_t lo,
                                   uint32_t hi, bool toUser, int lane) {
    const uint32_t w = dtPartWordBytes((uintptr_t)user, (uintptr_t)flat, n, nr, stride, (int64_t)n, lo, hi);
    constexpr uint32_t kLanes = kAlone ? 1 : 32;
    const auto runs = [&](auto word) {
        using T = decltype(word);
        const uint32_t b = sizeof(T);
        if (toUser) dtRuns<T, true, kLanes>(user, stride, flat, n / b, lo / b, hi / b, kAlone ? 0 : lane);
        else dtRuns<T, false, kLanes>(user, stride, flat, n / b, lo / b, hi / b, kAlone ? 0 : lane);
    };
    switch (w) {
    case 16: runs(uint4{}); break;
    case 8: runs(uint2{}); break;
    case 4: runs(0u); break;
    case 2: runs((unsigned short)0); break;
    default: runs((unsigned char)0);
    }
}

} // namespace loom
