/*
 * move_loops: how many bytes one CTA moves per microsecond with loom's
 * Simple move loop (ProtoSimple::move, what every ring, chain and edge step
 * runs over its slot), against the best copies this GPU does, at 1, 8, 16,
 * 32 and 64 CTAs, device to device on one GPU (both buffers local):
 *   simple      move(slot -> slot): a step that forwards what it received
 *   simple2     move(slot -> slot and output): forwards and writes the output
 *   simple_red  move(slot + input -> slot): a reduce step (float sum)
 *   ll_in, ll_out, ll_fwd        the LL protocol's move (ProtoLL::move):
 *               input -> lines (a first step), lines -> output (a last
 *               step), lines -> lines (a forward); 8 payload bytes per
 *               16-byte line
 *   ll128_in, ll128_out, ll128_fwd  the same with LL128 (ProtoLL128::move):
 *               120 payload bytes per 128-byte line
 *   tuned       a plain vectorized copy, 8 x 16 B loads in flight per thread
 *   memcpy      cudaMemcpyAsync of the whole buffer (CTAs: the copy engine's)
 * Each CTA moves its own contiguous part in steps of one slot, a barrier
 * between steps, as a ring channel does (LL and LL128: slots of lines, the
 * lines already carrying the tag a receiver waits for, so no step waits).
 * GB/s and bytes per CTA count payload bytes; the lines' own bytes are
 * 2x (LL) and 1.07x (LL128) of them. Every run's output is checked
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

#include "device/prims_ll.h"
#include "device/prims_ll128.h"
#include "device/prims_simple.h"

static const char kPerfTool[] = "move_loops";
#include "cuda_check.h"

namespace {

enum Mode { kSimple, kSimple2, kSimpleRed, kTuned, kMemcpy, kLLIn, kLLOut, kLLFwd, kLL128In, kLL128Out, kLL128Fwd, kModes };
const char *const kModeNames[kModes] = {"simple", "simple2", "simple_red", "tuned", "memcpy", "ll_in",
                                        "ll_out", "ll_fwd", "ll128_in", "ll128_out", "ll128_fwd"};
constexpr uint32_t kTag = 7; // the tag every line is written with and waited for

// A protocol's lines: payload floats per line, line bytes.
template <typename Proto> struct Lines;
template <> struct Lines<loom::ProtoLL> {
    static constexpr size_t kFloats = 2, kBytes = 16;
};
template <> struct Lines<loom::ProtoLL128> {
    static constexpr size_t kFloats = 2 * loom::kLL128LineUnits, kBytes = 8 * loom::kLL128LineWords;
};
template <typename Proto> size_t linesOf(size_t n) { return (n + Lines<Proto>::kFloats - 1) / Lines<Proto>::kFloats; }

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

// Set by a CTA whose line wait gave up; every CTA stops at its next step.
__device__ unsigned int gLinesGaveUp;

// LL or LL128 steps over n floats: Dir 0 input -> lines, 1 lines -> output,
// 2 lines -> lines. Each CTA its own lines, a slot's worth (slotBytes of
// lines) a step; a step's payload starts at a whole line.
template <typename Proto, int Dir>
__global__ void linesKernel(const float *src, char *linesIn, char *linesOut, float *dst, size_t n, size_t slotBytes) {
    using L = Lines<Proto>;
    const size_t lines = (n + L::kFloats - 1) / L::kFloats, stepLines = slotBytes / L::kBytes;
    const size_t per = (lines + gridDim.x - 1) / gridDim.x;
    const size_t at = per * blockIdx.x, end = at + per < lines ? at + per : lines;
    // Lines are tagged before any step reads them, so no wait spins; one
    // without its tag (a wrong step) gives up after about 2^31 cycles (1 s),
    // and then the whole grid stops: the check fails, nothing hangs.
    const loom::WaitLimit limit{1ull << 31, 0, 0, 0, nullptr};
    const unsigned long long start = clock64();
    for (size_t l = at; l < end; l += stepLines) {
        const size_t stepEnd = l + stepLines < end ? l + stepLines : end;
        const size_t e0 = l * L::kFloats, e1 = stepEnd * L::kFloats < n ? stepEnd * L::kFloats : n;
        const char *in = Dir != 0 ? linesIn + l * L::kBytes : nullptr;
        char *out = Dir != 1 ? linesOut + l * L::kBytes : nullptr;
        bool ok;
        if (Dir == 0)
            ok = Proto::template move<float, loom::OpSum>(&limit, nullptr, src + e0, out, nullptr, e1 - e0, false, 0,
                                                          kTag, start);
        else if (Dir == 1)
            ok = Proto::template move<float, loom::OpSum>(&limit, in, nullptr, nullptr, dst + e0, e1 - e0, false,
                                                          kTag, 0, start);
        else
            ok = Proto::template move<float, loom::OpSum>(&limit, in, nullptr, out, nullptr, e1 - e0, false, kTag,
                                                          kTag, start);
        if (!ok) atomicExch(&gLinesGaveUp, 1u);
        // A step's end, as the ring's publish barrier; the CTA stops as one.
        if (__syncthreads_or(*(volatile unsigned int *)&gLinesGaveUp != 0)) break;
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
    const size_t slot = slotKiB << 10; // the LL modes' slot: bytes of lines
    if (!totalMiB || !slotKiB || threads < 32 || threads % 32 || threads > 1024 || repeats < 1) {
        fprintf(stderr, "move_loops: MiB and slot KiB >= 1, threads a multiple of 32 up to 1024 (LL128's warps "
                        "vote), repeats >= 1\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("move_loops: %s, %zu MiB, slot %zu KiB, %d threads per CTA, best of %d\n", prop.name, totalMiB, slotKiB,
           threads, repeats);
    float *src, *in, *dst, *out;
    char *linesA, *linesB; // LL and LL128 slots: LL's lines are twice the payload
    unsigned long long *wrong;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&in, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMalloc(&out, bytes));
    CK(cudaMalloc(&wrong, sizeof(*wrong)));
    const size_t linesBytes = linesOf<loom::ProtoLL>(n) * Lines<loom::ProtoLL>::kBytes;
    CK(cudaMalloc(&linesA, linesBytes));
    CK(cudaMalloc(&linesB, linesBytes));
    CK(cudaMemset(linesA, 0, linesBytes));
    CK(cudaMemset(linesB, 0, linesBytes));
    fill<<<1024, 256>>>(src, n, 1.0f);
    fill<<<1024, 256>>>(in, n, 2.0f);
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    const int ctaCounts[] = {1, 8, 16, 32, 64};
    double tunedUs[5] = {};
    long failures = 0;
    printf("%-11s %5s %10s %9s %16s %9s\n", "mode", "CTAs", "us", "GB/s", "B/CTA/us", "of tuned");
    // Each LL mode reads the lines the mode before it wrote (in, then out and
    // fwd from in's lines); a mode that writes lines is checked by reading
    // them back with 64 CTAs of the out step.
    bool inFailed[2] = {false, false}; // ll_in, ll128_in: the modes reading their lines are skipped
    for (int m : {kTuned, kSimple, kSimple2, kSimpleRed, kMemcpy, kLLIn, kLLOut, kLLFwd, kLL128In, kLL128Out,
                  kLL128Fwd}) {
        const bool ll128 = m == kLL128In || m == kLL128Out || m == kLL128Fwd;
        if ((m == kLLOut || m == kLLFwd || m == kLL128Out || m == kLL128Fwd) && inFailed[ll128]) {
            printf("%-11s skipped: the lines it reads were not written right\n", kModeNames[m]);
            continue;
        }
        for (int ci = 0; ci < 5; ++ci) {
            const int ctas = ctaCounts[ci];
            if (m == kMemcpy && ci > 0) break;
            CK(cudaMemset(dst, 0, bytes));
            CK(cudaMemset(out, 0, bytes));
            // Lines a mode writes start blank at every CTA count: none left from a run before.
            if (m == kLLIn || m == kLL128In) CK(cudaMemset(linesA, 0, linesBytes));
            if (m == kLLFwd || m == kLL128Fwd) CK(cudaMemset(linesB, 0, linesBytes));
            const unsigned int zero = 0;
            unsigned int gaveUp = 0;
            CK(cudaMemcpyToSymbol(gLinesGaveUp, &zero, sizeof(zero)));
            float best = 1e30f;
            for (int r = 0; r < repeats && !gaveUp; ++r) {
                CK(cudaEventRecord(t0));
                switch (m) {
                case kSimple: moveKernel<kSimple><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kSimple2: moveKernel<kSimple2><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kSimpleRed: moveKernel<kSimpleRed><<<ctas, threads>>>(src, in, dst, out, n, slotElems); break;
                case kTuned:
                    tunedCopy<<<ctas, threads>>>((const uint4 *)src, (uint4 *)dst, bytes / 16, (slotKiB << 10) / 16);
                    break;
                case kLLIn: linesKernel<loom::ProtoLL, 0><<<ctas, threads>>>(src, nullptr, linesA, dst, n, slot); break;
                case kLLOut: linesKernel<loom::ProtoLL, 1><<<ctas, threads>>>(src, linesA, nullptr, dst, n, slot); break;
                case kLLFwd: linesKernel<loom::ProtoLL, 2><<<ctas, threads>>>(src, linesA, linesB, dst, n, slot); break;
                case kLL128In:
                    linesKernel<loom::ProtoLL128, 0><<<ctas, threads>>>(src, nullptr, linesA, dst, n, slot);
                    break;
                case kLL128Out:
                    linesKernel<loom::ProtoLL128, 1><<<ctas, threads>>>(src, linesA, nullptr, dst, n, slot);
                    break;
                case kLL128Fwd:
                    linesKernel<loom::ProtoLL128, 2><<<ctas, threads>>>(src, linesA, linesB, dst, n, slot);
                    break;
                default: CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); break;
                }
                CK(cudaGetLastError());
                CK(cudaEventRecord(t1));
                CK(cudaEventSynchronize(t1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, t0, t1));
                if (ms < best) best = ms;
                CK(cudaMemcpyFromSymbol(&gaveUp, gLinesGaveUp, sizeof(gaveUp)));
            }
            // The lines a mode wrote, read back into dst.
            if (m == kLLIn || m == kLLFwd)
                linesKernel<loom::ProtoLL, 1><<<64, threads>>>(src, m == kLLIn ? linesA : linesB, nullptr, dst, n, slot);
            if (m == kLL128In || m == kLL128Fwd)
                linesKernel<loom::ProtoLL128, 1><<<64, threads>>>(src, m == kLL128In ? linesA : linesB, nullptr, dst, n,
                                                                   slot);
            CK(cudaGetLastError());
            if (!gaveUp) CK(cudaMemcpyFromSymbol(&gaveUp, gLinesGaveUp, sizeof(gaveUp)));
            // src i%1021; a reduce step's slot gets src + in = 3 x (i%1021).
            unsigned long long bad = 0;
            CK(cudaMemset(wrong, 0, sizeof(*wrong)));
            check<<<1024, 256>>>(dst, n, m == kSimpleRed ? 3.0f : 1.0f, wrong);
            if (m == kSimple2) check<<<1024, 256>>>(out, n, 1.0f, wrong);
            CK(cudaMemcpy(&bad, wrong, sizeof(bad), cudaMemcpyDeviceToHost));
            const double us = best * 1e3, gbs = bytes / us / 1e3;
            if (m == kTuned) tunedUs[ci] = us;
            const double share = m == kMemcpy || tunedUs[ci] <= 0 ? 0 : 100.0 * tunedUs[ci] / us;
            printf("%-11s %5d %10.1f %9.1f %16.0f %8.0f%%%s%s\n", kModeNames[m], m == kMemcpy ? 0 : ctas, us, gbs,
                   m == kMemcpy ? 0 : bytes / us / ctas, share, bad ? "  WRONG" : "", gaveUp ? "  (a line wait gave up)" : "");
            if (bad || gaveUp) {
                fprintf(stderr, "move_loops: %s at %d CTAs: %llu wrong elements%s\n", kModeNames[m], ctas, bad,
                        gaveUp ? ", a line wait gave up" : "");
                ++failures;
                if (m == kLLIn || m == kLL128In) inFailed[ll128] = true;
                break; // the next CTA count would fail the same way
            }
        }
    }
    return failures ? 1 : 0;
}
