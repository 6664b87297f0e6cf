/*
 * core/select/tuning.h: the constants and the prediction.
 */
#include "core/select/tuning.h"

#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "core/select/select.h"
#include "device/oneshot/oneshot_args.h"
#include "device/ring/ring_schedule.h"
#include "device/zerocopy/zerocopy_schedule.h"

namespace loom {

namespace {

struct AlgoModel {
    int algo;
    double alpha0, alpha1; // us, us per peer
    double bwGBs;          // of a rank's busiest link
    double channelGBs;     // what one CTA moves at most (0: not limited by its CTAs)
    bool allToAll;         // link bytes 2 (n-1) x buffer (one-shot LL), else 2 (n-1)/n x buffer
};

// Fitted by minimising the largest relative error over the measured points
// (see tuning.h); the per-CTA bandwidths from LOOM_NCHANNELS sweeps at 4
// ranks (contrib/bench/results/2026-11-27_h200x4_channels_*).
constexpr AlgoModel kAllReduceModels[] = {
    {kAlgoOneShot, 15.5, 0.5, 222.0, 0.0, true},
    {kAlgoZeroCopy, 17.25, 1.5, 288.0, 48.0, false},
    {kAlgoRing, 18.0, 8.75, 328.0, 22.0, false},
};

} // namespace

bool residentFits(const loomComm *comm, const CallShape &s) { return residentAllowed(comm, s.bytes); }

double predictCallUs(const loomComm *comm, const CallShape &s, int algo) {
    const double us = predictUs(comm, s, algo);
    return us >= 0 && algo == kAlgoOneShot && s.bytes <= kResidentSavedBytes && residentFits(comm, s)
               ? us - kResidentSavedUs
               : us;
}

double predictUs(const loomComm *comm, const CallShape &s, int algo) {
    return predictUs(comm, s, algo, allReduceChannels(comm, s, algo));
}

double predictUs(const loomComm *comm, const CallShape &s, int algo, int channels) {
    if (s.coll != loomCollAllReduce || !comm->ll.allPeersMapped || comm->spansHosts || comm->nranks < 2) return -1;
    const double n = comm->nranks, bytes = (double)s.bytes;
    for (const AlgoModel &m : kAllReduceModels) {
        if (m.algo != algo) continue;
        const double link = m.allToAll ? 2 * (n - 1) * bytes : 2 * (n - 1) / n * bytes;
        double bw = m.bwGBs;
        if (m.channelGBs > 0 && channels > 0 && channels * m.channelGBs < bw) bw = channels * m.channelGBs;
        return m.alpha0 + m.alpha1 * (n - 1) + link / (bw * 1e3); // GB/s = 1e3 bytes per us
    }
    return -1;
}

int channelsOr(int fixed, int most, int bySize) {
    const int n = fixed <= 0 ? bySize : fixed < most ? fixed : most;
    return params().maxCtas > 0 && n > params().maxCtas ? params().maxCtas : n; // LOOM_MAX_CTAS
}

int ringChannels(const loomComm *comm, size_t bytes) {
    size_t n = bytes / (size_t)params().minChannelBytes;
    if (n < 1) n = 1;
    return channelsOr(params().nchannels, comm->maxChannels, n < (size_t)comm->maxChannels ? (int)n : comm->maxChannels);
}

int zeroCopyChannels(size_t bytes, int nranks, bool oneShot) {
    return channelsOr(params().nchannels, kMaxZeroCopyCtas,
                      zeroCopyCtas(oneShot, bytes, nranks, (size_t)params().zeroCopyCtaBytes, params().zeroCopyCtas));
}

int oneShotChannels(size_t units) {
    const size_t blocks = (units + kOneShotThreads - 1) / kOneShotThreads;
    return channelsOr(params().nchannels, kMaxOneShotBlocks,
                      blocks < 1 ? 1 : blocks < (size_t)kMaxOneShotBlocks ? (int)blocks : kMaxOneShotBlocks);
}

int allReduceChannels(const loomComm *comm, const CallShape &s, int algo) {
    if (s.coll != loomCollAllReduce) return -1;
    const AlgoEntry *e = algoEntry(algo); // each entry knows its own (core/algo/registry.h)
    return e && e->channels ? e->channels(comm, s) : -1;
}

} // namespace loom
