// How a call's work can reach the GPU, timed from the host (one GPU, one
// process): what a mid-size collective pays before its kernel runs.
//   launch_paths [ITERS]
// The work: a kernel of C CTAs that copies B bytes device to device. At its
// first instruction CTA 0 writes a "started" word, the last CTA to finish a
// "done" word, both in mapped host memory the host spins on. Paths:
//   launch   cudaLaunchKernel from the host (what loom does per call today);
//   graph    cudaGraphLaunch of a one-kernel graph from the host (its
//            arguments in a device descriptor, written before the clock starts);
//   graphset the same with the kernel's arguments by value, set per call by
//            cudaGraphExecKernelNodeSetParams (inside the timed part);
//   device   a one-thread scheduler kernel, itself a device-launchable graph
//            started once, spins on a doorbell in mapped host memory; on a
//            ring it fire-and-forget launches the work graph (its arguments
//            in a device descriptor the scheduler fills) and tail-launches
//            itself, which runs once the work is done (CUDA orders a tail
//            launch after its graph's fire-and-forget children);
//   devparam as device, the work kernel taking its arguments by value, set
//            by the scheduler in a device-updatable kernel node;
//   resident one CTA already running polls the doorbell and copies itself
//            (the shape of loom's resident kernel; at 1 CTA only).
// Results and what they decided: docs/performance.md.
// Printed per path, size and CTA count: the host time inside the launch call,
// from call entry to "started" seen, and to "done" seen (medians, us).
// Built with relocatable device code and cudadevrt (device graph launch).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

static const char kPerfTool[] = "launch_paths";
#include "cuda_check.h"

namespace {

struct Work {
    const int4 *src;
    int4 *dst;
    unsigned long long vecs; // 16-byte vectors to copy
    unsigned seq;            // the call's number, written back to started/done
};

struct Flags { // mapped host memory
    volatile unsigned started, done, doorbell, quit;
    Work posted; // what the host rings for
};

__device__ unsigned g_arrived; // CTAs of the current call that finished

__device__ void copyPart(const Work &w, unsigned cta, unsigned ctas) {
    for (unsigned long long i = (unsigned long long)cta * blockDim.x + threadIdx.x; i < w.vecs;
         i += (unsigned long long)ctas * blockDim.x)
        w.dst[i] = __ldcg(w.src + i);
}

__device__ void finishCall(volatile Flags *f, unsigned seq) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&g_arrived, 1) == gridDim.x - 1) {
            g_arrived = 0;
            __threadfence_system();
            f->done = seq;
        }
    }
}

__global__ void workByValue(Work w, volatile Flags *f) {
    if (blockIdx.x == 0 && threadIdx.x == 0) f->started = w.seq;
    copyPart(w, blockIdx.x, gridDim.x);
    finishCall(f, w.seq);
}

__global__ void workFromDescriptor(const Work *d, volatile Flags *f) {
    const Work w = *d;
    if (blockIdx.x == 0 && threadIdx.x == 0) f->started = w.seq;
    copyPart(w, blockIdx.x, gridDim.x);
    finishCall(f, w.seq);
}

__device__ cudaGraphExec_t g_workGraph;
__device__ cudaGraphDeviceNode_t g_workNode; // set: the work takes its arguments by value (devparam)
__device__ Work g_descriptor;
__device__ unsigned g_served;

// One thread: waits for the doorbell, hands the call to the work graph, and
// tail-launches itself (which runs after the work graph is done).
__global__ void scheduler(volatile Flags *f) {
    while (true) {
        if (f->quit) return;
        const unsigned bell = f->doorbell;
        if (bell != g_served) {
            Work w;
            w.src = f->posted.src;
            w.dst = f->posted.dst;
            w.vecs = f->posted.vecs;
            w.seq = bell;
            if (g_workNode) // the kernel's own arguments, as loom's kernels take them
                cudaGraphKernelNodeSetParam(g_workNode, 0, w);
            else
                g_descriptor = w;
            g_served = bell;
            __threadfence();
            cudaGraphLaunch(g_workGraph, cudaStreamGraphFireAndForget);
            cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
            return;
        }
    }
}

// One CTA copies each call itself (the resident kernel's shape today).
constexpr unsigned kQuit = 0xffffffffu; // the resident kernel's doorbell value to leave

