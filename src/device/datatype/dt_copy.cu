// The datatype plan's copy kernel (dt_copy.h).
#include "device/datatype/dt_copy.h"

namespace loom {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// A warp's copy of n bytes from s to d: the widest words both allow.
__device__ void warpCopy(const char *s, char *d, uint64_t n, int lane) {
    const uintptr_t bits = (uintptr_t)s | (uintptr_t)d;
    uint64_t done = 0;
    if ((bits & 15) == 0) {
        const uint64_t words = n / 16;
        for (uint64_t i = lane; i < words; i += 32) ((uint4 *)d)[i] = ((const uint4 *)s)[i];
        done = words * 16;
    } else if ((bits & 3) == 0) {
        const uint64_t words = n / 4;
        for (uint64_t i = lane; i < words; i += 32) ((unsigned *)d)[i] = ((const unsigned *)s)[i];
        done = words * 4;
    }
    for (uint64_t i = done + lane; i < n; i += 32) d[i] = s[i];
}

__global__ void dtCopyKernel(DtPlanDev p, uint64_t count, const char *user, char *packed, bool unpack) {
    const uint64_t perElement = p.pieces, total = perElement * count;
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * kWarps;
    for (uint64_t w = blockIdx.x * (uint64_t)kWarps + threadIdx.x / 32; w < total; w += warps) {
        const uint64_t e = w / perElement, inElement = w % perElement;
        int lo = 0, hi = p.nsegs - 1; // the segment: the last k with firstPiece[k] <= inElement
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (p.firstPiece[mid] <= inElement) lo = mid;
            else hi = mid - 1;
        }
        const loom_dt_seg_t s = p.segs[lo];
        const uint64_t perRun = dtPiecesOf(s.len);
        const uint64_t piece = inElement - p.firstPiece[lo], run = piece / perRun, at = (piece % perRun) * kDtPieceBytes;
        const uint64_t n = s.len - at < kDtPieceBytes ? s.len - at : kDtPieceBytes;
        const char *u = user + (int64_t)e * p.extent + s.offset + (int64_t)run * s.stride + (int64_t)at;
        const char *k = packed + e * p.bytes + s.packed + run * s.len + at;
        if (unpack) warpCopy(k, (char *)u, n, lane);
        else warpCopy(u, (char *)k, n, lane);
    }
}

} // namespace

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

} // namespace loom
