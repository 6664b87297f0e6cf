/*
 * Simple protocol for ring steps: the chunk is written in bulk into the
 * peer's slot, every writer fences, then one thread bumps the peer's tail.
 * Full bandwidth; a fence and a flag round trip per step.
 */
#pragma once

#include <type_traits>

#include "device/conn.h"
#include "device/reduce_ops.h"

// Vectors in flight per thread: 8 where a step only copies (forward, or
// forward and write the output), 4 where it also reads the input to reduce
// (three vectors live per slot: 8 of them spill at 128 registers). Measured
// by test/perf/move_loops (docs/performance.md, "The move loop per CTA").
#ifndef LOOM_SIMPLE_UNROLL
#define LOOM_SIMPLE_UNROLL 8
#endif
#ifndef LOOM_SIMPLE_UNROLL_REDUCE
#define LOOM_SIMPLE_UNROLL_REDUCE 4
#endif

namespace loom {

// The word of a W-byte vector move.
template <int W> struct VectorWord;
template <> struct VectorWord<16> { using type = uint4; };
template <> struct VectorWord<8> { using type = uint2; };
template <> struct VectorWord<4> { using type = unsigned int; };

struct ProtoSimple {
    static constexpr int kId = kProtoSimple;
    static constexpr bool kRawOut = true; // move<..., RawOut>: out gets the slot as received
    static constexpr bool kPlainSlots = true; // a slot holds the step's bytes as they are (Prims::stepWith)

    // op(received, input), or op(input, received) with InFirst.
    template <typename T, typename Op, bool InFirst>
    __device__ static T combine(T received, T input) {
        return InFirst ? reduce<T, Op>(input, received) : reduce<T, Op>(received, input);
    }

    // Thread 0: wait until the sender has published step `recvd`.
    template <typename Wait>
    __device__ static bool waitData(const ConnRecv &c, uint64_t recvd, Wait wait) {
        return wait([&] { return *c.tail > recvd; });
    }

    // A scalar load that bypasses L1 (slot data is written by a peer GPU).
    template <typename T>
    __device__ static T loadCg(const T *p) {
        using Bits = typename std::conditional<sizeof(T) == 1, unsigned char,
                     typename std::conditional<sizeof(T) == 2, unsigned short,
                     typename std::conditional<sizeof(T) == 4, unsigned int,
                     typename std::conditional<sizeof(T) == 8, unsigned long long, uint4>::type>::type>::type>::type;
        Bits b = __ldcg(reinterpret_cast<const Bits *>(p));
        T v;
        memcpy(&v, &b, sizeof(T));
        return v;
    }

