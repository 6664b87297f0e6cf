// A GPU kept busy for a while (late_rank.c): one thread spins on the
// global timer, so the stream's next work starts `seconds` later.
#include <cuda_runtime.h>

#include "busy_gpu.h"

namespace {

__global__ void spinKernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

} // namespace

extern "C" int busy_gpu(double seconds, cudaStream_t stream) {
    spinKernel<<<1, 1, 0, stream>>>((unsigned long long)(seconds * 1e9));
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
