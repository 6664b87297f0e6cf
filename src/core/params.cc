#include "core/params.h"

#include <cstdlib>
#include <mutex>

#include "core/debug.h"
#include "device/ring_args.h"

namespace loom {

long envLong(const char *name, long def, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end = nullptr;
    long v = strtol(s, &end, 0);
    if (*end != '\0') {
        LOOM_WARN(kInit, "%s=%s is not a number; using %ld", name, s, def);
        return def;
    }
    if (v < lo || v > hi) {
        long c = v < lo ? lo : hi;
        LOOM_WARN(kInit, "%s=%ld is outside [%ld, %ld]; using %ld", name, v, lo, hi, c);
        return c;
    }
    return v;
}

const Params &params() {
    static Params p;
    static std::once_flag once;
    std::call_once(once, [] {
        p.maxChannels = (int)envLong("LOOM_MAX_NCHANNELS", 0, 0, kMaxChannels);
        p.channelGBs = (double)envLong("LOOM_CHANNEL_BW", 7500, 100, 1000000) / 1000.0; // in MB/s
        p.ringThreads = (int)envLong("LOOM_NTHREADS", 512, 64, kMaxRingThreads) / 32 * 32;
        p.slotBytes = envLong("LOOM_SLOT_BYTES", 512 * 1024, 4096, 64L << 20) & ~255L;
        p.nslots = (int)envLong("LOOM_NSLOTS", 4, 2, 64);
        p.minChannelBytes = envLong("LOOM_MIN_CHANNEL_BYTES", 64 * 1024, 256, 1L << 30);
        p.timeoutSeconds = (double)envLong("LOOM_TIMEOUT", 60, 1, 86400);
        p.llMaxBytes = envLong("LOOM_LL_MAX_BYTES", 1024 * 1024, 0, 16L << 20) & ~7L;
        p.oneShotMaxBytes = envLong("LOOM_ONESHOT_MAX_BYTES", -1, -1, 1L << 40); // -1: the measured table (enqueue.cc)
        // The LL ring is off by default: on 4x H200 it won only at 1-4 MiB and the
        // GPU matrix caught a deadlock in it (see the issue note).
        p.llRingMaxBytes = envLong("LOOM_LL_RING_MAX_BYTES", 0, 0, 1L << 30);
        p.llSlotBytes = envLong("LOOM_LL_SLOT_BYTES", 64 * 1024, 4096, 16L << 20) & ~255L;
        p.treeMaxBytes = envLong("LOOM_TREE_MAX_BYTES", 64 * 1024, 0, 1L << 40);
        // Recursive doubling won up to 128 KiB at 2-4 ranks (trees 2x its hops,
        // rings 2(n-1)x), 4x H200 over ucx/TCP; from 256 KiB the ring won.
        p.rdMaxBytes = envLong("LOOM_RD_MAX_BYTES", 128 * 1024, 0, 1L << 40);
        // An edge hop costs about twice a ring hop across fake hosts (4x H100,
        // ucx/TCP): see useDoubling in enqueue.cc.
        p.doubling = (int)envLong("LOOM_DOUBLING", -1, -1, 1);
        p.edgeSlotBytes = envLong("LOOM_EDGE_SLOT_BYTES", 128 * 1024, 4096, 64L << 20) & ~255L;
        p.netChannels = (int)envLong("LOOM_NET_NCHANNELS", 0, 0, kMaxNetChannels);
        p.fakeNodes = (int)envLong("LOOM_FAKE_NODES", 0, 0, 1024);
    });
    return p;
}

} // namespace loom
