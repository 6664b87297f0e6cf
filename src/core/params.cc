#include "core/params.h"

#include <mutex>

#include "core/debug.h"
#include "core/select.h"
#include "device/ring_args.h"

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
        p.llMaxBytes = paramLong("LOOM_LL_MAX_BYTES") & ~7L;
        p.oneShotMaxBytes = paramLong("LOOM_ONESHOT_MAX_BYTES"); // -1: the measured table (select.cc)
        // The LL ring is off by default: on 4x H200 it won only at 1-4 MiB and the
        // GPU matrix caught a deadlock in it (see the issue note).
        p.llRingMaxBytes = paramLong("LOOM_LL_RING_MAX_BYTES");
        p.llSlotBytes = paramLong("LOOM_LL_SLOT_BYTES") & ~255L;
        p.treeMaxBytes = paramLong("LOOM_TREE_MAX_BYTES");
        // Recursive doubling won up to 128 KiB at 2-4 ranks (trees 2x its hops,
        // rings 2(n-1)x), 4x H200 over ucx/TCP; from 256 KiB the ring won.
        p.rdMaxBytes = paramLong("LOOM_RD_MAX_BYTES");
        // An edge hop costs about twice a ring hop across fake hosts (4x H100,
        // ucx/TCP): see doublingFits in select.cc.
        p.doubling = (int)paramLong("LOOM_DOUBLING");
        p.edgeSlotBytes = paramLong("LOOM_EDGE_SLOT_BYTES") & ~255L;
        p.netChannels = (int)paramLong("LOOM_NET_NCHANNELS");
        p.fakeNodes = (int)paramLong("LOOM_FAKE_NODES");
        const char *algo = paramString("LOOM_ALGO");
        if (!parseAlgoMask(algo, &p.algoMask)) {
            LOOM_WARN(kInit, "LOOM_ALGO=%s: not a list of oneshot, rd, trees, doubling, ll_ring, ring (^ excludes) "
                      "that leaves one: every algorithm stays allowed", algo);
            p.algoMask = kAllAlgos;
        }
    });
    return p;
}

} // namespace loom
