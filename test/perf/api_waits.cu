// Which CUDA calls wait for a kernel that is running on another stream: a
// kernel spins on loom's kind of stream (a blocking stream, as every
// communicator's) until the host releases it, while another thread makes one
// call; the call either returns within 200 ms or waits for the kernel. A
// call that waits, made inside a collective while another communicator's
// kernel waits for peers, can hang ranks across communicators (README,
// MPI_THREAD_MULTIPLE). Each call runs once per check, after a warm-up
// outside it (first-use costs are not what is measured). CUDA IPC is
// checked on allocations of a child process forked before CUDA starts. The
// calls that wait are checked again with the kernel on a non-blocking
// stream. Last, without a kernel: whether a child's new allocation over the
// range of one still mapped here can be mapped before the old mapping is
// closed (core/ipc/direct_buffers.cc closes it first).
//   api_waits
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

__global__ void spin(volatile int *release) {
    while (*release == 0) {}
}
__global__ void neverLaunched(int *p) {
    if (p) *p = 1;
}

static int *release, *dRelease;
static cudaStream_t busy; // the spinning kernel's: blocking, like a communicator's stream, or not

// Runs `call` on a thread while `spin` runs on `busy`; true if it returned within 200 ms.
static bool returnsWhileRunning(const std::function<void()> &call) {
    *release = 0;
    spin<<<1, 1, 0, busy>>>(dRelease);
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // the kernel is running
    std::atomic<bool> done{false};
    std::thread t([&] {
        call();
        done = true;
    });
    for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool returned = done;
    *release = 1;
    t.join();
    cudaDeviceSynchronize();
    return returned;
}

static void check(const char *what, const std::function<void()> &call) {
    printf("%-58s %s\n", what, returnsWhileRunning(call) ? "returns" : "WAITS for the kernel");
}

// What the child says of one allocation.
struct Shared {
    cudaIpcMemHandle_t handle;
    int reused; // after a reallocation: the new allocation starts where the freed one did
};
static const size_t kSharedBytes[] = {1 << 20, 1 << 20, 1 << 20, 1 << 20, 64 << 20};
static const int kShared = 5;

// A process of its own (forked before this one touches CUDA) that shares
// kShared allocations through CUDA IPC handles written to `out`; then, per
// byte read from `cmd` (an index), frees that allocation, allocates the
// same size again and shares the new one; it exits when `cmd` closes.
static void shareAllocations(int out, int cmd) {
    void *p[kShared] = {};
    for (int i = 0; i < kShared; ++i) {
        Shared s;
        memset(&s, 0, sizeof(s));
        if (cudaMalloc(&p[i], kSharedBytes[i]) == cudaSuccess) cudaIpcGetMemHandle(&s.handle, p[i]);
        if (write(out, &s, sizeof(s)) != (ssize_t)sizeof(s)) _exit(1);
    }
    char i;
    while (read(cmd, &i, 1) > 0) {
        Shared s;
        memset(&s, 0, sizeof(s));
        void *old = p[(int)i];
        cudaFree(old);
        if (cudaMalloc(&p[(int)i], kSharedBytes[(int)i]) == cudaSuccess) cudaIpcGetMemHandle(&s.handle, p[(int)i]);
        s.reused = p[(int)i] == old;
        if (write(out, &s, sizeof(s)) != (ssize_t)sizeof(s)) _exit(1);
    }
    _exit(0);
}

