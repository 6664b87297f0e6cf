/*
 * loom's tunables, read from LOOM_* environment variables (the component maps
 * its coll_loom_* MCA parameters onto the same names).
 */
#pragma once

#include <string>
#include <vector>

#include "base/param_read.h" // paramLong, paramString, parseNameMask

namespace loom {

struct Params {
    int maxChannels;        // LOOM_MAX_NCHANNELS: CTAs (rings) per allreduce; 0: the topology decides
    double channelGBs;      // LOOM_CHANNEL_BW: GB/s one channel moves (topology's channel count)
    int ringThreads;        // LOOM_NTHREADS: threads per ring CTA
    long slotBytes;         // LOOM_SLOT_BYTES: bytes per FIFO slot
    int nslots;             // LOOM_NSLOTS: slots per channel FIFO
    long minChannelBytes;   // LOOM_MIN_CHANNEL_BYTES: fewer channels below this much data each
    double timeoutSeconds;  // LOOM_TIMEOUT: a wait silent this long fails the call (0: no bound)
    double stuckSeconds;    // LOOM_STUCK_TIMEOUT: ... this long once every rank started the call (0: never)
    double warnAfterSeconds; // LOOM_WARN_AFTER: a late rank is named at WARN after this long (0: never)
    long llMaxBytes;        // LOOM_LL_MAX_BYTES: one-shot LL allreduce up to this size (0: never)
    long oneShotMaxBytes;   // LOOM_ONESHOT_MAX_BYTES: one-shot bcast/reduce/allgather/reduce_scatter while (n-1) x piece <= this (-1: measured table)
    long llRingMaxBytes;    // LOOM_LL_RING_MAX_BYTES: ring on the LL protocol up to this size (0: never)
    long llSlotBytes;       // LOOM_LL_SLOT_BYTES: bytes of LL lines per ring FIFO slot
    long ll128RingMaxBytes; // LOOM_LL128_MAX_BYTES: the ring on LL128 (NVLink only) up to this size (0: never)
    long ll128SlotBytes;    // LOOM_LL128_SLOT_BYTES: bytes of LL128 lines per ring FIFO slot
    long treeMaxBytes;      // LOOM_TREE_MAX_BYTES: tree allreduce up to this size when ranks span hosts (0: never)
    long rdMaxBytes;        // LOOM_RD_MAX_BYTES: recursive doubling up to this size when ranks span hosts (0: never)
    int doubling;           // LOOM_DOUBLING: the doubling family for bcast/reduce/allgather/reduce_scatter
                            // up to LOOM_RD_MAX_BYTES: -1 where it takes fewer than half the ring's hops, 0 never, 1 always
    long edgeSlotBytes;     // LOOM_EDGE_SLOT_BYTES: bytes per FIFO slot (one chunk) of tree and recursive-doubling edges
    int exchangeChannels;   // LOOM_EXCHANGE_CHANNELS: most channels per pair of the all-peer exchanges
    long exchangeDirectBytes; // LOOM_EXCHANGE_DIRECT_BYTES: exchange blocks read in place from this size (0: never)
    long exchangeOneShotBytes; // LOOM_EXCHANGE_ONESHOT_BYTES: v-form pairs of blocks up to this size one-shot (0: none)
    int exchangeDirectPush;   // LOOM_EXCHANGE_DIRECT_PUSH: 0 receivers copy direct blocks, 1 senders in gathers, 2 senders
    long gatherDirectBytes;   // LOOM_GATHER_DIRECT_BYTES: gather(v) blocks read in place from this size (0: never)
    int exchangeCopyEngines;  // LOOM_EXCHANGE_COPY_ENGINES: 1 every direct pair of every exchange pushed by its sender's copy engines
    int dtFuse;               // LOOM_DT_FUSE: 1 exchanges of datatypes read and write the user's layout in place, 2 the copying side only, -1 2 for large blocks
    long dtFuseBytes;         // LOOM_DT_FUSE_BYTES: LOOM_DT_FUSE=-1 fuses the copying side from this block size
    long exchangeCopyEngineBytes; // LOOM_EXCHANGE_COPY_ENGINE_BYTES: gathers of blocks from this size pushed by the root's peers' copy engines (0: never)
    long zeroCopyMinBytes;  // LOOM_ZERO_COPY_MIN_BYTES: allreduce straight from mapped user buffers from this size
    long zeroCopyMaxBytes;  // LOOM_ZERO_COPY_MAX_BYTES: ... up to this size (0: never)
    long zeroCopyOneShotBytes; // LOOM_ZERO_COPY_ONESHOT_BYTES: zero-copy one-shot (every rank reduces all) up to this
    int zeroCopyCtas;       // LOOM_ZERO_COPY_CTAS: most CTAs of a zero-copy allreduce
    int zeroCopyBoard;      // LOOM_ZERO_COPY_BOARD: descriptions through the host's shared-memory board (1) or the PML (0)
    long zeroCopyCtaBytes;  // LOOM_ZERO_COPY_CTA_BYTES: one CTA per this many bytes a rank reduces
    long zeroCopyStagedBytes; // LOOM_ZERO_COPY_STAGED_BYTES: staged two-shot (scratch) up to this size (0: none)
    long residentIdleUs;    // LOOM_RESIDENT_IDLE_US: the resident kernel stays this long without a call (0: no resident kernel)
    long residentMaxBytes;  // LOOM_RESIDENT_MAX_BYTES: one-shot calls up to this size go to the resident kernel
    int residentCtas;       // LOOM_RESIDENT_CTAS: the resident kernel's CTAs
    int residentNonblocking; // LOOM_RESIDENT_NONBLOCKING: non-blocking calls post to the resident kernel
    int netChannels;        // LOOM_NET_NCHANNELS: channels of a communicator that spans hosts (0: auto)
    unsigned algoMask;      // LOOM_ALGO and LOOM_PROTO: the algorithms selection may choose (bit per Algo, select.h)
    int nchannels;          // LOOM_NCHANNELS: CTAs of every ring, one-shot and zero-copy call (0: the tuner decides)
    int streamBlocking;     // LOOM_STREAM_BLOCKING: 1: loom's stream is a blocking stream (core/stream/app_order.cc)
    int streamPriority;     // LOOM_STREAM_PRIORITY: 1: loom's stream at the device's greatest priority
    int maxCtas;            // LOOM_MAX_CTAS: at most this many CTAs per ring, one-shot and zero-copy call, channels per exchange pair (0: no cap)
    int fakeNodes;          // LOOM_FAKE_NODES: 1 every process a host of its own; k >= 2: k GPUs per pretend host (tests)
    int arrivalPerHost;     // LOOM_ARRIVAL_PER_HOST: arrival boards per counted host, not per OS instance (tests)
    int directMapFail;      // LOOM_DIRECT_MAP_FAIL: this rank's mappings of peers' buffers fail (tests; -1: none)
    int stuckRank;          // LOOM_STUCK_RANK: this rank's GPU stops inside call LOOM_STUCK_CALL (tests; -1: none)
    long stuckCall;         // LOOM_STUCK_CALL
};

// Parsed once per process from the parameter table (param_table.h).
const Params &params();

// How long a step of communicator creation waits for its peers (network
// connections): every rank is inside the creation together, so a peer that
// does not come stopped inside it: LOOM_TIMEOUT where set, else
// LOOM_STUCK_TIMEOUT, else (both 0) for ever (a year).
double setupWaitSeconds();

// LOOM_RINGS: ring orders separated by '/', each the ranks in ring order
// separated by commas or spaces ("0,1,2,3/0,2,1,3"). True when every ring is
// an order of the nranks ranks (each exactly once); else false, *why saying
// what is wrong.
bool parseRingOrders(const char *text, int nranks, std::vector<std::vector<int>> *orders, std::string *why);

} // namespace loom
