/*
 * One warp's copy of a datatype piece (dt_pieces.h), or one lane's of a
 * small one, shared by the plan kernels (dt_copy.cu) and kernels that read
 * or write a packed view in
 * place (dt_view_copy.h). Each lane keeps kDtUnroll words in flight, the
 * widest words (dtPartWordBytes, dt_pieces.h) that every address, length
 * and stride of the piece, and the ends of its part being copied, allow.
 */
#pragma once

#include <cstdint>

#include "device/datatype/dt_pieces.h"

namespace loom {

// Words in flight per lane (8 was slower: docs/performance.md).
constexpr int kDtUnroll = 4;

// Words [u0, u1) of nr runs of unitsPerRun words of T, counted run after
// run: run r from src + r x sStride to dst + r x dStride. Every lane loads
// its kDtUnroll words before it stores them.
template <typename T>
__device__ inline void dtWarpRuns(const char *src, int64_t sStride, char *dst, int64_t dStride, uint32_t unitsPerRun,
                                  uint32_t u0, uint32_t u1, int lane) {
    for (uint32_t base = u0 + lane; base < u1; base += 32 * kDtUnroll) {
        T v[kDtUnroll];
        uint32_t run[kDtUnroll], word[kDtUnroll];
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j) {
            const uint32_t i = base + 32 * j;
            run[j] = i / unitsPerRun;
            word[j] = i - run[j] * unitsPerRun;
            // L2 only (as Simple reads its slots): src may be a FIFO slot or a
            // block another GPU wrote, whose lines this SM may hold from an
            // earlier step.
            if (i < u1) v[j] = __ldcg(reinterpret_cast<const T *>(src + (int64_t)run[j] * sStride) + word[j]);
        }
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j)
            if (base + 32 * j < u1) reinterpret_cast<T *>(dst + (int64_t)run[j] * dStride)[word[j]] = v[j];
    }
}

// One lane's copy of bytes [lo, hi) of a piece's runs (a small piece: the
// warp's other lanes copy other pieces), kDtUnroll words loaded before
// they are stored.
template <typename T>
__device__ inline void dtLaneRuns(const char *src, int64_t sStride, char *dst, int64_t dStride, uint32_t unitsPerRun,
                                  uint32_t u0, uint32_t u1) {
    uint32_t run = u0 / unitsPerRun, word = u0 - run * unitsPerRun;
    for (uint32_t base = u0; base < u1; base += kDtUnroll) {
        T v[kDtUnroll];
        uint32_t r = run, w = word;
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j) {
            if (base + j < u1) v[j] = __ldcg(reinterpret_cast<const T *>(src + (int64_t)r * sStride) + w);
            if (++w == unitsPerRun) w = 0, ++r;
        }
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j) {
            if (base + j < u1) reinterpret_cast<T *>(dst + (int64_t)run * dStride)[word] = v[j];
            if (++word == unitsPerRun) word = 0, ++run;
        }
    }
}

// Bytes [lo, hi) of nr runs of n bytes (counted run after run), src's runs
// sStride apart, dst's dStride apart: by the warp (every lane calls it), or
// by this lane alone.
template <bool kAlone = false>
__device__ inline void dtPieceCopy(const char *src, int64_t sStride, char *dst, int64_t dStride, uint32_t n,
                                   uint32_t nr, uint32_t lo, uint32_t hi, int lane) {
    const uint32_t w = dtPartWordBytes((uintptr_t)src, (uintptr_t)dst, n, nr, sStride, dStride, lo, hi);
    const auto runs = [&](auto word) {
        using T = decltype(word);
        const uint32_t b = sizeof(T);
        if (kAlone) dtLaneRuns<T>(src, sStride, dst, dStride, n / b, lo / b, hi / b);
        else dtWarpRuns<T>(src, sStride, dst, dStride, n / b, lo / b, hi / b, lane);
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
