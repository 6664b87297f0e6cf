// Whether work that waits on one stream holds up other streams' kernels:
// CUDA spreads streams over CUDA_DEVICE_MAX_CONNECTIONS hardware queues
// (default 8), and a queue runs its work in order. Stream 0 gets a kernel
// that spins until the host releases it; then, by mode:
//   spin    nothing more (the control: a running kernel alone)
//   chain   a second kernel on stream 0 (a later call of the same
//           communicator, queued behind one that waits for peers)
//   event   stream 0 waits (cudaStreamWaitEvent) for an event recorded
//           after the spinning kernel on a stream of its own (a join, or a
//           wait for a posted call)
//   value   stream 0 waits (cuStreamWaitValue32) for a word in host memory
//           that the host sets on release (the resident kernel's posted
//           calls: core/stream/resident.cc)
//   lazy    spin alone, and the other streams' kernel is one never launched
//           before: under CUDA's lazy loading its first launch loads it,
//           which synchronizes the device (device/kernel_load.h); every
//           other mode runs after all kernels were loaded
// Then one small kernel on each of streams 1..N-1, all from this thread. The
// program reports which of them ran while stream 0 was held, releases it and
// checks that all ran. It does not see which hardware connection a stream
// got, and has one waiting stream only.
// A stream held up here is one whose communicator's kernel would wait for
// the held one: across ranks, a hang.
//   queue_sharing [STREAMS]    (default 32)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "queue_sharing: %s: %s\n", #call, cudaGetErrorString(e_));                 \
            exit(2);                                                                                   \
        }                                                                                              \
    } while (0)

__global__ void spin(volatile int *release) {
    while (*release == 0) {}
}
__global__ void mark(volatile int *done, int i) { done[i] = 1; }
__global__ void markLazy(volatile int *done, int i) { done[i] = 1; } // launched first in mode lazy

// cuStreamWaitValue32 through the runtime's entry point (no -lcuda).
typedef int (*WaitValue32)(cudaStream_t, void *, unsigned, unsigned);
static WaitValue32 waitValue32() {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050 // the versioned query (CUDA 13 has only that one)
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint("cuStreamWaitValue32", &fn, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess)
        return nullptr;
    return (WaitValue32)fn;
}

// Streams 1..n-1 whose kernel has not run after `ms` milliseconds.
static std::vector<int> held(volatile int *done, int n, int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::vector<int> h;
    for (int i = 1; i < n; ++i)
        if (!done[i]) h.push_back(i);
    return h;
}

static int run(const char *mode, int n) {
    int *release = nullptr, *done = nullptr;
    CHECK(cudaHostAlloc((void **)&release, sizeof(int), cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&done, sizeof(int) * (size_t)n, cudaHostAllocMapped));
    *release = 0;
    memset(done, 0, sizeof(int) * (size_t)n);
    int *dRelease = nullptr, *dDone = nullptr;
    CHECK(cudaHostGetDevicePointer((void **)&dRelease, release, 0));
    CHECK(cudaHostGetDevicePointer((void **)&dDone, done, 0));
    std::vector<cudaStream_t> s((size_t)n);
    for (cudaStream_t &x : s) CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    cudaStream_t side = nullptr;
    cudaEvent_t ev = nullptr;
    if (!strcmp(mode, "event")) {
        CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
        CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        spin<<<1, 1, 0, side>>>(dRelease);
        CHECK(cudaEventRecord(ev, side));
        CHECK(cudaStreamWaitEvent(s[0], ev, 0));
        mark<<<1, 1, 0, s[0]>>>(dDone, 0);
    } else if (!strcmp(mode, "value")) {
        WaitValue32 wait = waitValue32();
        const char *why = !wait ? "no cuStreamWaitValue32"
                          : wait(s[0], dRelease, 1, 0x1 /* CU_STREAM_WAIT_VALUE_GEQ */) != 0
                              ? "cuStreamWaitValue32 refused (no stream memory operations here)"
                              : nullptr;
        if (why) {
            printf("%-6s skipped: %s\n", mode, why);
            for (cudaStream_t &x : s) cudaStreamDestroy(x);
            cudaFreeHost(release);
            cudaFreeHost((void *)done);
            return 0;
        }
        mark<<<1, 1, 0, s[0]>>>(dDone, 0);
    } else {
        spin<<<1, 1, 0, s[0]>>>(dRelease);
        if (!strcmp(mode, "chain")) mark<<<1, 1, 0, s[0]>>>(dDone, 0);
    }
    for (int i = 1; i < n; ++i) {
        if (!strcmp(mode, "lazy")) markLazy<<<1, 1, 0, s[(size_t)i]>>>(dDone, i);
        else mark<<<1, 1, 0, s[(size_t)i]>>>(dDone, i);
    }
    CHECK(cudaGetLastError());
    std::vector<int> h = held(done, n, 200);
    printf("%-6s %2d streams: %2zu of %d other streams held while stream 0 waits", mode, n, h.size(), n - 1);
    for (size_t k = 0; k < h.size(); ++k) printf("%s%d", k ? "," : ": ", h[k]);
    printf("\n");
    *release = 1;
    CHECK(cudaDeviceSynchronize());
    int missing = 0;
    for (int i = 1; i < n; ++i) missing += !done[i];
    for (cudaStream_t &x : s) cudaStreamDestroy(x);
    if (side) cudaStreamDestroy(side);
    if (ev) cudaEventDestroy(ev);
    cudaFreeHost(release);
    cudaFreeHost((void *)done);
    if (missing) fprintf(stderr, "queue_sharing: %d kernels never ran\n", missing);
    return missing ? 1 : 0;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 32;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS"), *loading = getenv("CUDA_MODULE_LOADING");
    printf("# CUDA_DEVICE_MAX_CONNECTIONS=%s CUDA_MODULE_LOADING=%s\n", conn ? conn : "(unset: 8)",
           loading ? loading : "(unset: LAZY)");
    int rc = run("lazy", n < 2 ? 2 : n);
    cudaFuncAttributes a;
    CHECK(cudaFuncGetAttributes(&a, spin)); // loaded now: no load in the modes below
    CHECK(cudaFuncGetAttributes(&a, mark));
    for (const char *mode : {"spin", "chain", "event", "value"}) rc |= run(mode, n < 2 ? 2 : n);
    return rc;
}
