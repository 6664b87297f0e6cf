#include "core/comm/params.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "base/debug.h"
#include "core/select/select.h"
#include "device/ring/ring_args.h"

namespace loom {

const Params &params() {
    static Params p;
    static std::once_flag once;
    std::call_once(once, [] {
        p.maxChannels = (int)paramLong("LOOM_MAX_NCHANNELS");
        p.channelGBs = (double)paramLong("LOOM_CHANNEL_BW") / 1000.0; // in MB/s
        p.ringThreads = (int)paramLong("LOOM_NTHREADS") / 32 * 32;
        p.slotBytes = paramLong("LOOM_SLOT_BYTES") & ~255L;
        p.nslots = (int)paramLong("LOOM_NSLOTS");
        p.minChannelBytes = paramLong("LOOM_MIN_CHANNEL_BYTES");
        p.timeoutSeconds = (double)paramLong("LOOM_TIMEOUT");
        p.stuckSeconds = (double)paramLong("LOOM_STUCK_TIMEOUT");
        p.warnAfterSeconds = (double)paramLong("LOOM_WARN_AFTER");
        p.llMaxBytes = paramLong("LOOM_LL_MAX_BYTES") & ~7L;
        p.oneShotMaxBytes = paramLong("LOOM_ONESHOT_MAX_BYTES"); // -1: the measured table (select.cc)
        // The LL ring is off by default: it loses to zero-copy and one-shot
        // LL (docs/performance.md, LOOM_LL_RING_MAX_BYTES);
        // its deadlock at ragged sizes is fixed (device/conn.h: sendCredit).
        p.llRingMaxBytes = paramLong("LOOM_LL_RING_MAX_BYTES");
        p.llSlotBytes = paramLong("LOOM_LL_SLOT_BYTES") & ~255L;
        p.ll128RingMaxBytes = paramLong("LOOM_LL128_MAX_BYTES");
        p.ll128SlotBytes = paramLong("LOOM_LL128_SLOT_BYTES") & ~4095L; // whole 128-byte lines, aligned
        p.treeMaxBytes = paramLong("LOOM_TREE_MAX_BYTES");
        // Where recursive doubling wins: docs/performance.md, LOOM_RD_MAX_BYTES.
        p.rdMaxBytes = paramLong("LOOM_RD_MAX_BYTES");
        // An edge hop costs about twice a ring hop across hosts: see
        // doublingFits in select.cc.
        p.doubling = (int)paramLong("LOOM_DOUBLING");
        p.edgeSlotBytes = paramLong("LOOM_EDGE_SLOT_BYTES") & ~255L;
        p.netChannels = (int)paramLong("LOOM_NET_NCHANNELS");
        p.exchangeChannels = (int)paramLong("LOOM_EXCHANGE_CHANNELS");
        p.exchangeDirectBytes = paramLong("LOOM_EXCHANGE_DIRECT_BYTES");
        p.exchangeOneShotBytes = paramLong("LOOM_EXCHANGE_ONESHOT_BYTES");
        p.exchangeDirectPush = (int)paramLong("LOOM_EXCHANGE_DIRECT_PUSH");
        p.gatherDirectBytes = paramLong("LOOM_GATHER_DIRECT_BYTES");
        p.exchangeCopyEngineBytes = paramLong("LOOM_EXCHANGE_COPY_ENGINE_BYTES");
        p.exchangeCopyEngines = (int)paramLong("LOOM_EXCHANGE_COPY_ENGINES");
        p.dtFuse = (int)paramLong("LOOM_DT_FUSE");
        p.dtFuseBytes = paramLong("LOOM_DT_FUSE_BYTES");
        p.zeroCopyMinBytes = paramLong("LOOM_ZERO_COPY_MIN_BYTES");
        p.zeroCopyMaxBytes = paramLong("LOOM_ZERO_COPY_MAX_BYTES");
        p.zeroCopyOneShotBytes = paramLong("LOOM_ZERO_COPY_ONESHOT_BYTES");
        p.zeroCopyCtas = (int)paramLong("LOOM_ZERO_COPY_CTAS");
        p.zeroCopyBoard = (int)paramLong("LOOM_ZERO_COPY_BOARD");
        p.zeroCopyCtaBytes = paramLong("LOOM_ZERO_COPY_CTA_BYTES");
        p.zeroCopyStagedBytes = paramLong("LOOM_ZERO_COPY_STAGED_BYTES");
        p.maxCtas = (int)paramLong("LOOM_MAX_CTAS");
        p.streamBlocking = (int)paramLong("LOOM_STREAM_BLOCKING");
        p.streamPriority = (int)paramLong("LOOM_STREAM_PRIORITY");
        p.residentIdleUs = paramLong("LOOM_RESIDENT_IDLE_US");
        p.residentMaxBytes = paramLong("LOOM_RESIDENT_MAX_BYTES");
        p.residentCtas = (int)paramLong("LOOM_RESIDENT_CTAS");
        p.residentNonblocking = (int)paramLong("LOOM_RESIDENT_NONBLOCKING");
        p.fakeNodes = (int)paramLong("LOOM_FAKE_NODES");
        p.directMapFail = (int)paramLong("LOOM_DIRECT_MAP_FAIL");
        p.stuckRank = (int)paramLong("LOOM_STUCK_RANK");
        p.stuckCall = paramLong("LOOM_STUCK_CALL");
        p.arrivalPerHost = (int)paramLong("LOOM_ARRIVAL_PER_HOST");
        const char *algo = paramString("LOOM_ALGO");
        if (!parseAlgoMask(algo, &p.algoMask)) {
            LOOM_WARN(kInit, "LOOM_ALGO=%s: not a list of oneshot, zerocopy, rd, trees, doubling, ll_ring, ll128_ring, ring (^ excludes) "
                      "that leaves one: every algorithm stays allowed", algo);
            p.algoMask = kAllAlgos;
        }
        const char *proto = paramString("LOOM_PROTO");
        unsigned protoAlgos = kAllAlgos;
        if (!parseProtoAlgos(proto, &protoAlgos))
            LOOM_WARN(kInit, "LOOM_PROTO=%s: not a list of LL, LL128, Simple (^ excludes) that leaves one: "
                      "every protocol stays allowed", proto);
        else if (!(p.algoMask & protoAlgos))
            LOOM_WARN(kInit, "LOOM_PROTO=%s leaves none of LOOM_ALGO's algorithms: LOOM_PROTO ignored", proto);
        else
            p.algoMask &= protoAlgos; // agreed at creation with LOOM_ALGO (the geometry's algorithm mask)
        p.nchannels = (int)paramLong("LOOM_NCHANNELS");
    });
    return p;
}

bool parseRingOrders(const char *text, int nranks, std::vector<std::vector<int>> *orders, std::string *why) {
    orders->clear();
    const std::string all = text ? text : "";
    for (size_t at = 0; at <= all.size() && !all.empty();) { // "a/" has an empty second ring: refused
        const size_t bar = std::min(all.find('/', at), all.size());
        std::string ring = all.substr(at, bar - at);
        at = bar + 1;
        for (char &ch : ring)
            if (ch == ',') ch = ' ';
        std::vector<int> order;
        std::vector<bool> seen((size_t)nranks, false);
        std::istringstream words(ring);
        std::string w;
        while (words >> w) {
            char *end = nullptr;
            const long r = strtol(w.c_str(), &end, 10);
            if (*end || r < 0 || r >= nranks || seen[(size_t)r]) {
                *why = "ring " + std::to_string(orders->size()) + ": '" + w + "' is " +
                       (*end ? "not a rank" : r < 0 || r >= nranks ? "not a rank below " + std::to_string(nranks)
                                                                   : "listed twice");
                return false;
            }
            seen[(size_t)r] = true;
            order.push_back((int)r);
        }
        if ((int)order.size() != nranks) {
            *why = "ring " + std::to_string(orders->size()) + " lists " + std::to_string(order.size()) + " of " +
                   std::to_string(nranks) + " ranks";
            return false;
        }
        orders->push_back(order);
    }
    if (orders->empty()) {
        *why = "no ring given";
        return false;
    }
    return true;
}

double setupWaitSeconds() {
    const Params &p = params();
    return p.timeoutSeconds > 0 ? p.timeoutSeconds : p.stuckSeconds > 0 ? p.stuckSeconds : 365 * 86400.0;
}

} // namespace loom
