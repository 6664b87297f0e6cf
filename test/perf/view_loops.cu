/*
 * view_loops: how many bytes one CTA packs or unpacks per microsecond with
 * the view's in-place copy (dtViewCopySpread, dt_view_copy.h: what the
 * exchange kernel runs on a FIFO chunk when LOOM_DT_FUSE is on), against a
 * plain vectorized copy of the same packed bytes, at 1, 8, 16, 32 and 64 CTAs of
 * 512 threads on one GPU. Each CTA takes its own part of the packed bytes
 * in steps of one slot, a barrier between steps, as an exchange channel
 * does; the layouts:
 *   vec256   runs of 256 B, 512 B apart (coll_dtypes -b's vector)
 *   vec32    runs of 32 B, 48 B apart (short runs, many to a piece)
 *   long     runs of 64 KiB, 96 KiB apart (runs cut into pieces)
 *   struct   elements of 128 B holding 8 + 24 + 48 B at 0, 16 and 64
 *   face     an N^3 array of 8-byte complex values, the x-pencil face
 *            [N][N][N/4] (runs of N/4 x 8 B): an FFT transpose's block
 * and over the whole GPU: fpack/funpack, the view's own kernel
 * (launchDtViewCopy), and ppack/punpack, the plan kernel of one block
 * (launchDtCopy: one element type's count elements).
 * Each mode's result is checked byte by byte against a CPU copy of the
 * layout (an unpacked user buffer's holes keep their fill); a wrong byte
 * fails the program.
 *
 *   view_loops [packed MiB (256)] [slot KiB (512)] [repeats (10)]
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device/datatype/dt_copy.h"
#include "device/datatype/dt_view_build.h"
#include "device/datatype/dt_view_copy.h"

static const char kPerfTool[] = "view_loops";
#include "cuda_check.h"

namespace {

constexpr int kThreads = 512;

struct Shape {
    const char *name;
    std::vector<loom_dt_seg_t> segs;
    int64_t extent;
    uint64_t bytes;
};

loom_dt_seg_t seg(int64_t offset, int64_t stride, uint64_t len, uint64_t count, uint64_t packed) {
    return loom_dt_seg_t{offset, stride, len, count, packed};
}

// One element of every shape holds about `packed` bytes; the view is count
// elements of it.
std::vector<Shape> shapes(uint64_t packed, uint64_t *counts) {
    std::vector<Shape> s;
    s.push_back({"vec256", {seg(0, 512, 256, packed / 256, 0)}, (int64_t)(packed / 256) * 512, packed / 256 * 256});
    s.push_back({"vec32", {seg(0, 48, 32, packed / 32, 0)}, (int64_t)(packed / 32) * 48, packed / 32 * 32});
    const uint64_t runs = packed >> 16;
    s.push_back({"long", {seg(0, 96 << 10, 64 << 10, runs, 0)}, (int64_t)runs * (96 << 10), runs << 16});
    s.push_back({"struct", {seg(0, 0, 8, 1, 0), seg(16, 0, 24, 1, 8), seg(64, 0, 48, 1, 32)}, 128, 80});
    uint64_t n = 16; // the largest N with N^3 x 8 B / 4 within packed
    while ((2 * n) * (2 * n) * (2 * n) * 2 <= packed) n *= 2;
    s.push_back({"face", {seg(0, (int64_t)n * 8, n / 4 * 8, n * n, 0)}, (int64_t)(n * n * n * 8), n * n * n * 2});
    for (size_t i = 0; i < s.size(); ++i) counts[i] = i == 3 ? packed / 80 : 1;
    return s;
}

// The CTA's part of `bytes` packed bytes, in whole 16-byte words.
__device__ void ctaPart(uint64_t bytes, uint64_t *at, uint64_t *len) {
    const uint64_t per = (bytes / gridDim.x + 15) / 16 * 16;
    *at = per * blockIdx.x;
    *len = *at >= bytes ? 0 : (bytes - *at < per ? bytes - *at : per);
}

__global__ void __launch_bounds__(kThreads) viewSteps(const loom::DtView v, char *user, char *flat, uint64_t bytes, uint64_t slot, bool unpack) {
    uint64_t at, len;
    ctaPart(bytes, &at, &len);
    for (uint64_t off = 0; off < len; off += slot) {
        const uint64_t step = len - off < slot ? len - off : slot;
        loom::dtViewCopySpread(v, user, at + off, step, flat + at + off, unpack, threadIdx.x / 32, blockDim.x / 32,
                               threadIdx.x & 31);
        __syncthreads(); // a step's end, as the exchange's publish barrier
    }
}

// The plain copy of the same packed bytes: 8 x 16 B loads in flight per thread.
__global__ void tunedCopy(const uint4 *src, uint4 *dst, uint64_t bytes, uint64_t slot) {
    constexpr int U = 8;
    uint64_t at, len;
    ctaPart(bytes, &at, &len);
    const uint64_t first = at / 16, nvec = len / 16, slotVecs = slot / 16;
    for (uint64_t s = 0; s < nvec; s += slotVecs) {
        const uint64_t e = s + slotVecs < nvec ? s + slotVecs : nvec;
        uint64_t i = s + threadIdx.x;
        for (; i + (U - 1) * blockDim.x < e; i += U * blockDim.x) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) x[u] = src[first + i + u * blockDim.x];
#pragma unroll
            for (int u = 0; u < U; ++u) dst[first + i + u * blockDim.x] = x[u];
        }
        for (; i < e; i += blockDim.x) dst[first + i] = src[first + i];
        __syncthreads();
    }
}

// The CPU's copy of the layout: the packed bytes of user, or user with them unpacked.
void hostCopy(const Shape &s, uint64_t count, std::vector<char> &user, std::vector<char> &flat, bool unpack) {
    for (uint64_t e = 0; e < count; ++e)
        for (const loom_dt_seg_t &g : s.segs)
            for (uint64_t r = 0; r < g.count; ++r) {
                char *u = user.data() + e * s.extent + g.offset + r * g.stride;
                char *f = flat.data() + e * s.bytes + g.packed + r * g.len;
                if (unpack) memcpy(u, f, g.len);
                else memcpy(f, u, g.len);
            }
}

} // namespace

int main(int argc, char **argv) {
    const uint64_t packedMiB = argc > 1 ? strtoull(argv[1], nullptr, 10) : 256;
    const uint64_t slot = (argc > 2 ? strtoull(argv[2], nullptr, 10) : 512) << 10;
    const int repeats = argc > 3 ? atoi(argv[3]) : 10;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("view_loops: %s, about %llu MiB packed, slot %llu KiB, %d threads per CTA, best of %d\n", prop.name,
           (unsigned long long)packedMiB, (unsigned long long)(slot >> 10), kThreads, repeats);
    printf("%-7s %-7s %5s %10s %9s %12s %9s\n", "layout", "mode", "CTAs", "us", "GB/s", "B/CTA/us", "of tuned");
    uint64_t counts[8];
    const std::vector<Shape> all = shapes(packedMiB << 20, counts);
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    const int ctaCounts[] = {1, 8, 16, 32, 64};
    long failures = 0;
    for (size_t si = 0; si < all.size(); ++si) {
        const Shape &s = all[si];
        const uint64_t count = counts[si], bytes = count * s.bytes, span = count * s.extent;
        loom::DtViewLayout layout{s.segs.data(), (int)s.segs.size(), s.extent, s.bytes};
        loom::DtViewInput in{0, count, 0, 0};
        std::vector<char> table;
        loom::DtView v;
        if (!loom::dtViewBuild(&layout, 1, &in, 1, nullptr, &table, &v)) return fprintf(stderr, "no view\n"), 1;
        void *devTable;
        CK(cudaMalloc(&devTable, table.size()));
        loom::dtViewBuild(&layout, 1, &in, 1, devTable, &table, &v);
        CK(cudaMemcpy(devTable, table.data(), table.size(), cudaMemcpyHostToDevice));
        std::vector<char> hUser(span), want(bytes), expect(span, 0x5a), got(span > bytes ? span : bytes);
        for (uint64_t i = 0; i < span; ++i) hUser[i] = (char)(i * 2654435761u >> 13);
        hostCopy(s, count, hUser, want, false);  // what a pack gives
        hostCopy(s, count, expect, want, true);  // what an unpack into 0x5a gives
        char *user, *flat, *flat2;
        CK(cudaMalloc(&user, span));
        CK(cudaMalloc(&flat, bytes));
        CK(cudaMalloc(&flat2, bytes));
        double tunedUs[5] = {};
        loom::DtPlanDev plan;
        std::vector<char> planTable(loom::dtTableBytes(layout.nsegs) + 1);
        void *devPlanTable;
        CK(cudaMalloc(&devPlanTable, planTable.size()));
        loom::dtPlanDev(s.segs.data(), layout.nsegs, s.extent, s.bytes, planTable.data(), devPlanTable, &plan);
        CK(cudaMemcpy(devPlanTable, planTable.data(), planTable.size(), cudaMemcpyHostToDevice));
        const char *const names[] = {"tuned", "pack", "unpack", "fpack", "funpack", "ppack", "punpack"};
        for (int mode = 0; mode < 7; ++mode) { // tuned, pack, unpack, then whole-GPU kernels: view, plan
            const bool unpack = mode == 2 || mode == 4 || mode == 6, full = mode >= 3;
            const char *name = names[mode];
            for (int ci = 0; ci < (full ? 1 : 5); ++ci) {
                const int ctas = ctaCounts[ci];
                // a fresh start: the user layout, or the packed bytes and a user buffer of 0x5a
                if (unpack) {
                    CK(cudaMemset(user, 0x5a, span));
                    CK(cudaMemcpy(flat, want.data(), bytes, cudaMemcpyHostToDevice));
                } else {
                    CK(cudaMemcpy(user, hUser.data(), span, cudaMemcpyHostToDevice));
                    CK(cudaMemset(flat, 0x5a, bytes));
                }
                float best = 1e30f;
                for (int r = 0; r < repeats; ++r) { // each run writes the same bytes again
                    CK(cudaEventRecord(t0));
                    if (mode == 0) tunedCopy<<<ctas, kThreads>>>((const uint4 *)flat2, (uint4 *)flat, bytes, slot);
                    else if (mode >= 5) CK(loom::launchDtCopy(plan, count, user, flat, unpack, 0, 0));
                    else if (full) CK(loom::launchDtViewCopy(v, user, flat, 0, bytes, unpack, 0));
                    else viewSteps<<<ctas, kThreads>>>(v, user, flat, bytes, slot, unpack);
                    CK(cudaGetLastError());
                    CK(cudaEventRecord(t1));
                    CK(cudaEventSynchronize(t1));
                    float ms = 0;
                    CK(cudaEventElapsedTime(&ms, t0, t1));
                    if (ms < best) best = ms;
                }
                if (mode > 0) {
                    const uint64_t n = unpack ? span : bytes;
                    CK(cudaMemcpy(got.data(), unpack ? user : flat, n, cudaMemcpyDeviceToHost));
                    if (memcmp(got.data(), unpack ? expect.data() : want.data(), n) != 0) {
                        fprintf(stderr, "view_loops: %s %s at %d CTAs: wrong bytes\n", s.name, name, ctas);
                        ++failures;
                    }
                }
                const double us = best * 1e3, gbs = bytes / us / 1e3;
                if (mode == 0) tunedUs[ci] = us;
                const double share = full || tunedUs[ci] <= 0 ? 0 : 100.0 * tunedUs[ci] / us;
                printf("%-7s %-7s %5d %10.1f %9.1f %12.0f %8.0f%%\n", s.name, name, full ? 0 : ctas, us, gbs,
                       full ? 0 : bytes / us / ctas, share);
            }
        }
        CK(cudaFree(user));
        CK(cudaFree(flat));
        CK(cudaFree(flat2));
        CK(cudaFree(devTable));
        CK(cudaFree(devPlanTable));
        fflush(stdout);
    }
    return failures ? 1 : 0;
}
