/*
 * Ring allreduce, Simple protocol: one CTA per channel walks the schedule of
 * ring_schedule.h; each step moves one chunk through a FIFO slot in the next
 * rank's memory (CUDA IPC), flow-controlled by tail (data posted) and head
 * (slot freed) counters. Written once, templated on element type and op.
 */
#include <cuda_runtime.h>
#include <type_traits>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/ring_schedule.h"

namespace loom {
namespace {

constexpr size_t kAlignBytes = 16;

// Thread 0 waits for `cond`; a peer silent for timeoutCycles aborts the call.
template <typename Cond>
__device__ bool waitFor(const RingArgs &a, Cond cond) {
    unsigned long long start = clock64();
    int spins = 0;
    while (!cond()) {
        if (++spins > 1000) {
            __nanosleep(100);
            if (clock64() - start > a.timeoutCycles) {
                *a.abortFlag = 1;
                return false;
            }
        }
    }
    return true;
}

// A scalar load that bypasses L1 (slot data is written by a peer GPU).
template <typename T>
__device__ __forceinline__ T loadCg(const T *p) {
    using Bits = typename std::conditional<sizeof(T) == 1, unsigned char,
                 typename std::conditional<sizeof(T) == 2, unsigned short,
                 typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type>::type>::type;
    Bits b = __ldcg(reinterpret_cast<const Bits *>(p));
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

// dst0[i] (and dst1[i]) = recv ? (reduce ? op(src[i], in[i]) : src[i]) : in[i]
template <typename T, typename Op>
__device__ void moveChunk(const T *src, const T *in, T *dst0, T *dst1, size_t len, bool reduceIn) {
    constexpr int V = 16 / sizeof(T);
    union Vec { uint4 u; T t[V]; };
    const int tid = threadIdx.x, nthr = blockDim.x;
    uintptr_t bits = (uintptr_t)src | (uintptr_t)in | (uintptr_t)dst0 | (uintptr_t)dst1;
    size_t done = 0;
    if ((bits & 15) == 0) {
        // U independent 16-byte vectors per thread in flight per iteration.
        constexpr int U = 4;
        const size_t nvec = len / V;
        const uint4 *s4 = (const uint4 *)src, *i4 = (const uint4 *)in;
        uint4 *d0 = (uint4 *)dst0, *d1 = (uint4 *)dst1;
        size_t v = tid;
        for (; v + (U - 1) * nthr < nvec; v += U * nthr) {
            Vec x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) x[u].u = s4 ? __ldcg(s4 + v + u * nthr) : i4[v + u * nthr];
            if (reduceIn) {
                Vec y[U];
#pragma unroll
                for (int u = 0; u < U; ++u) y[u].u = i4[v + u * nthr];
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int k = 0; k < V; ++k) x[u].t[k] = reduce<T, Op>(x[u].t[k], y[u].t[k]);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (d0) d0[v + u * nthr] = x[u].u;
                if (d1) d1[v + u * nthr] = x[u].u;
            }
        }
        for (; v < nvec; v += nthr) {
            Vec x;
            x.u = s4 ? __ldcg(s4 + v) : i4[v];
            if (reduceIn) {
                Vec y;
                y.u = i4[v];
#pragma unroll
                for (int k = 0; k < V; ++k) x.t[k] = reduce<T, Op>(x.t[k], y.t[k]);
            }
            if (d0) d0[v] = x.u;
            if (d1) d1[v] = x.u;
        }
        done = nvec * V;
    }
    for (size_t i = done + tid; i < len; i += nthr) {
        T x = src ? loadCg(src + i) : in[i];
        if (reduceIn) x = reduce<T, Op>(x, in[i]);
        if (dst0) dst0[i] = x;
        if (dst1) dst1[i] = x;
    }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) ringAllreduceKernel(RingArgs a) {
    __shared__ bool abort;
    const RingChannel &c = a.ch[blockIdx.x];
    size_t begin, end;
    channelRange(a.count, a.nchannels, blockIdx.x, kAlignBytes / sizeof(T) * 4, &begin, &end);
    const size_t n = end - begin;
    const T *in = (const T *)a.in + begin;
    T *out = (T *)a.out + begin;
    const size_t chunkElems = ringChunkElems(n, a.nranks, a.slotBytes / sizeof(T), kAlignBytes / sizeof(T));
    const size_t rounds = a.nranks > 1 ? ringRounds(n, a.nranks, chunkElems) : 0;
    uint64_t sent = c.step, recvd = c.step;
    if (threadIdx.x == 0) abort = false;

    for (size_t round = 0; round < rounds; ++round) {
        for (int s = 0; s < ringStepsPerRound(a.nranks); ++s) {
            const RingStep st = ringAllreduceStep(a.pos, a.nranks, s);
            size_t off, len;
            ringChunk(n, a.nranks, chunkElems, round, st.chunk, &off, &len);
            if (threadIdx.x == 0) {
                bool ok = true;
                if (st.recv) ok = waitFor(a, [&] { return c.myFlags->recvTail > recvd; });
                if (ok && st.send) ok = waitFor(a, [&] { return sent - c.myFlags->sendHead < (uint64_t)a.nslots; });
                abort = !ok;
                __threadfence(); // order the flag reads before the data reads below
            }
            __syncthreads();
            if (abort) return;
            const T *src = st.recv ? (const T *)(c.mySlots + (recvd % a.nslots) * a.slotBytes) : nullptr;
            T *toNext = st.send ? (T *)(c.nextSlots + (sent % a.nslots) * a.slotBytes) : nullptr;
            moveChunk<T, Op>(src, in + off, toNext, st.toOutput ? out + off : nullptr, len, st.reduce);
            if (st.send) __threadfence_system(); // our stores reach the peer before its tail moves
            __syncthreads();
            if (threadIdx.x == 0) {
                if (st.send) c.nextFlags->recvTail = sent + 1;
                if (st.recv) c.prevFlags->sendHead = recvd + 1;
            }
            // Every thread keeps the counters: they pick the slots above.
            sent += st.send;
            recvd += st.recv;
        }
    }
    // Single rank or empty channel: nothing above ran. Copy in to out for nranks == 1.
    if (a.nranks == 1 && a.in != a.out) moveChunk<T, Op>(nullptr, in, out, nullptr, n, false);
}

template <typename T, typename Op> struct RingKernel {
    static cudaError_t launch(const RingArgs &a, cudaStream_t stream) {
        ringAllreduceKernel<T, Op><<<a.nchannels, a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchRingAllreduce(const RingArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<RingKernel>(dtype, op, a, stream);
}

} // namespace loom
