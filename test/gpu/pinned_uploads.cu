// core/stream/pinned_uploads.h on a GPU, without MPI: a kernel holds the stream so
// that every upload stays pending; each upload must take a slot of its own
// (a slot reused before its copy ran would send a later table), past
// kMaxSlots they go from pageable memory, and once the stream drains every
// destination holds its own table. Then the same again (slots reused), and
// one larger table (a slot grown). Exit 0: every word right.
//   pinned_uploads
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "core/stream/pinned_uploads.h"

__global__ void spin(volatile int *release) {
    while (*release == 0) {}
}

static long bad;

static void expectTables(const std::vector<size_t *> &dst, int n, size_t words, size_t tag) {
    std::vector<size_t> h(words);
    for (size_t i = 0; i < (size_t)n; ++i) {
        cudaMemcpy(h.data(), dst[i], words * sizeof(size_t), cudaMemcpyDeviceToHost);
        for (size_t w = 0; w < words; ++w)
            if (h[w] != tag * 1000000 + i * 1000 + w && !bad++)
                fprintf(stderr, "FAIL: upload %zu word %zu: %zu, want %zu\n", i, w, h[w], tag * 1000000 + i * 1000 + w);
    }
}

// n uploads of `words` each onto a stream held by a spinning kernel, released after.
static void round(loom::PinnedUploads &u, cudaStream_t s, int *release, int *dRelease, int n, size_t words, size_t tag,
                  std::vector<size_t *> &dst) {
    *release = 0;
    spin<<<1, 1, 0, s>>>(dRelease);
    std::vector<size_t> table(words);
    for (int i = 0; i < n; ++i) {
        for (size_t w = 0; w < words; ++w) table[w] = tag * 1000000 + (size_t)i * 1000 + w;
        if (u.upload(dst[(size_t)i], table.data(), words * sizeof(size_t), s) != cudaSuccess && !bad++)
            fprintf(stderr, "FAIL: upload %d refused\n", i);
        memset(table.data(), 0xff, words * sizeof(size_t)); // the caller's table may go at once
    }
    *release = 1;
    cudaStreamSynchronize(s);
    expectTables(dst, n, words, tag);
}

int main() {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    const int n = loom::PinnedUploads::kMaxSlots + 6;
    int *release = nullptr, *dRelease = nullptr;
    cudaHostAlloc((void **)&release, sizeof(int), cudaHostAllocMapped);
    cudaHostGetDevicePointer((void **)&dRelease, release, 0);
    cudaStream_t s;
    cudaStreamCreate(&s);
    std::vector<size_t *> dst((size_t)n);
    for (size_t *&d : dst) cudaMalloc((void **)&d, 8192 * sizeof(size_t));
    {
        loom::PinnedUploads u;
        round(u, s, release, dRelease, n, 128, 1, dst); // every slot pending, then pageable ones
        if (u.slots() != loom::PinnedUploads::kMaxSlots && !bad++)
            fprintf(stderr, "FAIL: %d slots after %d pending uploads, want %d\n", u.slots(), n, loom::PinnedUploads::kMaxSlots);
        round(u, s, release, dRelease, n, 128, 2, dst); // the same slots again
        if (u.slots() != loom::PinnedUploads::kMaxSlots && !bad++)
            fprintf(stderr, "FAIL: %d slots after reuse, want %d\n", u.slots(), loom::PinnedUploads::kMaxSlots);
        round(u, s, release, dRelease, 3, 8192, 3, dst); // larger than a slot: grown
    }
    printf("pinned_uploads: %d uploads per round, %ld wrong words or failures\n", n, bad);
    return bad ? 1 : 0;
}
