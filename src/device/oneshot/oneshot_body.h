/*
 * One one-shot LL call (oneshot_schedule.h) as run by `nctas` CTAs of which
 * this is `cta`: the body of the launched one-shot kernel (oneshot_coll.cu)
 * and of the resident kernel (resident_coll.cu), which run the same lines
 * with the same flags, so ranks may take either path for the same call.
 * Each thread owns 8-byte units: it stores its units of every piece as LL
 * lines into the peers' slots, then waits for the lines it needs and writes
 * its output units. Reductions run in rank order, so every rank computes
 * bit-identical results whatever the CTA count. Token lines (pairs without
 * payload) are waited for by CTA 0. False: a peer's line did not come within
 * the timeout (the abort words name it).
 *
 * In place is safe without a grid barrier: the thread that writes output
 * unit u is the one that read input unit u (the same stride over units), and
 * an output unit never overlaps another thread's input unit.
 */
#pragma once

#include <cuda_runtime.h>

#include "device/conn.h"
#include "device/ll_line.h"
#include "device/oneshot/oneshot_schedule.h"

namespace loom {

template <typename T, typename Op>
__device__ __forceinline__ bool oneShotBody(const OneShotArgs &a, int cta, int nctas) {
    if (!callStarted(a.wait)) return true;
    const int me = a.rank, n = a.nranks;
    const size_t stride = (size_t)nctas * blockDim.x;
    const size_t first = (size_t)cta * blockDim.x + threadIdx.x;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const bool a2a = a.coll == loomCollAllToAll;
    const OneShotBlocks blocks = {a.ragged ? a.counts : nullptr, a.ragged ? a.displs : nullptr, a.bytes,
                                  a2a && a.ragged ? a.rcounts : nullptr, a2a && a.ragged ? a.rdispls : nullptr};
    // Beside the exchange kernel: its pairs of small blocks alone (read only
    // in ragged calls: the resident kernel's mailbox carries it only then).
    const size_t bound = a2a && a.ragged ? a.pairBound : 0;
    // 1. Publish: every peer's piece (at least its token line).
    size_t lines = 1;
    for (int q = 0; q < n; ++q)
        if (q != me) {
            const OneShotPiece p = oneShotPiece(a.coll, me, q, a.root, blocks);
            const size_t l = oneShotCarries(bound, p.bytes) ? oneShotLines(p) : 0;
            lines = l > lines ? l : lines;
        }
    for (size_t u = first; u < lines; u += stride) {
        for (int q = 0; q < n; ++q) {
            if (q == me) continue;
            const OneShotPiece p = oneShotPiece(a.coll, me, q, a.root, blocks);
            if (u >= oneShotLines(p) || !oneShotCarries(bound, p.bytes)) continue;
            const uint64_t v = p.bytes ? loadUnit(in + p.offset, u * 8, p.bytes) : 0;
            llStore(a.slot[q] + u, v, a.flag);
        }
    }
    WaitClock clock{waitNow(), 0, false}; // one silence clock for all of this thread's lines
    // The peer whose line did not come, for the host's report (conn.h).
    auto fail = [&](int q) {
        a.abortFlag[kAbortRecvPeer] = q + 1;
        a.abortFlag[kAbortSet] = 1;
    };
    // 2. Tokens: peers with no payload for me still pass one line (the
    // schedule's full-exchange invariant).
    if (cta == 0 && threadIdx.x < n && (int)threadIdx.x != me) {
        const int q = threadIdx.x;
        uint64_t v;
        if (oneShotIncoming(a.coll, q, me, a.root, blocks) == 0 &&
            !llWait(a.mine[q], a.flag, &v, clock, a.wait)) {
            fail(q);
            return false;
        }
    }
    // 3. Output.
    if (oneShotReduces(a.coll, me, a.root)) {
        const size_t own = oneShotPiece(a.coll, me, me, a.root, blocks).offset;
        const size_t bytes = oneShotReducedBytes(a.coll, me, blocks), units = (bytes + 7) / 8;
        for (size_t u = first; u < units; u += stride) {
            uint64_t acc = 0;
            for (int q = 0; q < n; ++q) {
                uint64_t v;
                if (q == me) {
                    v = loadUnit(in + own, u * 8, bytes);
                } else if (!llWait(a.mine[q] + u, a.flag, &v, clock, a.wait)) {
                    fail(q);
                    return false;
                }
                acc = q == 0 ? v : reduceUnit<T, Op>(acc, v);
            }
            storeUnit(out, u * 8, bytes, acc);
        }
    } else if (a.coll == loomCollAllGather || a2a) {
        // n blocks into the output: this rank's own from its input, the
        // others' from their lines. In place the own block stays where it
        // is, and (alltoall: one buffer, the same tables on both sides) the
        // thread that writes unit u of block q read unit u of piece q above.
        // Beside the exchange kernel (bound): its own block and its pairs of
        // larger blocks are the exchange kernel's.
        const OneShotPiece mine = oneShotPiece(a.coll, me, me, a.root, blocks);
        const char *own = in + mine.offset;
        for (int q = 0; q < n; ++q) {
            const size_t bytes = q == me ? mine.bytes : oneShotIncoming(a.coll, q, me, a.root, blocks);
            const size_t units = (bytes + 7) / 8;
            char *to = out + oneShotOutDispl(a.coll, blocks, q);
            if (q == me ? own == to || bound : !oneShotCarries(bound, bytes)) continue;
            for (size_t u = first; u < units; u += stride) {
                uint64_t v;
                if (q == me) {
                    v = loadUnit(own, u * 8, bytes);
                } else if (!llWait(a.mine[q] + u, a.flag, &v, clock, a.wait)) {
                    fail(q);
                    return false;
                }
                storeUnit(to, u * 8, bytes, v);
            }
        }
    } else if (a.coll == loomCollBroadcast) {
        if (me == a.root && in == out) return true;
        const size_t units = (a.bytes + 7) / 8;
        for (size_t u = first; u < units; u += stride) {
            uint64_t v;
            if (me == a.root) {
                v = loadUnit(in, u * 8, a.bytes);
            } else if (!llWait(a.mine[a.root] + u, a.flag, &v, clock, a.wait)) {
                fail(a.root);
                return false;
            }
            storeUnit(out, u * 8, a.bytes, v);
        }
    }
    // A reduce's non-root ranks write nothing: their tokens were waited above.
    return true;
}

} // namespace loom
