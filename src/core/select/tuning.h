/*
 * The time model behind the selection table (select.cc): for a call it
 * predicts each algorithm's time as
 *
 *     t = alpha0 + alpha1 x (ranks - 1) + bytes on a rank's busiest link / bw
 *     bw = min(link bandwidth, CTAs x what one CTA moves)
 *
 * where the link bytes are 2 (n - 1) / n x the buffer for the ring and the
 * zero-copy two-shot, and 2 (n - 1) x the buffer for one-shot LL (every rank
 * writes its input to every peer as LL lines, twice its size). The CTAs are
 * the call's (below: by size, or LOOM_NCHANNELS), so forcing few of them
 * predicts the slower call and may move the choice; one-shot LL is not
 * limited by its CTAs in the model (not measured). The model predicts at the
 * count the size rules give; it does not choose the count. The constants
 * are fitted to loom alone, blocking calls, on 4x H200 (NV18) at 2, 3 and 4
 * ranks, 8 B - 1 GiB (contrib/bench/results/2026-11-27_h200x4_model_*.csv;
 * the fit's largest error: one-shot 6%, zero-copy 12%, ring 18%; a unit test
 * checks the model against those files).
 *
 * Where the model applies (allreduce, one host, every pair of GPUs mapped),
 * selection takes the fastest predicted algorithm among those whose rules
 * allow the call (sizes that fit their slots, LOOM_ALGO, the zero-copy
 * bounds); elsewhere the table's order decides, as before. The constants are
 * this machine's: on slower links (PCIe) the crossovers move, which the
 * model does not know yet. TUNING's lines predict one-shot calls that the
 * resident kernel takes kResidentSavedUs faster (below); selection does not.
 */
#pragma once

#include "core/comm/comm.h"

namespace loom {

// What the resident kernel (core/stream/resident.h) saves a one-shot call of one
// CTA (up to kResidentSavedBytes): its launch and stream synchronize
// (measured on blocking calls; non-blocking ones post there too).
// Measured both ways in one device call at 64 B - 4 KiB on 2x and 4x H200
// (docs/performance.md; contrib/bench/results/2026-11-27_h200x{2,4}_{launch,
// resident}_allreduce_np{2,4}.csv; a unit test checks the constant against
// them). Calls of several CTAs (handed over through device memory) save less
// or nothing, which the model leaves out. The one-shot constants
// below are the launched path's, and selection uses them alone: whether a
// rank's calls go to the resident kernel is its own (LOOM_RESIDENT_*), and
// every rank must choose alike. TUNING's lines say the saving.
constexpr double kResidentSavedUs = 4.3;
constexpr size_t kResidentSavedBytes = 4096;

struct CallShape; // select.h

// Predicted microseconds of `algo` (select.h's Algo) for the call, or a
// negative number where the model has no constants for it.
double predictUs(const loomComm *comm, const CallShape &s, int algo);
// The same on `channels` CTAs (what allReduceChannels gives, above).
double predictUs(const loomComm *comm, const CallShape &s, int algo, int channels);
// Whether a one-shot call of this shape goes to the resident kernel when the
// streams are idle (core/stream/resident.h), and the call's predicted time then
// (predictUs less kResidentSavedUs up to kResidentSavedBytes; otherwise predictUs).
bool residentFits(const loomComm *comm, const CallShape &s);
double predictCallUs(const loomComm *comm, const CallShape &s, int algo);

// How many CTAs (channels) a call runs. LOOM_NCHANNELS, where set, fixes the
// count for every size, capped by what the algorithm has; else by size, as
// below. Every rank derives the same count from the same call.
//   ring (either protocol): one channel per LOOM_MIN_CHANNEL_BYTES of the
//     call, up to the communicator's rings (LOOM_MAX_NCHANNELS);
//   zero-copy: one CTA per LOOM_ZERO_COPY_CTA_BYTES that a rank reduces, up
//     to LOOM_ZERO_COPY_CTAS;
//   one-shot: one CTA per kOneShotThreads 8-byte units a rank moves, up to
//     kMaxOneShotBlocks.
int ringChannels(const loomComm *comm, size_t bytes);
// LOOM_NCHANNELS's rule: `fixed` (> 0) capped by `most`, else `bySize`;
// either capped by LOOM_MAX_CTAS.
int channelsOr(int fixed, int most, int bySize);
int zeroCopyChannels(size_t bytes, int nranks, bool oneShot);
int oneShotChannels(size_t units);
// The count an allreduce of s.bytes gets on `algo` (TUNING's lines), -1
// where that algorithm's count is not set by size alone.
int allReduceChannels(const loomComm *comm, const CallShape &s, int algo);

} // namespace loom
