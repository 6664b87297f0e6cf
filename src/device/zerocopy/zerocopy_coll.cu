/*
 * The zero-copy allreduce (zerocopy_schedule.h): each CTA posts its arrive to
 * every peer, waits for theirs, reduces its range straight from every rank's
 * mapped input into every rank's mapped output (two-shot) or its own
 * (one-shot), posts its done and waits for the peers' done.
 *
 * Thread q (< nranks, != rank) of a CTA writes peer q's flag word and waits
 * on q's word here: one flag per thread, all peers in parallel.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/conn.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/prims_simple.h"
#include "device/wait.h"
#include "device/zerocopy/zerocopy_args.h"

namespace loom {
namespace {

__device__ __forceinline__ uint64_t loadAcquireSys(const volatile uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void stamp(const ZeroCopyArgs &a, int k) {
    if (a.stamps && blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        *reinterpret_cast<volatile uint64_t *>(a.stamps + k) = t;
    }
}

struct ZeroCopyShared {
    int timedOut; // peer + 1 whose flag never came
    int failed;   // peer + 1 whose host could not map a buffer (kZeroCopyFailed)
};

// Posts `value` (marked failed if this rank's host could not map) into every
// peer's word of this CTA, then waits until every peer's word here reaches
// `want`. False on a time-out (the abort words name the peer): then this
// CTA's done, marked failed, goes to every peer, so that one still before
// its data phase skips it and one waiting for done stops waiting (the
// communicator is unusable after a time-out; a peer already past its arrive
// wait may still touch this rank's buffers: it saw every arrive, so only a
// peer that arrived in the last instant can cause that). `fence`: each flag
// thread fences at system scope before its post (the done: after a barrier).
__device__ bool zeroCopyExchangeFlags(const ZeroCopyArgs &a, uint64_t value, uint64_t want, ZeroCopyShared &sh,
                                      bool fence = false) {
    const int q = threadIdx.x, b = blockIdx.x;
    volatile uint64_t *theirs = q < a.nranks ? a.peer[q] + (size_t)a.rank * kMaxZeroCopyCtas + b : nullptr;
    if (q < a.nranks && q != a.rank) {
        if (fence) __threadfence_system();
        *theirs = value | (a.mapFailed ? kZeroCopyFailed : 0);
        const volatile uint64_t *w = a.mine + (size_t)q * kMaxZeroCopyCtas + b;
        uint64_t seen = 0;
        // Acquire loads: what the peer wrote before its flag (its data, at
        // done) is visible to this thread, and through the barrier below to
        // the CTA.
        if (!Waiter{a.wait}([&] { return ((seen = loadAcquireSys(w)) & ~kZeroCopyFailed) >= want; }))
            sh.timedOut = q + 1;
        else if (seen & kZeroCopyFailed)
            sh.failed = q + 1;
    }
    __syncthreads();
    if (sh.timedOut) {
        if (q < a.nranks && q != a.rank) *theirs = zeroCopyDone(a.call) | kZeroCopyFailed;
        if (threadIdx.x == 0) {
            a.abortFlag[kAbortRecvPeer] = sh.timedOut;
            a.abortFlag[kAbortSet] = 1;
        }
        return false;
    }
    return true;
}

// Elements [lo, hi): in 16-byte vectors where `vectors` (every pointer
// aligned), else element by element.
template <typename T, typename Op>
__device__ void zeroCopyMove(const ZeroCopyArgs &a, size_t lo, size_t hi, bool vectors) {
    constexpr int W = 16;
    using Word = typename VectorWord<W>::type;
    constexpr int V = W / sizeof(T);
    constexpr int U = 2; // vectors per thread in flight, each loaded from every rank
    union Vec { Word u; T t[V]; };
    const int n = a.nranks, nthr = blockDim.x;
    const size_t nvec = vectors ? (hi - lo) / V : 0;
    const Word *in[kMaxZeroCopyRanks];
    Word *out[kMaxZeroCopyRanks];
#pragma unroll
    for (int q = 0; q < kMaxZeroCopyRanks; ++q) {
        in[q] = q < n ? reinterpret_cast<const Word *>(static_cast<const T *>(a.in[q]) + lo) : nullptr;
        out[q] = q < n ? reinterpret_cast<Word *>(static_cast<T *>(a.out[q]) + lo) : nullptr;
    }
    size_t v = threadIdx.x;
    for (; v + (U - 1) * (size_t)nthr < nvec; v += U * (size_t)nthr) {
        Vec x[U][kMaxZeroCopyRanks];
#pragma unroll
        for (int q = 0; q < kMaxZeroCopyRanks; ++q)
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (q < n) x[u][q].u = __ldcg(in[q] + v + u * nthr);
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int q = 1; q < kMaxZeroCopyRanks; ++q)
                if (q < n)
#pragma unroll
                    for (int k = 0; k < V; ++k) x[u][0].t[k] = reduce<T, Op>(x[u][0].t[k], x[u][q].t[k]);
            if (a.oneShot) {
                out[a.rank][v + u * nthr] = x[u][0].u;
            } else {
#pragma unroll
                for (int q = 0; q < kMaxZeroCopyRanks; ++q)
                    if (q < n) out[q][v + u * nthr] = x[u][0].u;
            }
        }
    }
    for (; v < nvec; v += nthr) {
        Vec acc, x;
        acc.u = __ldcg(in[0] + v);
        for (int q = 1; q < n; ++q) {
            x.u = __ldcg(in[q] + v);
#pragma unroll
            for (int k = 0; k < V; ++k) acc.t[k] = reduce<T, Op>(acc.t[k], x.t[k]);
        }
        for (int q = 0; q < n; ++q)
            if (!a.oneShot || q == a.rank) out[q][v] = acc.u;
    }
    // The buffer's ragged end (only the last range has one), or everything
    // when some pointer is not 16-byte aligned.
    for (size_t i = lo + nvec * V + threadIdx.x; i < hi; i += nthr) {
        // Plain loads: the inputs do not change during the kernel, and a
        // 16-byte type may be only 8-byte aligned here.
        T acc = static_cast<const T *>(a.in[0])[i];
        for (int q = 1; q < n; ++q) acc = reduce<T, Op>(acc, static_cast<const T *>(a.in[q])[i]);
        for (int q = 0; q < n; ++q)
            if (!a.oneShot || q == a.rank) static_cast<T *>(a.out[q])[i] = acc;
    }
}

// Staged: this CTA's part of every slice but `skip` from src to dst (the
// same element offsets), in 16-byte vectors where both are aligned.
template <typename T>
__device__ void stagedCopy(const ZeroCopyArgs &a, const T *src, T *dst, int skip) {
    for (int s = 0; s < a.nranks; ++s) {
        if (s == skip) continue;
        size_t lo, hi;
        zeroCopyRange(false, a.count, sizeof(T), a.nranks, s, a.ctas, blockIdx.x, &lo, &hi);
        const T *from = src + lo;
        T *to = dst + lo;
        const size_t len = hi - lo;
        size_t done = 0;
        if ((((uintptr_t)from | (uintptr_t)to) & 15) == 0) {
            constexpr size_t V = 16 / sizeof(T);
            const uint4 *f = reinterpret_cast<const uint4 *>(from);
            uint4 *t = reinterpret_cast<uint4 *>(to);
            // Loads of U vectors in flight per thread before their stores: one
            // at a time leaves the copy latency-bound (a few GB/s per CTA).
            constexpr int U = 8;
            const size_t nv = len / V, nthr = blockDim.x;
            size_t v = threadIdx.x;
            for (; v + (U - 1) * nthr < nv; v += U * nthr) {
                uint4 x[U];
#pragma unroll
                for (int u = 0; u < U; ++u) x[u] = f[v + u * nthr];
#pragma unroll
                for (int u = 0; u < U; ++u) t[v + u * nthr] = x[u];
            }
            for (; v < nv; v += nthr) t[v] = f[v];
            done = nv * V;
        }
        for (size_t i = done + threadIdx.x; i < len; i += blockDim.x) to[i] = from[i];
    }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads) zeroCopyKernel(ZeroCopyArgs a) {
    if (!callStarted(a.wait)) return;
    __shared__ ZeroCopyShared sh;
    if (threadIdx.x == 0) sh.timedOut = sh.failed = 0;
    stamp(a, 0);
    // 0. Staged: this CTA's part of every other slice of the input into the
    // scratch, where the peers' CTA of this index read it.
    if (a.staged) stagedCopy<T>(a, static_cast<const T *>(a.in[a.rank]), reinterpret_cast<T *>(a.scratch), a.rank);
    __syncthreads();
    // 1. Arrive (no fence first where nothing was staged: the kernels that
    // wrote this rank's input are done, their stores performed, before this
    // one starts; staged, the copies land before the arrive).
    if (!zeroCopyExchangeFlags(a, zeroCopyArrive(a.call), zeroCopyArrive(a.call), sh, a.staged)) return;
    stamp(a, 1);
    const bool move = !a.mapFailed && !sh.failed;
    // A peer's failure fails this rank's call when its host waits (its own
    // failure its host returned already).
    if (!move && !a.mapFailed && threadIdx.x == 0) a.abortFlag[kAbortUndelivered] = sh.failed;
    // 2. This CTA's range.
    if (move) {
        size_t lo, hi;
        zeroCopyRange(a.oneShot, a.count, sizeof(T), a.nranks, a.rank, a.ctas, blockIdx.x, &lo, &hi);
        uintptr_t bits = 0;
        for (int q = 0; q < a.nranks; ++q) {
            bits |= (uintptr_t)(static_cast<const T *>(a.in[q]) + lo);
            if (!a.oneShot || q == a.rank) bits |= (uintptr_t)(static_cast<T *>(a.out[q]) + lo);
        }
        if (hi > lo) zeroCopyMove<T, Op>(a, lo, hi, (bits & 15) == 0);
    }
    // 3. Done, once every store of the CTA is visible to the peers: the
    // barrier orders the CTA's stores before the flag threads', whose
    // system-scope fence (cumulative) makes them land before their flags.
    // One fence per flag thread, not 512 (device/prims.h says why that is enough).
    __syncthreads();
    stamp(a, 2);
    if (!zeroCopyExchangeFlags(a, zeroCopyDone(a.call), zeroCopyDone(a.call), sh, true)) return;
    stamp(a, 3);
    // A peer that failed after this rank's arrive (its done came marked): this
    // rank's output may lack its slice (and staged, this CTA skips the copy
    // out), so the call fails here too, as a failure seen at arrive does.
    if (sh.failed && move && threadIdx.x == 0) a.abortFlag[kAbortUndelivered] = sh.failed;
    // 4. Staged: the peers' results for this CTA's part of their slices, from
    // the scratch (every peer's CTA of this index is done) into the output.
    if (a.staged && !a.mapFailed && !sh.failed)
        stagedCopy<T>(a, reinterpret_cast<const T *>(a.scratch + a.scratchBytes), static_cast<T *>(a.out[a.rank]),
                      a.rank);
}

template <typename T, typename Op> struct ZeroCopyKernel {
    static cudaError_t launch(const ZeroCopyArgs &a, cudaStream_t stream) {
        zeroCopyKernel<T, Op><<<a.ctas, kZeroCopyThreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, zeroCopyKernel<T, Op>); }
};

} // namespace

cudaError_t launchZeroCopyAllReduce(const ZeroCopyArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<ZeroCopyKernel>(dtype, op, a, stream);
}

cudaError_t loadZeroCopyKernels(KernelLoad *l) { return loadTypeOps<ZeroCopyKernel>(l); }

} // namespace loom
