// The datatype plan's copy kernel (dt_copy.h).
#include "device/datatype/dt_copy.h"

#include <cstring>

#include "device/kernel_load.h"

namespace loom {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kDtUnroll = 4; // words in flight per lane

// A warp's copy of nr runs of unitsPerRun words of T: run r from
// src + r * sStride to dst + r * dStride. Every lane loads its kDtUnroll
// words before it stores them.
template <typename T>
__device__ void warpRuns(const char *src, int64_t sStride, char *dst, int64_t dStride, uint32_t unitsPerRun,
                         uint32_t units, int lane) {
    for (uint32_t base = lane; base < units; base += 32 * kDtUnroll) {
        T v[kDtUnroll];
        uint32_t run[kDtUnroll], word[kDtUnroll];
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j) {
            const uint32_t i = base + 32 * j;
            run[j] = i / unitsPerRun;
            word[j] = i - run[j] * unitsPerRun;
            if (i < units) v[j] = reinterpret_cast<const T *>(src + (int64_t)run[j] * sStride)[word[j]];
        }
#pragma unroll
        for (int j = 0; j < kDtUnroll; ++j)
            if (base + 32 * j < units) reinterpret_cast<T *>(dst + (int64_t)run[j] * dStride)[word[j]] = v[j];
    }
}

// nr runs of n bytes, in the widest word every address, length and stride allows.
__device__ void warpCopy(const char *src, int64_t sStride, char *dst, int64_t dStride, uint32_t n, uint32_t nr,
                         int lane) {
    switch (dtWordBytes((uintptr_t)src, (uintptr_t)dst, n, nr, sStride, dStride)) {
    case 16: warpRuns<uint4>(src, sStride, dst, dStride, n / 16, nr * (n / 16), lane); break;
    case 8: warpRuns<uint2>(src, sStride, dst, dStride, n / 8, nr * (n / 8), lane); break;
    case 4: warpRuns<unsigned>(src, sStride, dst, dStride, n / 4, nr * (n / 4), lane); break;
    case 2: warpRuns<unsigned short>(src, sStride, dst, dStride, n / 2, nr * (n / 2), lane); break;
    default: warpRuns<unsigned char>(src, sStride, dst, dStride, n, nr * n, lane);
    }
}

__global__ void dtCopyKernel(const DtPlanDev p, uint64_t count, const char *user, char *packed, bool unpack) {
    const bool inline_ = p.nsegs <= kDtInlineSegs;
    const loom_dt_seg_t *segs = inline_ ? p.segs : p.tableSegs;
    const uint64_t *first = inline_ ? p.firstPiece : p.tableFirst;
    const uint64_t perElement = p.pieces, total = perElement * count;
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * kWarps;
    for (uint64_t w = blockIdx.x * (uint64_t)kWarps + threadIdx.x / 32; w < total; w += warps) {
        const DtPiece pc = dtPieceAt(segs, first, p.nsegs, perElement, p.extent, p.bytes, w);
        char *u = const_cast<char *>(user) + pc.user;
        char *k = packed + pc.packed;
        if (unpack) warpCopy(k, (int64_t)pc.n, u, pc.stride, pc.n, pc.nr, lane);
        else warpCopy(u, pc.stride, k, (int64_t)pc.n, pc.n, pc.nr, lane);
    }
}

} // namespace

size_t dtTableBytes(int nsegs) {
    return nsegs <= kDtInlineSegs ? 0 : nsegs * sizeof(loom_dt_seg_t) + (nsegs + 1) * sizeof(uint64_t);
}

void dtPlanDev(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t bytes, void *hostTable,
               const void *devTable, DtPlanDev *p) {
    memset(p, 0, sizeof(*p));
    const bool inline_ = nsegs <= kDtInlineSegs;
    loom_dt_seg_t *s = inline_ ? p->segs : static_cast<loom_dt_seg_t *>(hostTable);
    uint64_t *first = inline_ ? p->firstPiece : reinterpret_cast<uint64_t *>(s + nsegs);
    first[0] = 0;
    for (int k = 0; k < nsegs; ++k) {
        s[k] = segs[k];
        first[k + 1] = first[k] + dtSegPieces(segs[k]);
    }
    if (!inline_) {
        p->tableSegs = static_cast<const loom_dt_seg_t *>(devTable);
        p->tableFirst = reinterpret_cast<const uint64_t *>(p->tableSegs + nsegs);
    }
    p->pieces = first[nsegs];
    p->nsegs = nsegs;
    p->extent = extent;
    p->bytes = bytes;
}

cudaError_t launchDtCopy(const DtPlanDev &plan, size_t count, const void *user, void *packed, bool unpack, int ctas,
                         cudaStream_t stream) {
    if (count == 0 || plan.nsegs == 0 || plan.pieces == 0) return cudaSuccess;
    if (ctas <= 0) {
        const uint64_t warps = plan.pieces * count, want = (warps + kWarps - 1) / kWarps;
        ctas = want < 1024 ? (int)want : 1024;
    }
    dtCopyKernel<<<ctas, kThreads, 0, stream>>>(plan, count, static_cast<const char *>(user),
                                                 static_cast<char *>(packed), unpack);
    return cudaGetLastError();
}

cudaError_t loadDtCopyKernels(KernelLoad *l) { return loadKernels(l, dtCopyKernel); }

} // namespace loom