// Whether the child's reallocation of allocation i, still mapped here, can
// be mapped before the old mapping is closed.
static void reopenAfterReallocation(int i, const Shared &first, int cmd, int in) {
    void *old = nullptr, *again = nullptr;
    Shared s;
    char what[80];
    snprintf(what, sizeof(what), "%zu MiB: the owner's new allocation, old one still mapped", kSharedBytes[i] >> 20);
    if (cudaIpcOpenMemHandle(&old, first.handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        printf("%-58s skipped: %s\n", what, cudaGetErrorString(cudaGetLastError()));
        return;
    }
    const char c = (char)i;
    if (write(cmd, &c, 1) != 1 || read(in, &s, sizeof(s)) != (ssize_t)sizeof(s)) return;
    const cudaError_t e = cudaIpcOpenMemHandle(&again, s.handle, cudaIpcMemLazyEnablePeerAccess);
    cudaGetLastError();
    printf("%-58s %s (%s address)\n", what, e == cudaSuccess ? "maps" : cudaGetErrorString(e),
           s.reused ? "same" : "another");
    if (e == cudaSuccess) cudaIpcCloseMemHandle(again);
    cudaIpcCloseMemHandle(old);
}

int main() {
    int toParent[2], hold[2];
    if (pipe(toParent) || pipe(hold)) return 2;
    const pid_t child = fork();
    if (child == 0) {
        close(toParent[0]);
        close(hold[1]);
        shareAllocations(toParent[1], hold[0]);
    }
    close(toParent[1]);
    close(hold[0]);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU\n");
        close(hold[1]);
        waitpid(child, nullptr, 0);
        return 77;
    }
    Shared peer[kShared];
    for (int i = 0; i < kShared; ++i) // the last two: reopenAfterReallocation's
        if (read(toParent[0], &peer[i], sizeof(Shared)) != (ssize_t)sizeof(Shared)) memset(&peer[i], 0, sizeof(Shared));
    cudaHostAlloc((void **)&release, sizeof(int), cudaHostAllocMapped);
    cudaHostGetDevicePointer((void **)&dRelease, release, 0);
    cudaStream_t blocking, nonBlocking;
    cudaStreamCreate(&blocking);
    cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking);
    busy = blocking;
    cudaStream_t idle, idleNonBlocking;
    cudaStreamCreate(&idle);
    cudaStreamCreateWithFlags(&idleNonBlocking, cudaStreamNonBlocking);
    cudaFuncAttributes fa;
    cudaFuncGetAttributes(&fa, spin);
    const size_t mib = 1 << 20, small = 4096;
    void *dev = nullptr, *dev2 = nullptr, *pinned = nullptr;
    char *pageable = (char *)malloc(mib), *pageable2 = (char *)malloc(mib);
    memset(pageable, 1, mib);
    memset(pageable2, 1, mib);
    cudaMalloc(&dev, mib);
    cudaMalloc(&dev2, mib);
    cudaHostAlloc(&pinned, mib, cudaHostAllocDefault);
    void *freed = nullptr, *freed2 = nullptr;
    cudaMalloc(&freed, mib);
    cudaMalloc(&freed2, mib);
    void *freedHost = nullptr, *freedHost2 = nullptr;
    cudaHostAlloc(&freedHost, mib, cudaHostAllocDefault);
    cudaHostAlloc(&freedHost2, mib, cudaHostAllocDefault);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    printf("# a kernel spins on a blocking stream; meanwhile, on another thread:\n");
    check("cudaFuncGetAttributes of a kernel never launched (loads it)", [&] { cudaFuncGetAttributes(&fa, neverLaunched); });
    check("cudaMalloc 1 MiB", [&] { void *p; cudaMalloc(&p, mib); });
    check("cudaFree", [&] { cudaFree(freed); });
    check("cudaHostAlloc 1 MiB", [&] { void *p; cudaHostAlloc(&p, mib, cudaHostAllocDefault); });
    check("cudaFreeHost", [&] { cudaFreeHost(freedHost); });
    check("cudaHostRegister 1 MiB", [&] { cudaHostRegister(pageable2, mib, cudaHostRegisterDefault); });
    check("cudaStreamCreateWithFlags (non-blocking)", [&] { cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); });
    check("cudaEventCreate", [&] { cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming); });
    check("cudaIpcGetMemHandle", [&] { cudaIpcMemHandle_t h; cudaIpcGetMemHandle(&h, dev); });
    check("cudaMemcpy D2H 4 KiB (legacy default stream)", [&] { cudaMemcpy(pageable, dev, small, cudaMemcpyDeviceToHost); });
    check("cudaMemcpyAsync D2H 4 KiB, per-thread stream + its sync", [&] {
        cudaMemcpyAsync(pageable, dev, small, cudaMemcpyDeviceToHost, cudaStreamPerThread);
        cudaStreamSynchronize(cudaStreamPerThread);
    });
    check("cudaMemcpyAsync H2D 4 KiB pageable, idle blocking stream", [&] {
        cudaMemcpyAsync(dev, pageable, small, cudaMemcpyHostToDevice, idle);
    });
    check("cudaMemcpyAsync H2D 4 KiB pageable, the kernel's stream", [&] {
        cudaMemcpyAsync(dev, pageable, small, cudaMemcpyHostToDevice, busy);
    });
    check("cudaMemcpyAsync H2D 1 MiB pageable, the kernel's stream", [&] {
        cudaMemcpyAsync(dev, pageable, mib, cudaMemcpyHostToDevice, busy);
    });
    check("cudaMemcpyAsync H2D 4 KiB pinned, the kernel's stream", [&] {
        cudaMemcpyAsync(dev, pinned, small, cudaMemcpyHostToDevice, busy);
    });
    check("cudaMemcpyAsync D2D 1 MiB, idle non-blocking stream + its sync", [&] {
        cudaMemcpyAsync(dev2, dev, mib, cudaMemcpyDeviceToDevice, idleNonBlocking);
        cudaStreamSynchronize(idleNonBlocking);
    });
    check("cudaMemsetAsync 1 MiB, idle non-blocking stream + its sync", [&] {
        cudaMemsetAsync(dev2, 0, mib, idleNonBlocking);
        cudaStreamSynchronize(idleNonBlocking);
    });
    check("cudaStreamQuery / cudaEventQuery of the kernel's stream", [&] {
        cudaStreamQuery(busy);
        cudaEventRecord(ev, busy);
        cudaEventQuery(ev);
    });
    // Another process's allocations (the peers' buffers of direct pairs and FIFOs).
    void *mapped = nullptr, *mapped2 = nullptr, *warm = nullptr;
    const bool ipc = cudaIpcOpenMemHandle(&warm, peer[0].handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess;
    if (!ipc) {
        printf("%-58s skipped: %s\n", "cudaIpcOpenMemHandle / cudaIpcCloseMemHandle", cudaGetErrorString(cudaGetLastError()));
    } else {
        check("cudaIpcOpenMemHandle (another process's allocation)", [&] {
            cudaIpcOpenMemHandle(&mapped, peer[1].handle, cudaIpcMemLazyEnablePeerAccess);
        });
        check("cudaIpcCloseMemHandle", [&] { cudaIpcCloseMemHandle(mapped); });
        cudaIpcOpenMemHandle(&mapped2, peer[2].handle, cudaIpcMemLazyEnablePeerAccess);
    }
    // The calls that wait, with the kernel on a non-blocking stream instead.
    busy = nonBlocking;
    printf("# the kernel spins on a non-blocking stream:\n");
    check("cudaFree", [&] { cudaFree(freed2); });
    check("cudaFreeHost", [&] { cudaFreeHost(freedHost2); });
    check("cudaMemcpy D2H 4 KiB (legacy default stream)", [&] { cudaMemcpy(pageable, dev, small, cudaMemcpyDeviceToHost); });
    if (ipc) check("cudaIpcCloseMemHandle", [&] { cudaIpcCloseMemHandle(mapped2); });
    if (ipc) {
        cudaIpcCloseMemHandle(warm);
        printf("# no kernel running; the owner frees an allocation mapped here and allocates again:\n");
        reopenAfterReallocation(kShared - 2, peer[kShared - 2], hold[1], toParent[0]);
        reopenAfterReallocation(kShared - 1, peer[kShared - 1], hold[1], toParent[0]);
    }
    close(hold[1]);
    waitpid(child, nullptr, 0);
    return 0;
}
