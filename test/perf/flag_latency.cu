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

// A launch's argument block the size of the zero-copy allreduce's.
struct BigArgs {
    void *p[30];
};
__global__ void emptyBig(BigArgs a) {
    if (a.p[0] == (void *)1) a.p[1] = nullptr;
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
    // What a resident kernel's host side pays per call to learn that nothing
    // may still write the buffers: idle-stream queries, with and without a
    // kernel spinning on a stream of its own meanwhile.
    cudaStream_t blocking, nonBlocking, spinStream;
    cudaStreamCreateWithFlags(&blocking, cudaStreamDefault);
    cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&spinStream, cudaStreamNonBlocking);
    const cudaStream_t streams[3] = {cudaStreamLegacy, blocking, nonBlocking};
    double query[2][3];
    for (int spinning = 0; spinning < 2; ++spinning) {
        *toHost = 0;
        *toGpu = 0;
        if (spinning) pingPong<<<1, 1, 0, spinStream>>>(toHost, toGpu, 1, 0); // waits for the CPU's answer
        for (int k = 0; k < 3; ++k) {
            for (int i = 0; i < 100; ++i) cudaStreamQuery(streams[k]);
            auto q0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 10000; ++i) cudaStreamQuery(streams[k]);
            query[spinning][k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - q0).count() / 10000 * 1e6;
        }
        if (spinning) {
            while (*toHost < 1) {}
            *toGpu = 1;
            cudaStreamSynchronize(spinStream);
        }
    }
    printf("flag_latency: cudaStreamQuery of an idle stream (legacy, blocking, non-blocking): %.2f, %.2f, %.2f us; "
           "with a kernel running on another stream: %.2f, %.2f, %.2f us\n",
           query[0][0], query[0][1], query[0][2], query[1][0], query[1][1], query[1][2]);
    // What ordering a non-blocking stream after the legacy stream's work
    // costs a call (core/stream/app_order.cc): an event recorded on the legacy
    // stream and waited for on the non-blocking one, the legacy stream idle.
    cudaEvent_t mark;
    cudaEventCreateWithFlags(&mark, cudaEventDisableTiming);
    for (int i = 0; i < 100; ++i) cudaEventRecord(mark, cudaStreamLegacy), cudaStreamWaitEvent(nonBlocking, mark, 0);
    cudaStreamSynchronize(nonBlocking);
    auto r0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) cudaEventRecord(mark, cudaStreamLegacy), cudaStreamWaitEvent(nonBlocking, mark, 0);
    const double orderUs = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count() / 10000 * 1e6;
    cudaStreamSynchronize(nonBlocking);
    cudaEventDestroy(mark);
    printf("flag_latency: cudaEventRecord on the idle legacy stream + cudaStreamWaitEvent on a non-blocking one: "
           "%.2f us\n", orderUs);
    // What a collective's host side pays per pointer it locates (the
    // component asks where each buffer lives; zero-copy asks again for the
    // allocation's id): device memory, and a pageable host pointer.
    void *dev = nullptr;
    cudaMalloc(&dev, 1 << 20);
    static char hostBuf[64];
    double attrUs[2];
    for (int k = 0; k < 2; ++k) {
        const void *p = k == 0 ? dev : static_cast<const void *>(hostBuf);
        cudaPointerAttributes at;
        for (int i = 0; i < 100; ++i) cudaPointerGetAttributes(&at, p);
        auto a0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 100000; ++i) cudaPointerGetAttributes(&at, p);
        attrUs[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count() / 100000 * 1e6;
    }
    printf("flag_latency: cudaPointerGetAttributes: %.3f us on device memory, %.3f us on host memory\n", attrUs[0],
           attrUs[1]);
    // The host's cost of one launch (queued, not waited for), by the
    // stream's kind and the argument block's size.
    double launchUs[2][2];
    for (int nb = 0; nb < 2; ++nb)
        for (int big = 0; big < 2; ++big) {
            cudaStream_t s = nb ? nonBlocking : blocking;
            BigArgs args{};
            for (int i = 0; i < 100; ++i) big ? emptyBig<<<8, 512, 0, s>>>(args) : pingPong<<<8, 512, 0, s>>>(toHost, toGpu, 0, 0);
            cudaStreamSynchronize(s);
            double sum = 0;
            for (int rep = 0; rep < 20; ++rep) {
                auto l0 = std::chrono::steady_clock::now();
                for (int i = 0; i < 200; ++i) big ? emptyBig<<<8, 512, 0, s>>>(args) : pingPong<<<8, 512, 0, s>>>(toHost, toGpu, 0, 0);
                sum += std::chrono::duration<double>(std::chrono::steady_clock::now() - l0).count() / 200 * 1e6;
                cudaStreamSynchronize(s);
            }
            launchUs[nb][big] = sum / 20;
        }
    printf("flag_latency: host time per launch (queued): blocking stream %.2f us (%zu B of arguments: %.2f us), "
           "non-blocking stream %.2f us (%.2f us)\n", launchUs[0][0], sizeof(BigArgs), launchUs[0][1], launchUs[1][0],
           launchUs[1][1]);
    cudaFree(dev);
    cudaFreeHost(flags);
    return 0;
}
