/*
 * One switch from run-time (type, op) to a kernel template instance, shared
 * by every collective: Kernel<T, Op>::launch(args, stream) is instantiated for
 * the 10 types x 4 ops and nothing is written per type.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "device/reduce_ops.h"
#include "loom.h"

namespace loom {

template <typename T, template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchOp(loomRedOp_t op, const Args &a, cudaStream_t stream) {
    switch (op) {
    case loomSum: return Kernel<T, OpSum>::launch(a, stream);
    case loomProd: return Kernel<T, OpProd>::launch(a, stream);
    case loomMin: return Kernel<T, OpMin>::launch(a, stream);
    case loomMax: return Kernel<T, OpMax>::launch(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

template <template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchTypeOp(loomDataType_t dtype, loomRedOp_t op, const Args &a, cudaStream_t stream) {
    switch (dtype) {
    case loomInt8: return dispatchOp<int8_t, Kernel>(op, a, stream);
    case loomUint8: return dispatchOp<uint8_t, Kernel>(op, a, stream);
    case loomInt32: return dispatchOp<int32_t, Kernel>(op, a, stream);
    case loomUint32: return dispatchOp<uint32_t, Kernel>(op, a, stream);
    case loomInt64: return dispatchOp<int64_t, Kernel>(op, a, stream);
    case loomUint64: return dispatchOp<uint64_t, Kernel>(op, a, stream);
    case loomFloat16: return dispatchOp<__half, Kernel>(op, a, stream);
    case loomBfloat16: return dispatchOp<__nv_bfloat16, Kernel>(op, a, stream);
    case loomFloat32: return dispatchOp<float, Kernel>(op, a, stream);
    case loomFloat64: return dispatchOp<double, Kernel>(op, a, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace loom
