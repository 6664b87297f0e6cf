/*
 * One switch from run-time (type, op) to a kernel template instance, shared
 * by every reduction kernel: Kernel<T, Op>::launch(args, stream). Integer ops
 * other than min/max give the same bits for signed and unsigned operands
 * (two's complement wraps alike; bitwise and logical ops ignore the sign), so
 * they run on the unsigned type and only min/max are compiled for signed
 * types: 4 x 10 + 4 x 2 integer instances, 4 x 4 floating ones.
 * Combinations loom refuses (bitwise or logical ops on floating types) give
 * cudaErrorInvalidValue; the host checks with loomOpSupported first.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "device/compound_types.h"
#include "device/reduce_ops.h"
#include "loom.h"

namespace loom {

template <typename T, template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchOp(loomRedOp_t op, const Args &a, cudaStream_t stream) {
    if constexpr (std::is_integral<T>::value) {
        using U = typename std::make_unsigned<T>::type;
        switch (op) {
        case loomMin: return Kernel<T, OpMin>::launch(a, stream);
        case loomMax: return Kernel<T, OpMax>::launch(a, stream);
        case loomSum: return Kernel<U, OpSum>::launch(a, stream);
        case loomProd: return Kernel<U, OpProd>::launch(a, stream);
        case loomBand: return Kernel<U, OpBand>::launch(a, stream);
        case loomBor: return Kernel<U, OpBor>::launch(a, stream);
        case loomBxor: return Kernel<U, OpBxor>::launch(a, stream);
        case loomLand: return Kernel<U, OpLand>::launch(a, stream);
        case loomLor: return Kernel<U, OpLor>::launch(a, stream);
        case loomLxor: return Kernel<U, OpLxor>::launch(a, stream);
        default: return cudaErrorInvalidValue;
        }
    } else {
        switch (op) {
        case loomSum: return Kernel<T, OpSum>::launch(a, stream);
        case loomProd: return Kernel<T, OpProd>::launch(a, stream);
        case loomMin: return Kernel<T, OpMin>::launch(a, stream);
        case loomMax: return Kernel<T, OpMax>::launch(a, stream);
        default: return cudaErrorInvalidValue;
        }
    }
}

// Complex numbers: sum and product.
template <typename T, template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchComplexOp(loomRedOp_t op, const Args &a, cudaStream_t stream) {
    switch (op) {
    case loomSum: return Kernel<T, OpSum>::launch(a, stream);
    case loomProd: return Kernel<T, OpProd>::launch(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

// Value-index pairs: minloc and maxloc.
template <typename T, template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchLocOp(loomRedOp_t op, const Args &a, cudaStream_t stream) {
    switch (op) {
    case loomMinloc: return Kernel<T, OpMinloc>::launch(a, stream);
    case loomMaxloc: return Kernel<T, OpMaxloc>::launch(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

template <template <typename, typename> class Kernel, typename Args>
cudaError_t dispatchTypeOp(loomDataType_t dtype, loomRedOp_t op, const Args &a, cudaStream_t stream) {
    switch (dtype) {
    case loomInt8: return dispatchOp<int8_t, Kernel>(op, a, stream);
    case loomUint8: return dispatchOp<uint8_t, Kernel>(op, a, stream);
    case loomInt16: return dispatchOp<int16_t, Kernel>(op, a, stream);
    case loomUint16: return dispatchOp<uint16_t, Kernel>(op, a, stream);
    case loomInt32: return dispatchOp<int32_t, Kernel>(op, a, stream);
    case loomUint32: return dispatchOp<uint32_t, Kernel>(op, a, stream);
    case loomInt64: return dispatchOp<int64_t, Kernel>(op, a, stream);
    case loomUint64: return dispatchOp<uint64_t, Kernel>(op, a, stream);
    case loomFloat16: return dispatchOp<__half, Kernel>(op, a, stream);
    case loomBfloat16: return dispatchOp<__nv_bfloat16, Kernel>(op, a, stream);
    case loomFloat32: return dispatchOp<float, Kernel>(op, a, stream);
    case loomFloat64: return dispatchOp<double, Kernel>(op, a, stream);
    case loomFloatComplex: return dispatchComplexOp<Complex<float>, Kernel>(op, a, stream);
    case loomDoubleComplex: return dispatchComplexOp<Complex<double>, Kernel>(op, a, stream);
    case loomFloatInt: return dispatchLocOp<ValIdx<float>, Kernel>(op, a, stream);
    case loomDoubleInt: return dispatchLocOp<ValIdx<double>, Kernel>(op, a, stream);
    case loomLongInt: return dispatchLocOp<ValIdx<long>, Kernel>(op, a, stream);
    case loomIntInt: return dispatchLocOp<ValIdx<int>, Kernel>(op, a, stream);
    case loomShortInt: return dispatchLocOp<ValIdx<short>, Kernel>(op, a, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace loom
