/*
 * One-shot allreduce on the LL protocol, for small messages: one hop over
 * NVLink instead of 2(n-1) ring steps. Each thread owns 8-byte units: it
 * stores its unit of the input as an LL line into every peer's slot, then
 * waits for the peers' lines of the same unit and reduces all n inputs in
 * rank order (so every rank computes bit-identical results).
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"

namespace loom {
namespace {

__device__ __forceinline__ void storeLine(LLLine *p, uint32_t d0, uint32_t d1, uint32_t flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1),
                 "r"(flag)
                 : "memory");
}

__device__ __forceinline__ bool loadLine(const LLLine *p, uint32_t flag, uint32_t *d0, uint32_t *d1) {
    uint32_t a, f0, b, f1;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(f0), "=r"(b), "=r"(f1)
                 : "l"(p)
                 : "memory");
    *d0 = a;
    *d1 = b;
    return f0 == flag && f1 == flag;
}

// 8 bytes of buf starting at byte `at`, zero-padded past `bytes`.
__device__ __forceinline__ uint64_t loadUnit(const char *buf, size_t at, size_t bytes) {
    uint64_t v = 0;
    if (at + 8 <= bytes && ((uintptr_t)(buf + at) & 7) == 0) return *(const uint64_t *)(buf + at);
    for (int k = 0; k < 8 && at + k < bytes; ++k) v |= (uint64_t)(unsigned char)buf[at + k] << (8 * k);
    return v;
}

__device__ __forceinline__ void storeUnit(char *buf, size_t at, size_t bytes, uint64_t v) {
    if (at + 8 <= bytes && ((uintptr_t)(buf + at) & 7) == 0) {
        *(uint64_t *)(buf + at) = v;
        return;
    }
    for (int k = 0; k < 8 && at + k < bytes; ++k) buf[at + k] = (char)(v >> (8 * k));
}

template <typename T, typename Op>
__device__ __forceinline__ uint64_t reduceUnit(uint64_t a, uint64_t b) {
    constexpr int E = 8 / sizeof(T);
    union U { uint64_t u; T t[E]; } x, y;
    x.u = a;
    y.u = b;
#pragma unroll
    for (int k = 0; k < E; ++k) x.t[k] = reduce<T, Op>(x.t[k], y.t[k]);
    return x.u;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kOneShotThreads) oneShotKernel(OneShotArgs a) {
    const size_t units = (a.bytes + 7) / 8;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const char *in = (const char *)a.in;
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    // 1. Publish: my units to every peer.
    for (size_t u = first; u < units; u += stride) {
        uint64_t v = loadUnit(in, u * 8, a.bytes);
        for (int q = 0; q < a.nranks; ++q)
            if (q != a.rank) storeLine(a.slot[q] + u, (uint32_t)v, (uint32_t)(v >> 32), a.flag);
    }
    // 2. Gather and reduce in rank order.
    const unsigned long long start = clock64();
    for (size_t u = first; u < units; u += stride) {
        uint64_t acc = 0;
        for (int q = 0; q < a.nranks; ++q) {
            uint64_t v;
            if (q == a.rank) {
                v = loadUnit(in, u * 8, a.bytes);
            } else {
                uint32_t d0, d1;
                int spins = 0;
                while (!loadLine(a.mine[q] + u, a.flag, &d0, &d1)) {
                    if (++spins > 1000 && clock64() - start > a.timeoutCycles) {
                        *a.abortFlag = 1;
                        return;
                    }
                }
                v = (uint64_t)d0 | ((uint64_t)d1 << 32);
            }
            acc = q == 0 ? v : reduceUnit<T, Op>(acc, v);
        }
        storeUnit((char *)a.out, u * 8, a.bytes, acc);
    }
}

template <typename T, typename Op> struct OneShotKernel {
    static cudaError_t launch(const OneShotArgs &a, cudaStream_t stream) {
        oneShotKernel<T, Op><<<a.nblocks, kOneShotThreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchOneShotAllreduce(const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<OneShotKernel>(dtype, op, a, stream);
}

} // namespace loom
