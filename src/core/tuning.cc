/*
 * core/tuning.h: the constants and the prediction.
 */
#include "core/tuning.h"

#include "core/select.h"
#include "device/ring_schedule.h"

namespace loom {

namespace {

struct AlgoModel {
    int algo;
    double alpha0, alpha1; // us, us per peer
    double bwGBs;          // of a rank's busiest link
    bool allToAll;         // link bytes 2 (n-1) x buffer (one-shot LL), else 2 (n-1)/n x buffer
};

// Fitted by minimising the largest relative error over the measured points
// (4x H200, NV18; see tuning.h).
constexpr AlgoModel kAllReduceModels[] = {
    {kAlgoOneShot, 15.5, 0.5, 222.0, true},
    {kAlgoZeroCopy, 17.25, 1.5, 288.0, false},
    {kAlgoRing, 18.0, 8.75, 328.0, false},
};

} // namespace

double predictUs(const loomComm *comm, const CallShape &s, int algo) {
    if (s.coll != kRingAllReduce || !comm->allPeersMapped || comm->spansHosts || comm->nranks < 2) return -1;
    const double n = comm->nranks, bytes = (double)s.bytes;
    for (const AlgoModel &m : kAllReduceModels) {
        if (m.algo != algo) continue;
        const double link = m.allToAll ? 2 * (n - 1) * bytes : 2 * (n - 1) / n * bytes;
        return m.alpha0 + m.alpha1 * (n - 1) + link / (m.bwGBs * 1e3); // GB/s = 1e3 bytes per us
    }
    return -1;
}

} // namespace loom
