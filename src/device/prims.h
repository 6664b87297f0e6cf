/*
 * The primitives every collective over connections is written against, one
 * class for all protocols: Prims<Proto, T, Op, N> owns N connection pairs
 * (receive side and send side: a ring channel's from the previous and to the
 * next rank, or a rank's edges to tree parents, children and doubling
 * partners; either side may be absent), their send and receive step
 * counters, the waits for data and for credit, publishing, credit return and
 * abort. Proto (ProtoSimple, ProtoLL, ProtoLL128) supplies only how a step's bytes move
 * and are flagged.
 *
 * Each op moves one step (at most one slot) for the whole CTA; `from` and
 * `to` pick the pair received from and sent on:
 *   send(in)                   next slot of to <- in
 *   recv(out)                  out <- slot of from
 *   copySend(in, out)          next slot, out <- in
 *   recvCopySend(out)          next slot, out <- slot
 *   recvReduceSend(in)         next slot <- op(slot, in)
 *   recvReduceCopy(in, out)    out <- op(slot, in)
 *   recvReduceCopySend(in,out) next slot, out <- op(slot, in)
 * (a tree's interior node receives a child's chunk, reduces it and sends it
 * up in one step). run(EdgeOp) is the op a schedule step names. Every op
 * returns false once the call is aborted (a silent peer: the same answer in
 * every thread, *abortFlag set for the host). Every thread of the CTA must
 * make the same calls in the same order.
 */
#pragma once

#include "device/conn.h"
#include "device/edges/edge_op.h"
#include "device/wait.h"

namespace loom {

template <typename Proto, typename T, typename Op, int N = 1>
class Prims {
  public:
    // conns, steps: N entries (device or kernel-parameter memory).
    __device__ Prims(const ConnPair *conns, const ConnSteps *steps, int nslots, size_t slotBytes,
                     const WaitLimit &limit, volatile int *abortFlag)
        : conns_(conns), nslots_(nslots), slotBytes_(slotBytes), limit_(limit), abortFlag_(abortFlag) {
        for (int k = 0; k < N; ++k) sendStep_[k] = steps[k].send, recvStep_[k] = steps[k].recv;
        if (threadIdx.x == 0) flags().waitFailed = flags().moveFailed = false;
        __syncthreads();
    }

    __device__ bool send(const T *in, size_t len, int to = 0) { return step(-1, in, false, to, nullptr, len); }
    __device__ bool recv(T *out, size_t len, int from = 0) { return step(from, nullptr, false, -1, out, len); }
    __device__ bool copySend(const T *in, T *out, size_t len, int to = 0) { return step(-1, in, false, to, out, len); }
    __device__ bool recvCopySend(T *out, size_t len, int from = 0, int to = 0) {
        return step(from, nullptr, false, to, out, len);
    }
    __device__ bool recvReduceSend(const T *in, size_t len, int from = 0, int to = 0) {
        return step(from, in, true, to, nullptr, len);
    }
    __device__ bool recvReduceCopy(const T *in, T *out, size_t len, int from = 0) {
        return step(from, in, true, -1, out, len);
    }
    __device__ bool recvReduceCopySend(const T *in, T *out, size_t len, int from = 0, int to = 0) {
        return step(from, in, true, to, out, len);
    }

    // The step a schedule names (edge_op.h), over the call's buffers. A copy
    // onto itself (in place) writes nothing.
    __device__ bool run(const EdgeOp &o, const T *in, T *out, T *acc) {
        const T *src = bufferAt(o.src, in, out, acc, o.srcAt);
        T *dst = bufferAt(o.dst, in, out, acc, o.dstAt);
        if (o.recv < 0 && dst == src) dst = nullptr;
        if (o.recv < 0 && o.send < 0) { // a local copy
            if (dst) Proto::template move<T, Op>(0, nullptr, src, nullptr, dst, o.len, false, 0, 0, 0);
            __syncthreads();
            return true;
        }
        return step(o.recv, o.reduce || o.recv < 0 ? src : nullptr, o.reduce, o.send, dst, o.len, o.inFirst,
                    o.rawDst);
    }

    // One step of pair 0 whose bytes the caller moves: move(slot) gets the
    // slot received from (from >= 0) or sent on (to >= 0; one of the two),
    // called by every thread, returning nothing (a datatype view's copy of a
    // chunk in or out of the user's layout, exchange_coll.cu). Simple only:
    // the slot holds plain bytes, published as len bytes.
    template <typename Move> __device__ bool stepWith(bool recvSide, size_t len, Move move) {
        static_assert(Proto::kPlainSlots, "stepWith moves plain bytes: Simple's slots");
        const int from = recvSide ? 0 : -1, to = recvSide ? -1 : 0;
        if (!waitStep(from, to)) return abort();
        const uint64_t st = recvSide ? recvStep_[0] : sendStep_[0];
        const ConnRecv *rc = recvSide ? &conns_[0].recv : nullptr;
        const ConnSend *sc = recvSide ? nullptr : &conns_[0].send;
        move(recvSide ? rc->slots + (st % nslots_) * slotBytes_ : sc->slots + (st % nslots_) * slotBytes_);
        __syncthreads();
        endStep(from, to, len);
        return true;
    }

