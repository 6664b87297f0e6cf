/*
 * The primitives every ring (and chain) collective is written against, one
 * class for all protocols: Prims<Proto, T, Op> owns a channel's two
 * connections (receive from one peer, send to another: either may be absent),
 * their step counters, the waits for data and for credit, publishing, credit
 * return and abort. Proto (ProtoSimple, ProtoLL) supplies only how a step's
 * bytes move and are flagged.
 *
 * Each op moves one step (at most one slot) for the whole CTA:
 *   send(in)                   next slot <- in
 *   recv(out)                  out <- previous slot
 *   copySend(in, out)          next slot, out <- in
 *   recvCopySend(out)          next slot, out <- previous slot
 *   recvReduceSend(in)         next slot <- op(previous slot, in)
 *   recvReduceCopy(in, out)    out <- op(previous slot, in)
 *   recvReduceCopySend(in,out) next slot, out <- op(previous slot, in)
 * and returns false once the call is aborted (a silent peer: the same answer
 * in every thread, *abortFlag set for the host). Every thread of the CTA must
 * make the same calls in the same order.
 */
#pragma once

#include "device/conn.h"
#include "device/ring_schedule.h"
#include "device/wait.h"

namespace loom {

template <typename Proto, typename T, typename Op>
class Prims {
  public:
    __device__ Prims(const ConnRecv *recv, const ConnSend *send, ConnSteps steps, int nslots, size_t slotBytes,
                     unsigned long long timeoutCycles, volatile int *abortFlag)
        : recv_(recv), send_(send), sendStep_(steps.send), recvStep_(steps.recv), nslots_(nslots),
          slotBytes_(slotBytes), timeout_(timeoutCycles), abortFlag_(abortFlag) {
        if (threadIdx.x == 0) flags().waitFailed = flags().moveFailed = false;
        __syncthreads();
    }

    __device__ bool send(const T *in, size_t len) { return step(false, in, false, true, nullptr, len); }
    __device__ bool recv(T *out, size_t len) { return step(true, nullptr, false, false, out, len); }
    __device__ bool copySend(const T *in, T *out, size_t len) { return step(false, in, false, true, out, len); }
    __device__ bool recvCopySend(T *out, size_t len) { return step(true, nullptr, false, true, out, len); }
    __device__ bool recvReduceSend(const T *in, size_t len) { return step(true, in, true, true, nullptr, len); }
    __device__ bool recvReduceCopy(const T *in, T *out, size_t len) { return step(true, in, true, false, out, len); }
    __device__ bool recvReduceCopySend(const T *in, T *out, size_t len) {
        return step(true, in, true, true, out, len);
    }

    // The op a schedule step names (out null: the step writes no output).
    __device__ bool apply(const RingStep &st, const T *in, T *out, size_t len) {
        if (!st.recv) return out ? copySend(in, out, len) : send(in, len);
        if (st.reduce) {
            if (!st.send) return recvReduceCopy(in, out, len);
            return out ? recvReduceCopySend(in, out, len) : recvReduceSend(in, len);
        }
        return st.send ? recvCopySend(out, len) : recv(out, len);
    }

    __device__ uint64_t sendStep() const { return sendStep_; }
    __device__ uint64_t recvStep() const { return recvStep_; }

  private:
    // The one step every op is: wait (thread 0), move (all threads), fence,
    // publish and return credit (thread 0). Counters are kept by every
    // thread: they pick the slots.
    __device__ bool step(bool recv, const T *in, bool reduce, bool send, T *out, size_t len) {
        // waitFailed is written by thread 0 only between the barriers where it
        // is read; moveFailed only ever goes from false to true (a failure
        // ends the call), so every thread sees the same values.
        bool &waitFailed = flags().waitFailed, &moveFailed = flags().moveFailed;
        if (threadIdx.x == 0) {
            const Waiter wait{timeout_};
            bool ok = true;
            if (recv) ok = Proto::waitData(*recv_, recvStep_, wait);
            if (ok && send) ok = wait([&] { return sendStep_ - *send_->head < (uint64_t)nslots_; });
            waitFailed = !ok;
            __threadfence(); // order the flag reads before the data reads below
        }
        __syncthreads();
        if (waitFailed) return abort();
        const void *src = recv ? recv_->slots + (recvStep_ % nslots_) * slotBytes_ : nullptr;
        void *dst = send ? send_->slots + (sendStep_ % nslots_) * slotBytes_ : nullptr;
        bool ok = Proto::template move<T, Op>(timeout_, src, in, dst, out, len, reduce, (uint32_t)(recvStep_ + 1),
                                              (uint32_t)(sendStep_ + 1), clock64());
        if (!ok) moveFailed = true;
        if (send) Proto::fenceSend();
        __syncthreads();
        if (moveFailed) return abort();
        if (threadIdx.x == 0) {
            if (send) Proto::publish(*send_, sendStep_, len * sizeof(T), nslots_);
            if (recv) *recv_->head = recvStep_ + 1;
        }
        sendStep_ += send;
        recvStep_ += recv;
        return true;
    }

    struct Shared {
        bool waitFailed, moveFailed;
    };
    __device__ static Shared &flags() {
        __shared__ Shared s;
        return s;
    }

    __device__ bool abort() {
        if (threadIdx.x == 0) *abortFlag_ = 1;
        return false;
    }

    const ConnRecv *recv_;
    const ConnSend *send_;
    uint64_t sendStep_, recvStep_;
    int nslots_;
    size_t slotBytes_;
    unsigned long long timeout_;
    volatile int *abortFlag_;
};

} // namespace loom
