/*
 * LL128 protocol for ring steps over NVLink: the chunk travels as 128-byte
 * lines, each 120 data bytes (15 8-byte units) and an 8-byte flag carrying
 * the step's tag. Eight lanes of a warp store one line with one 16-byte
 * store each, in one instruction; the receiving warp loads it the same way
 * and takes the line once the flag lane sees the tag. Like LL, no fence and
 * no tail flag per step, at 120/128 of Simple's payload instead of 1/2.
 *
 * Invariant the protocol rests on (as NCCL's LL128 does): a 128-byte aligned
 * line written by one warp store instruction over NVLink becomes visible to
 * a one-instruction 128-byte load as a whole, flag and data together. That
 * holds over NVLink, not over PCIe or host memory: the host enables LL128
 * only where every ring link is an NVLink p2p connection (comm.h:
 * ll128Ready). The flag is (~tag << 32 | tag): no 8-byte word LL or Simple
 * left in the area can look like it (their areas are separate anyway).
 */
#pragma once

#include "device/conn.h"
#include "device/host_device.h"
#include "device/ll_line.h"

namespace loom {

constexpr int kLL128LineWords = 16; // 8-byte words per 128-byte line
constexpr int kLL128LineUnits = 15; // of them data; word 15 is the flag

LOOM_HD uint64_t ll128Flag(uint32_t tag) { return ((uint64_t)~tag << 32) | tag; }

__device__ __forceinline__ void ll128Store(uint64_t *p, uint64_t a, uint64_t b) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void ll128Load(const uint64_t *p, uint64_t *a, uint64_t *b) {
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}

struct ProtoLL128 {
    static constexpr int kId = kProtoLL128;
    static constexpr bool kRawOut = false; // no exclusive scan runs on LL128
    static constexpr bool kPlainSlots = false; // a slot holds flagged lines

    template <typename Wait>
    __device__ static bool waitData(const ConnRecv &, uint64_t, Wait) {
        return true; // the lines carry their own flags
    }

    // Lane `sub` (0..7) of a line's group of eight carries its units 2 sub
    // and 2 sub + 1; lane 7 carries unit 14 and the flag. A warp takes 4 x
    // kUnroll consecutive lines at a time (its loads all in flight before it
    // looks at any flag), every lane of the warp in every iteration (the
    // votes below need them all). blockDim.x: a multiple of 32. kUnroll 4
    // measured slower at mid sizes and no faster at large ones
    // (docs/performance.md, "Measurements behind the code").
    static constexpr int kUnroll = 1;

    template <typename T, typename Op>
    __device__ static bool move(const WaitLimit *limit, const void *slotIn, const T *in, void *slotOut,
                                T *out, size_t len, bool reduceIn, uint32_t recvTag, uint32_t sendTag,
                                unsigned long long start) {
        const uint64_t *src = (const uint64_t *)slotIn;
        uint64_t *dst = (uint64_t *)slotOut;
        const size_t bytes = len * sizeof(T), units = (bytes + 7) / 8;
        const size_t lines = (units + kLL128LineUnits - 1) / kLL128LineUnits;
        const char *inb = (const char *)in;
        const int lane = threadIdx.x & 31, sub = lane & 7;
        const size_t warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, span = 4 * kUnroll;
        WaitClock clock{start, 0, false};
        const uint64_t recvFlag = ll128Flag(recvTag), sendFlag = ll128Flag(sendTag);
        for (size_t first = warp * span; first < lines; first += nwarps * span) { // the same in every lane of a warp
            size_t line[kUnroll];
            uint64_t v0[kUnroll], v1[kUnroll];
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) line[k] = first + 4 * k + (lane >> 3), v0[k] = v1[k] = 0;
            if (src) {
                for (int spins = 0;; ++spins) {
                    bool ready = true;
#pragma unroll
                    for (int k = 0; k < kUnroll; ++k)
                        if (line[k] < lines)
                            ll128Load(src + line[k] * kLL128LineWords + 2 * sub, &v0[k], &v1[k]);
#pragma unroll
                    for (int k = 0; k < kUnroll; ++k) ready = ready && (line[k] >= lines || sub != 7 || v1[k] == recvFlag);
                    if (__all_sync(0xffffffffu, ready)) break; // every line of the warp whole
                    if (spins > kWaitSpins && __any_sync(0xffffffffu, !waitGoesOn(*limit, clock, spins))) return false;
                }
            } else {
#pragma unroll
                for (int k = 0; k < kUnroll; ++k)
                    if (line[k] < lines) {
                        const size_t u0 = line[k] * kLL128LineUnits + 2 * sub;
                        v0[k] = loadUnit(inb, u0 * 8, bytes);
                        if (sub != 7) v1[k] = loadUnit(inb, (u0 + 1) * 8, bytes);
                    }
            }
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) {
                if (line[k] >= lines) continue;
                const size_t u0 = line[k] * kLL128LineUnits + 2 * sub; // this lane's first unit
                if (reduceIn) {
                    v0[k] = reduceUnit<T, Op>(v0[k], loadUnit(inb, u0 * 8, bytes));
                    if (sub != 7) v1[k] = reduceUnit<T, Op>(v1[k], loadUnit(inb, (u0 + 1) * 8, bytes));
                }
                if (out) { // units past the end store nothing
                    storeUnit((char *)out, u0 * 8, bytes, v0[k]);
                    if (sub != 7) storeUnit((char *)out, (u0 + 1) * 8, bytes, v1[k]);
                }
            }
            __syncwarp(); // the eight lanes of a line store in one instruction
            if (dst) {
#pragma unroll
                for (int k = 0; k < kUnroll; ++k)
                    if (line[k] < lines)
                        ll128Store(dst + line[k] * kLL128LineWords + 2 * sub, v0[k], sub == 7 ? sendFlag : v1[k]);
            }
        }
        return true;
    }

    __device__ static void fenceSend() {}
    __device__ static void publish(const ConnSend &, uint64_t, size_t, int) {}
};

} // namespace loom