  private:
    // Thread 0 waits for from's data and to's credit; false (every thread)
    // when the wait gave up.
    __device__ bool waitStep(int from, int to) {
        bool &waitFailed = flags().waitFailed;
        if (threadIdx.x == 0) {
            const Waiter wait{limit_};
            bool ok = true;
            if (from >= 0) ok = Proto::waitData(conns_[from].recv, recvStep_[from], wait);
            if (ok && to >= 0) ok = wait([&] { return sendCredit(sendStep_[to], *conns_[to].send.head, nslots_); });
            waitFailed = !ok;
            __threadfence(); // order the flag reads before the data reads that follow
        }
        __syncthreads();
        return !waitFailed;
    }

    // After the step's barrier: publish to `to`, return from's credit, count.
    __device__ void endStep(int from, int to, size_t len) {
        if (threadIdx.x == 0) {
            // One fence for the CTA's stores: the barrier orders them before
            // this thread's, and a system-scope fence is cumulative (what its
            // thread has observed, through the barrier, lands before the
            // tail). Every thread fencing is not needed, and costs
            // microseconds a call on the resident kernel (docs/performance.md).
            if (to >= 0) Proto::fenceSend();
            if (to >= 0) Proto::publish(conns_[to].send, sendStep_[to], len * sizeof(T), nslots_);
            if (from >= 0) *conns_[from].recv.head = recvStep_[from] + 1;
        }
        if (to >= 0) ++sendStep_[to];
        if (from >= 0) ++recvStep_[from];
    }

    __device__ static T *bufferAt(int buf, const T *in, T *out, T *acc, size_t at) {
        switch (buf) {
        case kBufIn: return const_cast<T *>(in) + at;
        case kBufOut: return out + at;
        case kBufAcc: return acc + at;
        default: return nullptr;
        }
    }

    // The one step every op is: wait (thread 0), move (all threads), fence,
    // publish and return credit (thread 0). Counters are kept by every
    // thread: they pick the slots. from/to: -1 for none.
    // rawDst: out gets the slot as received, `to` the reduced value (Simple).
    __device__ bool step(int from, const T *in, bool reduce, int to, T *out, size_t len, bool inFirst = false,
                         bool rawDst = false) {
        // waitFailed is written by thread 0 only between the barriers where it
        // is read; moveFailed only ever goes from false to true (a failure
        // ends the call), so every thread sees the same values.
        bool &moveFailed = flags().moveFailed;
        const ConnRecv *rc = from >= 0 ? &conns_[from].recv : nullptr;
        const ConnSend *sc = to >= 0 ? &conns_[to].send : nullptr;
        const uint64_t rstep = from >= 0 ? recvStep_[from] : 0, sstep = to >= 0 ? sendStep_[to] : 0;
        if (!waitStep(from, to)) return abort();
        const void *src = rc ? rc->slots + (rstep % nslots_) * slotBytes_ : nullptr;
        void *dst = sc ? sc->slots + (sstep % nslots_) * slotBytes_ : nullptr;
        bool ok;
        if (rawDst) { // an exclusive scan's interior rank
            if constexpr (Proto::kRawOut)
                ok = Proto::template move<T, Op, false, true>(&limit_, src, in, dst, out, len, reduce, 0, 0, 0);
            else
                ok = false; // no schedule asks it of this protocol
        } else if constexpr (N > 1) { // only edge schedules reduce in the sender's order
            ok = inFirst ? Proto::template move<T, Op, true>(&limit_, src, in, dst, out, len, reduce, 0, 0, 0)
                         : Proto::template move<T, Op>(&limit_, src, in, dst, out, len, reduce, 0, 0, 0);
        } else {
            ok = Proto::template move<T, Op>(&limit_, src, in, dst, out, len, reduce, (uint32_t)(rstep + 1),
                                             (uint32_t)(sstep + 1), clock64());
        }
        if (!ok) moveFailed = true;
        __syncthreads();
        if (moveFailed) return abort();
        endStep(from, to, len);
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

    const ConnPair *conns_;
    uint64_t sendStep_[N], recvStep_[N];
    int nslots_;
    size_t slotBytes_;
    WaitLimit limit_;
    volatile int *abortFlag_;
};

} // namespace loom
