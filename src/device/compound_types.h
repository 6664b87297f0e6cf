/*
 * Element types made of two fields, as MPI lays them out in C: complex
 * numbers ({re, im}; MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX) and
 * value-index pairs ({value; int index}; MPI_FLOAT_INT, MPI_DOUBLE_INT,
 * MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT) with MINLOC/MAXLOC. Sizes and
 * alignments are the C structs' (padding included), so a buffer of n of them
 * is n x sizeof bytes as the application holds it.
 */
#pragma once

#include <stdint.h>

namespace loom {

template <typename R> struct Complex {
    R re, im;
};
template <typename R> __device__ __forceinline__ Complex<R> operator+(Complex<R> a, Complex<R> b) {
    return {a.re + b.re, a.im + b.im};
}
template <typename R> __device__ __forceinline__ Complex<R> operator*(Complex<R> a, Complex<R> b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

template <typename V> struct ValIdx {
    V value;
    int index;
};

// MPI: the smaller (larger) value; on equal values, the smaller index.
struct OpMinloc {
    template <typename P> __device__ P operator()(P a, P b) const {
        return (b.value < a.value || (b.value == a.value && b.index < a.index)) ? b : a;
    }
};
struct OpMaxloc {
    template <typename P> __device__ P operator()(P a, P b) const {
        return (a.value < b.value || (b.value == a.value && b.index < a.index)) ? b : a;
    }
};

static_assert(sizeof(Complex<float>) == 8 && sizeof(Complex<double>) == 16, "complex layout");
static_assert(sizeof(ValIdx<float>) == 8 && sizeof(ValIdx<double>) == 16 && sizeof(ValIdx<long>) == 16 &&
                  sizeof(ValIdx<int>) == 8 && sizeof(ValIdx<short>) == 8,
              "value-index layout (MPI's C structs)");

} // namespace loom