// Warp 0 alone reads host memory (each read crosses PCIe): one read per
// poll, then the call's three words in parallel, as loom's resident kernel
// reads its mailbox lines.
__global__ void residentCopy(volatile Flags *f, unsigned served) {
    __shared__ unsigned bell;
    __shared__ Work w;
    while (true) {
        if (threadIdx.x < 32) {
            unsigned b = 0;
            if (threadIdx.x == 0)
                while ((b = f->doorbell) == served) {}
            b = __shfl_sync(0xffffffffu, b, 0);
            if (b != kQuit) {
                if (threadIdx.x == 0) f->started = b;
                if (threadIdx.x == 1) w.src = f->posted.src;
                if (threadIdx.x == 2) w.dst = f->posted.dst;
                if (threadIdx.x == 3) w.vecs = f->posted.vecs;
            }
            if (threadIdx.x == 0) bell = b;
        }
        __syncthreads();
        if (bell == kQuit) return;
        copyPart(w, 0, 1);
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();
            f->done = bell;
        }
        served = bell;
        __syncthreads();
    }
}


using Clock = std::chrono::steady_clock;
double usSince(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct Times {
    std::vector<double> api, start, done;
    void add(double a, double s, double d) { api.push_back(a), start.push_back(s), done.push_back(d); }
    static double median(std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v[v.size() / 2];
    }
};

void print(const char *path, size_t bytes, int ctas, Times &t) {
    printf("%-9s %9zu %5d %9.2f %9.2f %9.2f\n", path, bytes, ctas, Times::median(t.api), Times::median(t.start),
           Times::median(t.done));
}

// A graph of one kernel node running FUNC on CTAS CTAs of THREADS threads (*node: the node).
cudaGraph_t oneKernelGraph(void *func, int ctas, int threads, void **args, cudaGraphNode_t *node,
                           cudaKernelNodeParams *params = nullptr) {
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams p = {};
    p.func = func;
    p.gridDim = dim3(ctas);
    p.blockDim = dim3(threads);
    p.kernelParams = args;
    CK(cudaGraphAddKernelNode(node, g, nullptr, 0, &p));
    if (params) *params = p;
    return g;
}

cudaGraphExec_t instantiate(cudaGraph_t g, unsigned long long flags) {
    cudaGraphExec_t e;
    CK(cudaGraphInstantiateWithFlags(&e, g, flags));
    CK(cudaGraphDestroy(g));
    return e;
}

// workFromDescriptor on CTAS CTAs.
cudaGraphExec_t workGraph(const Work *desc, volatile Flags *f, int ctas, unsigned long long flags) {
    void *args[] = {(void *)&desc, (void *)&f};
    cudaGraphNode_t n;
    return instantiate(oneKernelGraph((void *)workFromDescriptor, ctas, 512, args, &n), flags);
}

// workByValue on CTAS CTAs in a device-updatable node; *node: its device handle.
cudaGraphExec_t updatableWorkGraph(volatile Flags *f, int ctas, cudaGraphDeviceNode_t *node) {
    Work w{};
    void *args[] = {(void *)&w, (void *)&f};
    cudaGraphNode_t n;
    cudaGraph_t g = oneKernelGraph((void *)workByValue, ctas, 512, args, &n);
    cudaKernelNodeAttrValue v = {};
    v.deviceUpdatableKernelNode.deviceUpdatable = 1;
    CK(cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
    CK(cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
    *node = v.deviceUpdatableKernelNode.devNode;
    return instantiate(g, cudaGraphInstantiateFlagDeviceLaunch);
}

// What the host does to post a call to a kernel already running (untimed
// parts of the host's own, the doorbell last).
void ring(Flags *f, const Work &w) {
    f->posted = w;
    std::atomic_thread_fence(std::memory_order_release);
    f->doorbell = w.seq;
}

void waitFor(volatile unsigned *w, unsigned v) {
    while (*w != v) {}
}

// ITERS calls of one path, printed as a row: before(w) outside the clock
// (what a path may prepare ahead), issue(w) inside it, then the spins on the
// kernel's started and done words.
template <typename Before, typename Issue>
void timeCalls(const char *path, const Work &w0, int ctas, int iters, unsigned *seq, Flags *f, Before before,
               Issue issue) {
    Times t;
    for (int i = 0; i < iters; ++i) {
        Work w = w0;
        w.seq = ++*seq;
        before(w);
        const auto t0 = Clock::now();
        issue(w);
        const double api = usSince(t0);
        waitFor(&f->started, w.seq);
        const double st = usSince(t0);
        waitFor(&f->done, w.seq);
        t.add(api, st, usSince(t0));
    }
    print(path, w0.vecs * 16, ctas, t);
}

} // namespace

int main(int argc, char **argv) {
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    Flags *f = nullptr;
    CK(cudaHostAlloc((void **)&f, sizeof(Flags), cudaHostAllocMapped));
    Flags *fd = nullptr;
    CK(cudaHostGetDevicePointer((void **)&fd, f, 0));
    const size_t maxBytes = 4 << 20;
    int4 *src, *dst;
    CK(cudaMalloc(&src, maxBytes));
    CK(cudaMalloc(&dst, maxBytes));
    CK(cudaMemset(src, 1, maxBytes));
    Work *desc = nullptr;
    CK(cudaGetSymbolAddress((void **)&desc, g_descriptor));
    cudaStream_t s, sched;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sched, cudaStreamNonBlocking));
    unsigned seq = 0;
    printf("%-9s %9s %5s %9s %9s %9s\n", "path", "bytes", "ctas", "api_us", "start_us", "done_us");
    const size_t sizes[] = {16, 32 << 10, 256 << 10, 2 << 20};
    const int ctaCounts[] = {1, 16, 64};
    auto nothing = [](const Work &) {};
    for (size_t bytes : sizes)
        for (int ctas : ctaCounts) {
            const Work w0{src, dst, bytes / 16, 0};
            timeCalls("launch", w0, ctas, iters, &seq, f, nothing,
                      [&](const Work &w) { workByValue<<<ctas, 512, 0, s>>>(w, fd); });
            CK(cudaStreamSynchronize(s));
            // graph (host launch): arguments through the descriptor, set by a copy before the clock
            cudaGraphExec_t hostGraph = workGraph(desc, fd, ctas, 0);
            timeCalls(
                "graph", w0, ctas, iters, &seq, f,
                [&](const Work &w) { CK(cudaMemcpyToSymbol(g_descriptor, &w, sizeof(w))); },
                [&](const Work &) { CK(cudaGraphLaunch(hostGraph, s)); });
            CK(cudaStreamSynchronize(s));
            CK(cudaGraphExecDestroy(hostGraph));
            // graphset: the by-value kernel in a host graph, its arguments set per call (timed)
            {
                Work arg = w0; // what the node's parameters point at
                void *args[] = {(void *)&arg, (void *)&fd};
                cudaGraphNode_t n;
                cudaKernelNodeParams p;
                // The graph outlives the loop: SetParams names its node.
                cudaGraph_t g = oneKernelGraph((void *)workByValue, ctas, 512, args, &n, &p);
                cudaGraphExec_t e;
                CK(cudaGraphInstantiateWithFlags(&e, g, 0));
                timeCalls(
                    "graphset", w0, ctas, iters, &seq, f, [&](const Work &w) { arg = w; },
                    [&](const Work &) {
                        CK(cudaGraphExecKernelNodeSetParams(e, n, &p));
                        CK(cudaGraphLaunch(e, s));
                    });
                CK(cudaStreamSynchronize(s));
                CK(cudaGraphExecDestroy(e));
                CK(cudaGraphDestroy(g));
            }
            // device, devparam: a scheduler graph started once, the work graph launched from it
            for (int byValue = 0; byValue < 2; ++byValue) {
                cudaGraphDeviceNode_t node = nullptr;
                cudaGraphExec_t dev = byValue ? updatableWorkGraph(fd, ctas, &node)
                                              : workGraph(desc, fd, ctas, cudaGraphInstantiateFlagDeviceLaunch);
                CK(cudaGraphUpload(dev, sched));
                CK(cudaMemcpyToSymbol(g_workGraph, &dev, sizeof(dev)));
                CK(cudaMemcpyToSymbol(g_workNode, &node, sizeof(node)));
                unsigned served = seq;
                CK(cudaMemcpyToSymbol(g_served, &served, sizeof(served)));
                f->doorbell = seq;
                f->quit = 0;
                void *args[] = {(void *)&fd};
                cudaGraphNode_t n;
                cudaGraphExec_t se =
                    instantiate(oneKernelGraph((void *)scheduler, 1, 1, args, &n), cudaGraphInstantiateFlagDeviceLaunch);
                CK(cudaGraphUpload(se, sched));
                CK(cudaGraphLaunch(se, sched));
                timeCalls(byValue ? "devparam" : "device", w0, ctas, iters, &seq, f, nothing,
                          [&](const Work &w) { ring(f, w); });
                f->quit = 1;
                CK(cudaStreamSynchronize(sched));
                CK(cudaGraphExecDestroy(se));
                CK(cudaGraphExecDestroy(dev));
            }
            if (ctas == 1) { // the resident shape: one CTA, no launch
                f->doorbell = seq;
                residentCopy<<<1, 512, 0, sched>>>(fd, seq);
                timeCalls("resident", w0, 1, iters, &seq, f, nothing, [&](const Work &w) { ring(f, w); });
                f->doorbell = kQuit;
                CK(cudaStreamSynchronize(sched));
            }
        }
    CK(cudaGetLastError());
    return 0;
}
