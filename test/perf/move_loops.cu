/*
 * move_loops: how many bytes one CTA moves per microsecond with loom's
 * Simple move loop (ProtoSimple::move, what every ring, chain and edge step
 * runs over its slot), against the best copies this GPU does, at 1, 8, 16,
 * 32 and 64 CTAs, device to device on one GPU (both buffers local):
 *   simple      move(slot -> slot): a step that forwards what it received
 *   simple2     move(slot -> slot and output): forwards and writes the output
 *   simple_red  move(slot + input -> slot): a reduce step (float sum)
 *   tuned       a plain vectorized copy, 8 x 16 B loads in flight per thread
 *   memcpy      cudaMemcpyAsync of the whole buffer (CTAs: the copy engine's)
 * Each CTA moves its own contiguous part in steps of one slot, a barrier
 * between steps, as a ring channel does. Every run's output is checked
 * element by element against the expected values; a wrong element fails
 * the program. Prints per mode and CTA count: time, GB/s, bytes per CTA per
 * microsecond, and the share of `tuned` at the same CTA count.
 *
 *   move_loops [total MiB (256)] [slot KiB (512)] [threads (512)] [repeats (20)]
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device/prims_simple.h"

static const char kPerfTool[] = "move_loops";
#include "cuda_check.h"

namespace {

enum Mode { kSimple, kSimple2, kSimpleRed, kTuned, kMemcpy, kModes };
const char *const kModeNames[kModes] = {"simple", "simple2", "simple_red", "tuned", "memcpy"};

// CTA b's part of n floats, in whole 16-byte vectors.
__device__ void ctaPart(size_t n, size_t *at, size_t *len) {
    const size_t per = (n / gridDim.x + 3) / 4 * 4;
    *at = per * blockIdx.x;
    *len = *at >= n ? 0 : (n - *at < per ? n - *at : per);
}

template <Mode M>
__global__ void moveKernel(const float *src, const float *in, float *dst, float *out, size_t n, size_t slotElems) {
    size_t at, len;
    ctaPart(n, &at, &len);
    for (size_t off = 0; off < len; off += slotElems) {
        const size_t step = len - off < slotElems ? len - off : slotElems;
        const size_t i = at + off;
        if (M == kSimple)
            loom::ProtoSimple::move<float, loom::OpSum>(nullptr, src + i, nullptr, dst + i, nullptr, step, false, 0, 0, 0);
        else if (M == kSimple2)
            loom::ProtoSimple::move<float, loom::OpSum>(nullptr, src + i, nullptr, dst + i, out + i, step, false, 0, 0, 0);
        else
            loom::ProtoSimple::move<float, loom::OpSum>(nullptr, src + i, in + i, dst + i, nullptr, step, true, 0, 0, 0);
        __syncthreads(); // a step's end, as the ring's publish barrier
    }
}

// The plain vectorized copy: U independent 16-byte loads per thread in
// flight, then their stores.
__global__ void tunedCopy(const uint4 *src, uint4 *dst, size_t nvec, size_t slotVecs) {
    constexpr int U = 8;
    const size_t per = (nvec + gridDim.x - 1) / gridDim.x;
    const size_t at = per * blockIdx.x, end = at + per < nvec ? at + per : nvec;
    for (size_t s = at; s < end; s += slotVecs) {
        const size_t e = s + slotVecs < end ? s + slotVecs : end;
        size_t v = s + threadIdx.x;
        for (; v + (U - 1) * blockDim.x < e; v += U * blockDim.x) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) x[u] = src[v + u * blockDim.x];
#pragma unroll
            for (int u = 0; u < U; ++u) dst[v + u * blockDim.x] = x[u];
        }
        for (; v < e; v += blockDim.x) dst[v] = src[v];
        __syncthreads();
    }
}

__global__ void fill(float *p, size_t n, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 1021) * scale;
}

// Wrong elements of out against the expected value of each index.
__global__ void check(const float *p, size_t n, float scale, unsigned long long *wrong) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != (float)(i % 1021) * scale) atomicAdd(wrong, 1ull);
}

} // namespace

int main(int argc, char **argv) {
    const size_t totalMiB = argc > 1 ? strtoull(argv[1], nullptr, 10) : 256;
    const size_t slotKiB = argc > 2 ? strtoull(argv[2], nullptr, 10) : 512;
    const int threads = argc > 3 ? atoi(argv[3]) : 512;
    const int repeats = argc > 4 ? atoi(argv[4]) : 20;
    const size_t bytes = totalMiB << 20, n = bytes / sizeof(float), slotElems = (slotKiB << 10) / sizeof(float);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("move_loops: %s, %zu MiB, slot %zu KiB, %d threads per CTA, best of %d\n", prop.name, totalMiB, slotKiB,
           threads, repeats);
    float *src, *in, *dst, *out;
    unsigned long long *wrong;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&in, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMalloc(&out, bytes));
    CK(cudaMalloc(&wrong, sizeof(*wrong)));
    fill<<<1024, 256>>>(src, n, 1.0f);
    fill<<<1024, 256>>>(in, n, 2.0f);
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    const int ctaCounts[] = {1, 8, 16, 32, 64};
    double tunedUs[5] = {};
    long failures = 0;
    printf("%-11s %5s %10s %9s %16s %9s\n", "mode", "CTAs", "us", "GB/s", "B/CTA/us", "of tuned");
    for (int m : {kTuned, kSimple, kSimple2, kSimpleRed, kMemcpy}) {
        for (int ci = 0; ci < 5; ++ci) {
            const int ctas = ctaCounts[ci];
            if (m == kMemcpy && ci > 0) break;
            CK(cudaMemset(dst, 0, bytes));
            CK(cudaMemset(out, 0, bytes));
            float best = 1e30f;
            for (int r = 0; r < repeats; ++r) {
                CK(cudaEventRecord(t0));
                switch (m) {
                case kSimple: moveKernel<kSimple><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kSimple2: moveKernel<kSimple2><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kSimpleRed: moveKernel<kSimpleRed><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kTuned:
                    tunedCopy<<<ctas, threads>>>((const uint4 *)src, (uint4 *)dst, bytes / 16, (slotKiB << 10) / 16);
                    break;
                default: CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); break;
                }
                CK(cudaGetLastError());
                CK(cudaEventRecord(t1));
                CK(cudaEventSynchronize(t1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, t0, t1));
                if (ms < best) best = ms;
            }
            // src i%1021; a reduce step's slot gets src + in = 3 x (i%1021).
            unsigned long long bad = 0;
            CK(cudaMemset(wrong, 0, sizeof(*wrong)));
            check<<<1024, 256>>>(dst, n, m == kSimpleRed ? 3.0f : 1.0f, wrong);
            if (m == kSimple2) check<<<1024, 256>>>(out, n, 1.0f, wrong);
            CK(cudaMemcpy(&bad, wrong, sizeof(bad), cudaMemcpyDeviceToHost));
            const double us = best * 1e3, gbs = bytes / us / 1e3;
            if (m == kTuned) tunedUs[ci] = us;
            const double share = m == kMemcpy || tunedUs[ci] <= 0 ? 0 : 100.0 * tunedUs[ci] / us;
            printf("%-11s %5d %10.1f %9.1f %16.0f %8.0f%%%s\n", kModeNames[m], m == kMemcpy ? 0 : ctas, us, gbs,
                   m == kMemcpy ? 0 : bytes / us / ctas, share, bad ? "  WRONG" : "");
            if (bad) {
                fprintf(stderr, "move_loops: %s at %d CTAs: %llu wrong elements\n", kModeNames[m], ctas, bad);
                ++failures;
            }
        }
    }
    return failures ? 1 : 0;
}
