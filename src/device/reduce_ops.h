/*
 * Reduction functors: one per op, templated on the element type. fp16 and
 * bf16 compute in float. Used by every collective kernel; no per-type copies.
 * The logical ops give 1 or 0, as in C (and MPI_LAND etc.).
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace loom {

template <typename T> struct Arith {
    using C = T; // type the arithmetic is done in
    __device__ static C in(T v) { return v; }
    __device__ static T out(C v) { return v; }
};
template <> struct Arith<__half> {
    using C = float;
    __device__ static float in(__half v) { return __half2float(v); }
    __device__ static __half out(float v) { return __float2half_rn(v); }
};
template <> struct Arith<__nv_bfloat16> {
    using C = float;
    __device__ static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

struct OpSum { template <typename C> __device__ C operator()(C a, C b) const { return a + b; } };
struct OpProd { template <typename C> __device__ C operator()(C a, C b) const { return a * b; } };
struct OpMin { template <typename C> __device__ C operator()(C a, C b) const { return b < a ? b : a; } };
struct OpMax { template <typename C> __device__ C operator()(C a, C b) const { return a < b ? b : a; } };
// Integer types only (the host refuses the others).
struct OpBand { template <typename C> __device__ C operator()(C a, C b) const { return a & b; } };
struct OpBor { template <typename C> __device__ C operator()(C a, C b) const { return a | b; } };
struct OpBxor { template <typename C> __device__ C operator()(C a, C b) const { return a ^ b; } };
struct OpLand { template <typename C> __device__ C operator()(C a, C b) const { return (a && b) ? 1 : 0; } };
struct OpLor { template <typename C> __device__ C operator()(C a, C b) const { return (a || b) ? 1 : 0; } };
struct OpLxor { template <typename C> __device__ C operator()(C a, C b) const { return (!a != !b) ? 1 : 0; } };

template <typename T, typename Op> __device__ __forceinline__ T reduce(T a, T b) {
    using A = Arith<T>;
    return A::out(Op()(A::in(a), A::in(b)));
}

} // namespace loom
