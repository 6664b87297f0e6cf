/*
 * loomReduceLocal: MPI_Reduce_local on GPU memory, inout = in op inout,
 * elementwise on the buffers' GPU (device/local_reduce.cu), ordered and
 * synchronized like loomMemcpySync (after the application's work on the
 * legacy default stream and the calling thread's default stream).
 */
#include <cuda_runtime.h>

#include "base/debug.h"
#include "core/comm/kernel_load.h"
#include "device/collectives.h"
#include "loom.h"

using namespace loom;

extern "C" loomResult_t loomReduceLocal(const void *in, void *inout, size_t count, loomDataType_t type,
                                        loomRedOp_t op) {
    if (count == 0) return loomSuccess;
    if (!in || !inout) return fail(loomInvalidArgument, "loomReduceLocal: NULL %s buffer", in ? "inout" : "input");
    if (type < 0 || type >= loomNumTypes || op < 0 || op >= loomNumOps || !loomOpSupported(type, op))
        return fail(loomInvalidArgument, "loomReduceLocal: type %d with op %d is not reduced on the GPU", (int)type,
                    (int)op);
    loomPointerInfo_t a, b;
    loomPointerQuery(in, &a);
    loomPointerQuery(inout, &b);
    if (a.kind == loomMemoryHost || b.kind == loomMemoryHost || a.device != b.device)
        return fail(loomInvalidArgument, "loomReduceLocal: both buffers must be GPU memory of one device "
                    "(input: %s on %d, inout: %s on %d)", a.kind == loomMemoryHost ? "host" : "GPU", a.device,
                    b.kind == loomMemoryHost ? "host" : "GPU", b.device);
    int current = -1;
    cudaError_t e = cudaGetDevice(&current);
    if (e == cudaSuccess && current != b.device) e = cudaSetDevice(b.device);
    // Every loom kernel of the device is loaded before the first runs
    // (device/kernel_load.h: a lazy load waits for running kernels).
    loomResult_t r = e == cudaSuccess ? loadDeviceKernels(-1, b.device) : loomSuccess;
    if (e == cudaSuccess && r == loomSuccess)
        e = launchLocalReduce(LocalReduceArgs{in, inout, count}, type, op, cudaStreamPerThread);
    if (e == cudaSuccess && r == loomSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    if (current >= 0 && current != b.device) cudaSetDevice(current);
    if (r != loomSuccess) return r;
    if (e != cudaSuccess)
        return fail(loomUnhandledCudaError, "loomReduceLocal: %zu elements on GPU %d: %s", count, b.device,
                    cudaGetErrorString(e));
    return loomSuccess;
}
