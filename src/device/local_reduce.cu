/*
 * MPI_Reduce_local on device memory: inout[i] = in[i] op inout[i], one
 * element per thread of a grid-stride loop, per (type, op) through the same
 * dispatch as the collectives. No peers, no FIFOs: a plain elementwise kernel.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"

namespace loom {
namespace {

constexpr int kLocalReduceThreads = 256;
constexpr size_t kLocalReduceMaxCtas = 1024;

template <typename T, typename Op> __global__ void localReduceKernel(const __grid_constant__ LocalReduceArgs a) {
    const T *in = static_cast<const T *>(a.in);
    T *inout = static_cast<T *>(a.inout);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += stride)
        inout[i] = reduce<T, Op>(in[i], inout[i]);
}

template <typename T, typename Op> struct LocalReduceKernel {
    static cudaError_t launch(const LocalReduceArgs &a, cudaStream_t stream) {
        size_t ctas = (a.count + kLocalReduceThreads - 1) / kLocalReduceThreads;
        if (ctas > kLocalReduceMaxCtas) ctas = kLocalReduceMaxCtas;
        if (ctas == 0) return cudaSuccess;
        localReduceKernel<T, Op><<<(unsigned)ctas, kLocalReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, localReduceKernel<T, Op>); }
};

} // namespace

cudaError_t launchLocalReduce(const LocalReduceArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<LocalReduceKernel>(dtype, op, a, stream);
}

cudaError_t loadLocalReduceKernels(KernelLoad *l) { return loadTypeOps<LocalReduceKernel>(l); }

} // namespace loom
