// How fast a GPU and a CPU thread signal each other through mapped host
// memory, the way loom's kernels and proxy meet on the net path: a kernel
// thread writes a counter in host memory and spins on the CPU's answer, the
// CPU spins on the counter and answers. Prints the round trip, with and
// without __threadfence_system() before each write (what a net step pays).
//   flag_latency [ITERS]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <cuda_runtime.h>

__global__ void pingPong(volatile unsigned long long *toHost, volatile unsigned long long *toGpu, int iters,
                         int fenceSystem) {
    for (int i = 1; i <= iters; ++i) {
        if (fenceSystem) __threadfence_system();
        *toHost = i;
        while (*toGpu < (unsigned long long)i) {}
    }
}

static double roundTripUs(volatile unsigned long long *h2, volatile unsigned long long *g2, int iters, int fence) {
    *h2 = 0;
    *g2 = 0;
    unsigned long long *dToHost = nullptr, *dToGpu = nullptr;
    cudaHostGetDevicePointer((void **)&dToHost, (void *)h2, 0);
    cudaHostGetDevicePointer((void **)&dToGpu, (void *)g2, 0);
    auto t0 = std::chrono::steady_clock::now();
    pingPong<<<1, 1>>>(dToHost, dToGpu, iters, fence);
    for (int i = 1; i <= iters; ++i) {
        while (*h2 < (unsigned long long)i) {}
        *g2 = i;
    }
    cudaDeviceSynchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters * 1e6;
}

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 100000;
    unsigned long long *flags = nullptr;
    if (cudaHostAlloc((void **)&flags, 4096, cudaHostAllocMapped) != cudaSuccess) {
        printf("flag_latency: no GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
        return 77;
    }
    volatile unsigned long long *toHost = flags, *toGpu = flags + 64; // separate lines
    roundTripUs(toHost, toGpu, 1000, 0);                              // warm-up
    const double plain = roundTripUs(toHost, toGpu, iters, 0);
    const double fenced = roundTripUs(toHost, toGpu, iters, 1);
    // A launch and its completion, as each blocking collective pays once.
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) {
        pingPong<<<1, 1>>>(toHost, toGpu, 0, 0);
        cudaDeviceSynchronize();
    }
    const double launch = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1000 * 1e6;
    printf("flag_latency: GPU -> CPU -> GPU through mapped host memory: %.2f us round trip, %.2f us with "
           "__threadfence_system() before each write; empty kernel launch + synchronize: %.2f us\n",
           plain, fenced, launch);
    cudaFreeHost(flags);
    return 0;
}
