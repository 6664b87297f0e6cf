/*
 * The LL protocol's unit: a 16-byte line {data0, flag, data1, flag}. A
 * 16-byte aligned store lands whole, so a reader that sees both flags equal
 * to the expected tag holds the 8 data bytes: no fence, no separate flag.
 * Payload is handled in 8-byte units, zero-padded past the end of a buffer.
 */
#pragma once

#include <stdint.h>

#include "device/oneshot/oneshot_args.h"
#include "device/reduce_ops.h"

namespace loom {

__device__ __forceinline__ void llStore(LLLine *p, uint64_t v, uint32_t tag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"((uint32_t)v), "r"(tag),
                 "r"((uint32_t)(v >> 32)), "r"(tag)
                 : "memory");
}

// The line as it is now: its 8 data bytes, and its two flags.
__device__ __forceinline__ uint64_t llLoadAny(const LLLine *p, uint32_t *f0, uint32_t *f1) {
    uint32_t a, b;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(*f0), "=r"(b), "=r"(*f1)
                 : "l"(p)
                 : "memory");
    return (uint64_t)a | ((uint64_t)b << 32);
}

// True (and *v set) when the line carries `tag`.
__device__ __forceinline__ bool llLoad(const LLLine *p, uint32_t tag, uint64_t *v) {
    uint32_t f0, f1;
    *v = llLoadAny(p, &f0, &f1);
    return f0 == tag && f1 == tag;
}

// Polls until the line carries `tag`; false once the wait must give up
// (device/wait.h; silence counted from clock.start, shared by a thread's lines).
__device__ __forceinline__ bool llWait(const LLLine *p, uint32_t tag, uint64_t *v, WaitClock &clock,
                                       const WaitLimit &limit) {
    int spins = 0;
    while (!llLoad(p, tag, v))
        if (++spins > kWaitSpins && !waitGoesOn(limit, clock, spins)) return false;
    return true;
}

// 8 bytes of buf starting at byte `at`, zero-padded past `bytes`.
__device__ __forceinline__ uint64_t loadUnit(const char *buf, size_t at, size_t bytes) {
    if (at + 8 <= bytes && ((uintptr_t)(buf + at) & 7) == 0) return *(const uint64_t *)(buf + at);
    uint64_t v = 0;
    for (int k = 0; k < 8 && at + k < bytes; ++k) v |= (uint64_t)(unsigned char)buf[at + k] << (8 * k);
    return v;
}

__device__ __forceinline__ void storeUnit(char *buf, size_t at, size_t bytes, uint64_t v) {
    if (at + 8 <= bytes && ((uintptr_t)(buf + at) & 7) == 0) {
        *(uint64_t *)(buf + at) = v;
        return;
    }
    for (int k = 0; k < 8 && at + k < bytes; ++k) buf[at + k] = (char)(v >> (8 * k));
}

// Reduces the elements of two 8-byte units. Elements wider than 8 bytes
// (complex double, double-int pairs) would straddle two units: the host never
// sends them through LL (enqueue.cc), and the instance traps if it ever did.
template <typename T, typename Op>
__device__ __forceinline__ uint64_t reduceUnit(uint64_t a, uint64_t b) {
    if constexpr (sizeof(T) > 8) {
        __trap();
        return a;
    } else {
        constexpr int E = 8 / sizeof(T);
        union U { uint64_t u; T t[E]; } x, y;
        x.u = a;
        y.u = b;
#pragma unroll
        for (int k = 0; k < E; ++k) x.t[k] = reduce<T, Op>(x.t[k], y.t[k]);
        return x.u;
    }
}

} // namespace loom
