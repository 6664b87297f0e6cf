/*
 * Zero-copy allreduce inside a host (every pair of GPUs maps the other's
 * memory): each rank maps its peers' *user* buffers (core/ipc/direct_buffers.h,
 * described per call) and reduces straight from them; no FIFO, no staging.
 * Compiled for host and device: the kernel (zerocopy_coll.cu) follows it,
 * the host sizes the launch with it, and the CPU simulator
 * (test_zerocopy_schedule.cc) runs its slices and its flag protocol.
 *
 *   two-shot  rank r owns slice r of the buffer: it reads slice r of every
 *             rank's input, reduces them in rank order and writes the result
 *             into slice r of every rank's output (reduce-scatter by reads,
 *             allgather by writes, fused: each element is loaded n times and
 *             stored n times by one thread). Every byte crosses NVLink once
 *             each way, as in a ring, with two flag round trips per call.
 *   one-shot  every rank reads the whole of every input and writes only its
 *             own output (small calls: one pass, no allgather). Not in place
 *             on any rank: a rank's output would overwrite an input its peers
 *             still read.
 *
 * Two-shot is safe in place (in == out on any rank): slice r of every buffer
 * is touched by rank r alone, and the thread that stores an element loaded
 * every rank's copy of it first.
 *
 *   staged    two-shot over each rank's scratch (in its p2p region, mapped
 *             by the peers at set-up) instead of its buffers, so no per-call
 *             host agreement (non-blocking calls, buffers CUDA IPC cannot
 *             share): CTA b first copies part b of every other slice of its
 *             input into its scratch's input area (the same offsets), then
 *             arrives; reduces its range of slice r reading the peers'
 *             scratch and its own input, storing into its output and every
 *             peer's scratch result area; after done, copies part b of every
 *             other slice from its result area into its output. Every
 *             scratch element a CTA reads was written in the same call by the
 *             same-index CTA of its owner, before that CTA's arrive (inputs)
 *             or done (results): the flags that order them. The next call's
 *             copies start after this rank's kernel ended, i.e. after every
 *             peer's done: nothing still reads them. In place: the input's
 *             other slices are read only from the scratch copies.
 *
 * Slices and CTA ranges are whole 16-byte units of the buffer (the last one
 * ragged), so a rank whose 2n pointers are 16-byte aligned moves vectors.
 *
 * Flags (one 64-bit word per (peer, CTA) in each rank's p2p region, written
 * only by that peer's CTA of the same index, monotonic over calls):
 *   arrive  CTA b posts zeroCopyArrive(call) into every peer's word [me][b]
 *           when it starts: its rank's input is ready and its output free
 *           (stream order: the kernels before it are done). Marked with
 *           kZeroCopyFailed when its host could not map a peer's buffer.
 *   data    CTA b waits for every peer's arrive of CTA b, then moves its range.
 *   done    CTA b posts zeroCopyDone(call) to every peer once its stores are
 *           visible (system fence), then waits for every peer's done of CTA b.
 * A rank's kernel ends when all its CTAs have; CTA b has seen done from every
 * peer's CTA b, so every CTA of every peer is past its data phase: nothing
 * reads this rank's input or writes its output any more, and its output is
 * whole. A word jumps from done(c) to arrive(c+1) only after its writer's
 * call c ended, which needed this rank's done(c): waiting for ">=" never
 * misses a value. The simulator checks exactly this (and that dropping a
 * wait breaks it).
 */
#ifndef LOOM_ZEROCOPY_SCHEDULE_H
#define LOOM_ZEROCOPY_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "device/host_device.h"

namespace loom {

constexpr int kMaxZeroCopyRanks = 8;   // = kMaxOneShotRanks: every pair mapped
constexpr int kMaxZeroCopyCtas = 64;
constexpr int kZeroCopyThreads = 512;
constexpr uint64_t kZeroCopyFailed = 1ull << 63; // on an arrive: the sender's host could not map a peer buffer

// Bytes of one rank's flag words (nranks x kMaxZeroCopyCtas) in its region.
LOOM_HD size_t zeroCopyFlagBytes(int nranks) { return (size_t)nranks * kMaxZeroCopyCtas * sizeof(uint64_t); }

// Flag values of call `call` (>= 1).
LOOM_HD uint64_t zeroCopyArrive(uint64_t call) { return 2 * call - 1; }
LOOM_HD uint64_t zeroCopyDone(uint64_t call) { return 2 * call; }

// Range [*lo, *hi) of `parts` equal parts (part `k`) of `units` units,
// starting at unit `first`; the last parts may be short or empty.
LOOM_HD void zeroCopyPart(size_t first, size_t units, int parts, int k, size_t *lo, size_t *hi) {
    const size_t per = (units + (size_t)parts - 1) / (size_t)parts;
    const size_t a = (size_t)k * per, b = a + per;
    *lo = first + (a < units ? a : units);
    *hi = first + (b < units ? b : units);
}

// The elements [*lo, *hi) of a call of `count` elements of `esize` bytes
// that CTA `cta` of `ctas` on rank `rank` of `nranks` reduces: in two-shot a
// part of slice `rank`, in one-shot a part of the whole buffer. Boundaries
// fall on 16-byte units (esize divides 16: every loom type's size does).
LOOM_HD void zeroCopyRange(bool oneShot, size_t count, size_t esize, int nranks, int rank, int ctas, int cta,
                           size_t *lo, size_t *hi) {
    const size_t perUnit = 16 / esize;
    const size_t units = (count + perUnit - 1) / perUnit;
    size_t sliceLo = 0, sliceHi = units;
    if (!oneShot) zeroCopyPart(0, units, nranks, rank, &sliceLo, &sliceHi);
    size_t a, b;
    zeroCopyPart(sliceLo, sliceHi - sliceLo, ctas, cta, &a, &b);
    *lo = a * perUnit < count ? a * perUnit : count;
    *hi = b * perUnit < count ? b * perUnit : count;
}

// CTAs of a call: one per `perCta` bytes of what one rank reduces (its
// slice, or everything in one-shot), within [1, cap]. Every rank derives the
// same number (the flags pair CTA b with CTA b).
LOOM_HD int zeroCopyCtas(bool oneShot, size_t bytes, int nranks, size_t perCta, int cap) {
    const size_t mine = oneShot ? bytes : (bytes + (size_t)nranks - 1) / (size_t)nranks;
    size_t c = (mine + perCta - 1) / perCta;
    if (cap > kMaxZeroCopyCtas || cap < 1) cap = kMaxZeroCopyCtas;
    if (c > (size_t)cap) c = (size_t)cap;
    return c < 1 ? 1 : (int)c;
}

} // namespace loom

#endif
