/*
 * LL protocol for ring steps: the chunk travels as LL lines (8 data bytes and
 * the step's tag twice in 16 bytes), so a receiver polls the data itself: no
 * fence and no tail flag per step. Half the bandwidth of Simple, a fraction
 * of its per-step latency: for mid-size messages.
 */
#pragma once

#include "device/ll_line.h"
#include "device/conn.h"

namespace loom {

struct ProtoLL {
    static constexpr int kId = kProtoLL;
    static constexpr bool kRawOut = false; // no exclusive scan runs on LL
    static constexpr bool kPlainSlots = false; // a slot holds flagged lines

    template <typename Wait>
    __device__ static bool waitData(const ConnRecv &, uint64_t, Wait) {
        return true; // the lines carry their own flags
    }

    // Per 8-byte unit: take it from the slot's lines (tag recvTag) or the
    // input, reduce with the input, store as lines with sendTag and/or to out.
    template <typename T, typename Op>
    __device__ static bool move(const WaitLimit *limit, const void *slotIn, const T *in, void *slotOut, T *out, size_t len,
                                bool reduceIn, uint32_t recvTag, uint32_t sendTag, unsigned long long start) {
        const LLLine *src = (const LLLine *)slotIn;
        LLLine *dst = (LLLine *)slotOut;
        const size_t bytes = len * sizeof(T), units = (bytes + 7) / 8;
        const char *inb = (const char *)in;
        WaitClock clock{start, 0, false};
        for (size_t u = threadIdx.x; u < units; u += blockDim.x) {
            uint64_t v;
            if (src) {
                if (!llWait(src + u, recvTag, &v, clock, *limit)) return false;
            } else {
                v = loadUnit(inb, u * 8, bytes);
            }
            if (reduceIn) v = reduceUnit<T, Op>(v, loadUnit(inb, u * 8, bytes));
            if (dst) llStore(dst + u, v, sendTag);
            if (out) storeUnit((char *)out, u * 8, bytes, v);
        }
        return true;
    }

    __device__ static void fenceSend() {}
    __device__ static void publish(const ConnSend &, uint64_t, size_t, int) {}
};

} // namespace loom
