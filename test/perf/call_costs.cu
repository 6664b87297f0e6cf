// What the host-side CUDA calls a launch-free (resident-kernel) collective
// makes cost, one at a time (one GPU, one process): the driver's pointer
// query loom makes per buffer (mca_coll_loom_locate), and the stream queries
// of the resident path's ordering check (core/stream/resident.cc,
// residentEligible), idle and while a kernel spins on another stream, as the
// resident kernel does between calls. Each row: median over 21 rounds of
// 2000 calls, ns per call, after 2000 calls of warm-up.
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

void row(const char *what, const std::function<void()> &call) { printf("%-62s %8.1f\n", what, nsPerCall(call)); }

} // namespace

int main() {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    const auto pointerAttrs = libcuda ? (PointerAttrsFn)dlsym(libcuda, "cuPointerGetAttributes") : nullptr;
    if (!pointerAttrs) {
        fprintf(stderr, "call_costs: no cuPointerGetAttributes in libcuda.so.1\n");
        return 1;
    }
    CK(cudaSetDevice(0));
    char *dev = nullptr;
    CK(cudaMalloc(&dev, 1 << 20));
    std::vector<char> host(1 << 20);
    int *release = nullptr, *dRelease = nullptr;
    CK(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&dRelease, release, 0));
    cudaStream_t blocking, nonBlocking;
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, nonBlocking));
    CK(cudaDeviceSynchronize());

    unsigned memType = 0, isManaged = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[] = {&memType, &ordinal, &isManaged};
    volatile cudaError_t sink = cudaSuccess;
    int device = -1;

    printf("%-62s %8s\n", "call", "ns/call");
    // What runs with the GPU idle, then with a kernel spinning on `busy`.
    auto rows = [&](const char *when) {
        char what[128];
        auto named = [&](const char *call) { return snprintf(what, sizeof(what), "%s, %s", call, when), what; };
        row(named("cuPointerGetAttributes(3) device pointer"),
            [&] { sink = (cudaError_t)pointerAttrs(3, attrs, data, (CUdeviceptr)(dev + 4096)); });
        row(named("cuPointerGetAttributes(3) host pointer"),
            [&] { sink = (cudaError_t)pointerAttrs(3, attrs, data, (CUdeviceptr)(host.data() + 4096)); });
        row(named("cudaStreamQuery(cudaStreamLegacy)"), [&] { sink = cudaStreamQuery(cudaStreamLegacy); });
        row(named("cudaStreamQuery(idle non-blocking stream)"), [&] { sink = cudaStreamQuery(nonBlocking); });
        row(named("cudaEventQuery(completed event)"), [&] { sink = cudaEventQuery(ev); });
        row(named("cudaGetDevice"), [&] { sink = cudaGetDevice(&device); });
    };
    rows("GPU idle");
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
    *release = 1;
    CK(cudaDeviceSynchronize());
    (void)sink;
    return 0;
}