    // Rounds of U vectors of W bytes per thread in flight, from vector v
    // (this thread's next) while a whole round fits; returns the thread's
    // next vector. Reduce: combine each with the input's vector.
    template <int W, int U, bool Reduce, typename T, typename Op, bool InFirst, bool RawOut>
    __device__ static size_t moveRounds(const T *src, const T *in, T *dst0, T *dst1, size_t nvec, size_t v) {
        using Word = typename VectorWord<W>::type;
        constexpr int V = W / sizeof(T);
        union Vec { Word u; T t[V]; };
        const int nthr = blockDim.x;
        const Word *s4 = (const Word *)src, *i4 = (const Word *)in;
        Word *d0 = (Word *)dst0, *d1 = (Word *)dst1;
        for (; v + (U - 1) * nthr < nvec; v += U * nthr) {
            Vec x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) x[u].u = s4 ? __ldcg(s4 + v + u * nthr) : i4[v + u * nthr];
            Vec raw[U]; // the slot as received (RawOut; dead otherwise)
#pragma unroll
            for (int u = 0; u < U; ++u) raw[u] = x[u];
            if constexpr (Reduce) {
                Vec y[U];
#pragma unroll
                for (int u = 0; u < U; ++u) y[u].u = i4[v + u * nthr];
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int k = 0; k < V; ++k) x[u].t[k] = combine<T, Op, InFirst>(x[u].t[k], y[u].t[k]);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (d0) d0[v + u * nthr] = x[u].u;
                if (d1) d1[v + u * nthr] = RawOut ? raw[u].u : x[u].u;
            }
        }
        return v;
    }

    // The vector moves of W bytes (16, 8 or 4): every pointer is W-aligned.
    // Whole rounds first (moveRounds), then one vector at a time. Returns
    // the elements moved (whole vectors); the caller moves the rest one by
    // one.
    template <int W, typename T, typename Op, bool InFirst, bool RawOut>
    __device__ static size_t moveVectors(const T *src, const T *in, T *dst0, T *dst1, size_t len, bool reduceIn) {
        using Word = typename VectorWord<W>::type;
        constexpr int V = W / sizeof(T);
        union Vec { Word u; T t[V]; };
        const int nthr = blockDim.x;
        const size_t nvec = len / V;
        const Word *s4 = (const Word *)src, *i4 = (const Word *)in;
        Word *d0 = (Word *)dst0, *d1 = (Word *)dst1;
        size_t v = threadIdx.x;
        // Two loops, not one with the reduction behind a runtime branch: a
        // kernel gets the registers of its hungriest loop, and 8 in flight
        // fit only where nothing is combined.
        if (reduceIn)
            v = moveRounds<W, LOOM_SIMPLE_UNROLL_REDUCE, true, T, Op, InFirst, RawOut>(src, in, dst0, dst1, nvec, v);
        else
            v = moveRounds<W, LOOM_SIMPLE_UNROLL, false, T, Op, InFirst, RawOut>(src, in, dst0, dst1, nvec, v);
        for (; v < nvec; v += nthr) {
            Vec x;
            x.u = s4 ? __ldcg(s4 + v) : i4[v];
            const Vec raw = x;
            if (reduceIn) {
                Vec y;
                y.u = i4[v];
#pragma unroll
                for (int k = 0; k < V; ++k) x.t[k] = combine<T, Op, InFirst>(x.t[k], y.t[k]);
            }
            if (d0) d0[v] = x.u;
            if (d1) d1[v] = RawOut ? raw.u : x.u;
        }
        return nvec * V;
    }

    // out/toNext[i] = recv ? (reduce ? op(slot[i], in[i]) : slot[i]) : in[i]
    // (timeout: for protocols that poll inside the move; Simple does not.)
    // InFirst: op(in[i], slot[i]) instead — for algorithms whose two ends must
    // reduce in the same order (op need not commute bitwise: min of -0, +0).
    // The widest vectors every pointer's alignment allows: user blocks at
    // ragged displacements (allgatherv, reduce_scatter with counts) may be
    // only 8- or 4-byte aligned. RawOut: out[i] = slot[i] (an exclusive
    // scan's prefix) while the next slot still gets the reduced value.
    template <typename T, typename Op, bool InFirst = false, bool RawOut = false>
    __device__ static bool move(const WaitLimit *, const void *slotIn, const T *in, void *slotOut, T *out, size_t len,
                                bool reduceIn, uint32_t, uint32_t, unsigned long long) {
        const T *src = (const T *)slotIn;
        T *dst0 = (T *)slotOut, *dst1 = out;
        const int tid = threadIdx.x, nthr = blockDim.x;
        uintptr_t bits = (uintptr_t)src | (uintptr_t)in | (uintptr_t)dst0 | (uintptr_t)dst1;
        size_t done = 0;
        if ((bits & 15) == 0) {
            done = moveVectors<16, T, Op, InFirst, RawOut>(src, in, dst0, dst1, len, reduceIn);
        } else if constexpr (sizeof(T) <= 8) {
            if ((bits & 7) == 0) {
                done = moveVectors<8, T, Op, InFirst, RawOut>(src, in, dst0, dst1, len, reduceIn);
            } else if constexpr (sizeof(T) <= 4) {
                if ((bits & 3) == 0) done = moveVectors<4, T, Op, InFirst, RawOut>(src, in, dst0, dst1, len, reduceIn);
            }
        }
        for (size_t i = done + tid; i < len; i += nthr) {
            T x = src ? loadCg(src + i) : in[i];
            const T raw = x;
            if (reduceIn) x = combine<T, Op, InFirst>(x, in[i]);
            if (dst0) dst0[i] = x;
            if (dst1) dst1[i] = RawOut ? raw : x;
        }
        return true;
    }

    // The publishing thread, after the barrier that follows the CTA's stores
    // into the peer's slot: they land before the tail moves.
    __device__ static void fenceSend() { __threadfence_system(); }

    // Thread 0: step `sent` (`bytes` long) is in the receiver's slot. A net
    // connection's proxy also needs the size, which must land before the tail.
    __device__ static void publish(const ConnSend &c, uint64_t sent, size_t bytes, int nslots) {
        if (c.sizes) {
            stepBytesOf(c.tail)[sent % nslots] = bytes;
            __threadfence_system();
        }
        *c.tail = sent + 1;
    }
};

} // namespace loom
