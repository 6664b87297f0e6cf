/*
 * copy_paths: which engine moves an all-to-all's blocks fastest between the
 * GPUs of one host (the choice issue 12 asks to measure). One process drives
 * every visible GPU with peer access enabled (the bandwidth of a peer mapping
 * does not depend on whether CUDA IPC or cudaDeviceEnablePeerAccess made it).
 * Every GPU exchanges a block of B bytes with every other GPU at once by:
 *   ce_pull  the reader's copy engines (cudaMemcpyPeerAsync on the reader, one stream per peer)
 *   ce_push  the writer's copy engines
 *   sm_pull  one kernel per GPU whose CTAs load from the peers' buffers (C CTAs per peer)
 *   sm_push  the same, storing into the peers' buffers
 * and prints per GPU bandwidth (bytes received from peers / time) and time per
 * exchange. Then the same for a gather's fan-in (modes *_in0: only GPU 0
 * receives, from every other GPU): does GPU 0 pull with its own SMs, or do
 * the senders push? Every run checks the received bytes against the pattern.
 *
 *   copy_paths [block bytes ...]     (default 1 MiB, 16 MiB, 256 MiB)
 */
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static const char kPerfTool[] = "copy_paths";
#include "cuda_check.h"

namespace {

constexpr int kMaxGpus = 8;

struct Blocks { // one GPU's peers: where each block comes from and goes to
    const int4 *src[kMaxGpus];
    int4 *dst[kMaxGpus];
};

// CTA (p, c) copies slice c of C of the block from src[p] to dst[p].
__global__ void copyBlocks(Blocks b, int peers, int ctasPerPeer, size_t words) {
    const int p = blockIdx.x / ctasPerPeer, c = blockIdx.x % ctasPerPeer;
    const size_t per = (words + ctasPerPeer - 1) / ctasPerPeer, lo = c * per;
    const size_t hi = lo + per < words ? lo + per : words;
    const int4 *s = b.src[p];
    int4 *d = b.dst[p];
    size_t i = lo + threadIdx.x;
    // Four loads in flight per thread before the stores.
    for (; i + 3 * blockDim.x < hi; i += 4 * blockDim.x) {
        int4 v0 = s[i], v1 = s[i + blockDim.x], v2 = s[i + 2 * blockDim.x], v3 = s[i + 3 * blockDim.x];
        d[i] = v0;
        d[i + blockDim.x] = v1;
        d[i + 2 * blockDim.x] = v2;
        d[i + 3 * blockDim.x] = v3;
    }
    for (; i < hi; i += blockDim.x) d[i] = s[i];
}

__global__ void fillPattern(unsigned *p, size_t words, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
        p[i] = seed * 2654435761u + (unsigned)i;
}

int n;
size_t B;
bool fanIn; // only the pairs into GPU 0 (a gather)
char *src[kMaxGpus], *dst[kMaxGpus]; // per GPU: n blocks each (block q of src goes to GPU q)
cudaStream_t streams[kMaxGpus][kMaxGpus];

void sync() {
    for (int g = 0; g < n; ++g) {
        CK(cudaSetDevice(g));
        CK(cudaDeviceSynchronize());
    }
}

// One exchange by `mode`; C: CTAs per peer (sm modes).
void exchange(const char *mode, int C) {
    const bool pull = strstr(mode, "pull") != nullptr;
    // fanIn: GPU 0 pulls from everyone, or everyone else pushes to GPU 0.
    auto moves = [&](int g, int q) { return q != g && (!fanIn || (pull ? g == 0 : q == 0)); };
    for (int g = 0; g < n; ++g) {
        if (!strncmp(mode, "ce", 2)) {
            for (int q = 0; q < n; ++q) {
                if (!moves(g, q)) continue;
                // pull: GPU g reads q's block for g; push: g writes its block for q.
                if (pull) {
                    CK(cudaSetDevice(g));
                    CK(cudaMemcpyPeerAsync(dst[g] + q * B, g, src[q] + g * B, q, B, streams[g][q]));
                } else {
                    CK(cudaSetDevice(g));
                    CK(cudaMemcpyPeerAsync(dst[q] + g * B, q, src[g] + q * B, g, B, streams[g][q]));
                }
            }
        } else {
            CK(cudaSetDevice(g));
            Blocks b;
            int k = 0;
            for (int q = 0; q < n; ++q) {
                if (!moves(g, q)) continue;
                b.src[k] = (const int4 *)(pull ? src[q] + g * B : src[g] + q * B);
                b.dst[k] = (int4 *)(pull ? dst[g] + q * B : dst[q] + g * B);
                ++k;
            }
            if (!k) continue;
            copyBlocks<<<k * C, 512, 0, streams[g][0]>>>(b, k, C, B / sizeof(int4));
            CK(cudaGetLastError());
        }
    }
}

bool check() {
    std::vector<unsigned> got(B / 4);
    for (int g = 0; g < (fanIn ? 1 : n); ++g)
        for (int q = 0; q < n; ++q) {
            if (q == g) continue;
            CK(cudaMemcpy(got.data(), dst[g] + q * B, B, cudaMemcpyDefault));
            // src[q] block g holds words g*B/4 .. of q's pattern.
            for (size_t i = 0; i < B / 4; i += 4099) {
                unsigned want = (unsigned)q * 2654435761u + (unsigned)(g * (B / 4) + i);
                if (got[i] != want) {
                    fprintf(stderr, "copy_paths: GPU %d block from %d word %zu: %u, want %u\n", g, q, i, got[i], want);
                    return false;
                }
            }
        }
    return true;
}

void run(const char *mode, int C) {
    for (int g = 0; g < n; ++g) {
        CK(cudaSetDevice(g));
        CK(cudaMemset(dst[g], 0, n * B));
    }
    sync();
    exchange(mode, C); // warm-up, and the one that is checked
    sync();
    bool ok = check();
    const int iters = B >= (64u << 20) ? 5 : B >= (4u << 20) ? 20 : 100;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
        exchange(mode, C);
        sync();
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    printf("%-8s%s %3d %12zu %10.1f %10.1f %s\n", mode, fanIn ? "_in0" : "    ", C, B, us, (double)(n - 1) * B / us / 1e3, ok ? "ok" : "WRONG");
    fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
    CK(cudaGetDeviceCount(&n));
    if (n < 2) {
        printf("copy_paths: needs 2 or more GPUs (%d visible)\n", n);
        return 77;
    }
    if (n > kMaxGpus) n = kMaxGpus;
    std::vector<size_t> sizes;
    for (int i = 1; i < argc; ++i) sizes.push_back(strtoull(argv[i], nullptr, 0));
    if (sizes.empty()) sizes = {1u << 20, 16u << 20, 256u << 20};
    size_t most = 0;
    for (size_t s : sizes) most = s > most ? s : most;
    for (int g = 0; g < n; ++g) {
        CK(cudaSetDevice(g));
        for (int q = 0; q < n; ++q)
            if (q != g) CK(cudaDeviceEnablePeerAccess(q, 0));
        CK(cudaMalloc(&src[g], n * most));
        CK(cudaMalloc(&dst[g], n * most));
        fillPattern<<<1024, 256>>>((unsigned *)src[g], n * most / 4, g);
        for (int q = 0; q < n; ++q) CK(cudaStreamCreateWithFlags(&streams[g][q], cudaStreamNonBlocking));
    }
    sync();
    printf("# %d GPUs; GB/s = bytes each GPU receives from its peers / time\n", n);
    printf("%-12s %3s %12s %10s %10s\n", "mode", "C", "block", "us", "GB/s");
    for (size_t s : sizes) {
        B = s;
        // The pattern is per GPU over its whole source, so blocks must be re-filled for each B.
        for (int g = 0; g < n; ++g) {
            CK(cudaSetDevice(g));
            fillPattern<<<1024, 256>>>((unsigned *)src[g], n * B / 4, g);
        }
        sync();
        for (bool in0 : {false, true}) {
            fanIn = in0;
            run("ce_pull", 0);
            run("ce_push", 0);
            for (int C : {4, 8, 16, 32}) {
                run("sm_pull", C);
                run("sm_push", C);
            }
        }
    }
    return 0;
}
