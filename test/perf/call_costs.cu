// What the host-side CUDA calls a launch-free (resident-kernel) collective
// makes cost, one at a time (one GPU, one process): the driver's pointer
// query loom makes per buffer (mca_coll_loom_locate), and the stream queries
// of the resident path's ordering check (core/stream/resident.cc,
// residentEligible), idle and while a kernel spins on another stream, as the
// resident kernel does between calls. Each row: median over 21 rounds of
// 2000 calls, ns per call, after 2000 calls of warm-up.
// Asking whether finished work is finished (a stream or event query) is the
// dear case while any kernel runs; so the rows also time the alternatives
// to asking: the driver's own query, and a stream write on the legacy
// stream (cuStreamWriteValue32), which the GPU carries out once the work
// before it is done: its host call, and the round trip until the host sees
// the word written.
//   call_costs
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <dlfcn.h>

#include <cuda.h>
#include <cuda_runtime.h>

static const char kPerfTool[] = "call_costs";
#include "cuda_check.h"

namespace {

__global__ void spin(volatile int *release) {
    while (*release == 0) {}
}

using PointerAttrsFn = CUresult (*)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
using StreamQueryFn = CUresult (*)(CUstream);
using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);

__global__ void empty() {}

double nsPerCall(const std::function<void()> &call) {
    constexpr int kCalls = 2000, kRounds = 21;
    for (int i = 0; i < kCalls; ++i) call();
    std::vector<double> rounds;
    for (int r = 0; r < kRounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kCalls; ++i) call();
        const auto t1 = std::chrono::steady_clock::now();
        rounds.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls);
    }
    std::nth_element(rounds.begin(), rounds.begin() + kRounds / 2, rounds.end());
    return rounds[kRounds / 2];
}

void row(const char *what, const std::function<void()> &call) { printf("%-78s %8.1f\n", what, nsPerCall(call)); }

} // namespace

int main() {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    const auto pointerAttrs = libcuda ? (PointerAttrsFn)dlsym(libcuda, "cuPointerGetAttributes") : nullptr;
    if (!pointerAttrs) {
        fprintf(stderr, "call_costs: no cuPointerGetAttributes in libcuda.so.1\n");
        return 1;
    }
    const auto streamQuery = (StreamQueryFn)dlsym(libcuda, "cuStreamQuery");
    const auto writeValue = (WriteValueFn)dlsym(libcuda, "cuStreamWriteValue32_v2");
    CK(cudaSetDevice(0));
    char *dev = nullptr;
    CK(cudaMalloc(&dev, 1 << 20));
    std::vector<char> host(1 << 20);
    int *release = nullptr, *dRelease = nullptr;
    CK(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&dRelease, release, 0));
    volatile unsigned *word = nullptr;
    unsigned *dWord = nullptr, written = 0;
    CK(cudaHostAlloc((void **)&word, sizeof(unsigned), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&dWord, (void *)word, 0));
    *word = 0;
    cudaStream_t blocking, nonBlocking, finished;
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&finished, cudaStreamNonBlocking)); // work done, never again
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, nonBlocking));
    empty<<<1, 1, 0, finished>>>();
    CK(cudaMemsetAsync(dev, 0, 64, cudaStreamLegacy)); // the legacy stream has had work, as an application's has
    CK(cudaDeviceSynchronize());

    unsigned memType = 0, isManaged = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[] = {&memType, &ordinal, &isManaged};
    volatile cudaError_t sink = cudaSuccess;
    int device = -1;

    printf("%-78s %8s\n", "call", "ns/call");
    if (!writeValue) printf("(no cuStreamWriteValue32_v2 in libcuda.so.1: its rows left out)\n");
    // What runs with the GPU idle, then with a kernel spinning on `busy`.
    auto rows = [&](const char *when) {
        char what[128];
        auto named = [&](const char *call) { return snprintf(what, sizeof(what), "%s, %s", call, when), what; };
        row(named("cuPointerGetAttributes(3) device pointer"),
            [&] { sink = (cudaError_t)pointerAttrs(3, attrs, data, (CUdeviceptr)(dev + 4096)); });
        row(named("cuPointerGetAttributes(3) host pointer"),
            [&] { sink = (cudaError_t)pointerAttrs(3, attrs, data, (CUdeviceptr)(host.data() + 4096)); });
        row(named("cudaStreamQuery(cudaStreamLegacy)"), [&] { sink = cudaStreamQuery(cudaStreamLegacy); });
        if (streamQuery) row(named("cuStreamQuery(CU_STREAM_LEGACY)"), [&] { sink = (cudaError_t)streamQuery(CU_STREAM_LEGACY); });
        row(named("cudaStreamQuery(a non-blocking stream, its work done)"), [&] { sink = cudaStreamQuery(finished); });
        row(named("cudaEventQuery(completed event)"), [&] { sink = cudaEventQuery(ev); });
        row(named("cudaGetDevice"), [&] { sink = cudaGetDevice(&device); });
    };
    // The legacy stream's alternatives; not while a kernel spins on a
    // blocking stream (legacy-stream work waits for it).
    auto writes = [&](const char *when) {
        char what[128];
        auto named = [&](const char *call) { return snprintf(what, sizeof(what), "%s, %s", call, when), what; };
        row(named("launch of an empty kernel on the legacy stream"), [&] { empty<<<1, 1>>>(); });
        CK(cudaStreamSynchronize(cudaStreamLegacy));
        if (!writeValue) return;
        row(named("cuStreamWriteValue32 on the legacy stream (host call)"),
            [&] { sink = (cudaError_t)writeValue(CU_STREAM_LEGACY, (CUdeviceptr)dWord, ++written, 0); });
        CK(cudaStreamSynchronize(cudaStreamLegacy));
        row(named("cuStreamWriteValue32 on the legacy stream until the host sees it"), [&] {
            sink = (cudaError_t)writeValue(CU_STREAM_LEGACY, (CUdeviceptr)dWord, ++written, 0);
            while (*word != written) {}
        });
        row(named("cudaStreamSynchronize(cudaStreamLegacy), its work done"),
            [&] { sink = cudaStreamSynchronize(cudaStreamLegacy); });
    };
    rows("GPU idle");
    writes("GPU idle");
    *release = 0;
    spin<<<1, 1, 0, blocking>>>(dRelease);
    CK(cudaGetLastError());
    rows("a kernel spins on a blocking stream");
    row("cudaStreamQuery(the spinning blocking stream)", [&] { sink = cudaStreamQuery(blocking); });
    *release = 1;
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(ev, nonBlocking));
    CK(cudaDeviceSynchronize());
    *release = 0;
    spin<<<1, 1, 0, nonBlocking>>>(dRelease);
    CK(cudaGetLastError());
    rows("a kernel spins on a non-blocking stream");
    writes("a kernel spins on a non-blocking stream");
    *release = 1;
    CK(cudaDeviceSynchronize());
    (void)sink;
    return 0;
}
