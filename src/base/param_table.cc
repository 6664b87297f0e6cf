/*
 * The table of every tunable (param_table.h) and the one way core code reads
 * them (params.h: paramLong, paramString). Integers: the environment's value,
 * else the default; a value that is not a number or lies outside the range
 * gets one warning per variable and the default.
 */
#include "base/param_table.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <strings.h>

#include "base/debug.h"
#include "base/fnv1a.h"
#include "base/limits.h"
#include "base/param_read.h"

namespace {

constexpr long KiB = 1024, MiB = 1024 * 1024;

const loomParamDef kParams[] = {
    // logging
    {"debug", "LOOM_DEBUG", LOOM_PARAM_STRING, 0, 0, 0, "WARN",
     "Log level of loom's core: WARN, INFO (each communicator's rings and GPU memory) or TRACE (every call)", 0},
    {"debug_subsys", "LOOM_DEBUG_SUBSYS", LOOM_PARAM_STRING, 0, 0, 0, "all",
     "Subsystems to log, comma-separated: INIT, TOPO, GRAPH, NET, PROXY, COLL, TUNING (or TUNE) (^X excludes)", 0},
    // rings
    {"max_nchannels", "LOOM_MAX_NCHANNELS", LOOM_PARAM_INT, 0, 0, loom::kMaxChannels, "from topology",
     "Ring channels (one CTA each) for large messages (0: the topology decides; 64 on NVLink 4 x18)", 0},
    {"channel_bw", "LOOM_CHANNEL_BW", LOOM_PARAM_INT, 7500, 100, 1000000, "7500",
     "MB/s one channel moves; the topology's channel count is ring bandwidth / this", 0},
    {"nthreads", "LOOM_NTHREADS", LOOM_PARAM_INT, 512, 64, loom::kMaxRingThreads, "512",
     "Threads per ring CTA (a multiple of 32)", 0},
    {"slot_bytes", "LOOM_SLOT_BYTES", LOOM_PARAM_INT, 512 * KiB, 4096, 64 * MiB, "512 KiB",
     "FIFO slot size per channel (GPU memory: channels x slots x size)", 1},
    {"nslots", "LOOM_NSLOTS", LOOM_PARAM_INT, 4, 2, loom::kMaxSlots, "4", "FIFO depth (slots) per channel", 1},
    {"min_channel_bytes", "LOOM_MIN_CHANNEL_BYTES", LOOM_PARAM_INT, 64 * KiB, 256, 1L << 30, "64 KiB",
     "Smaller messages use fewer channels: one per this many bytes", 1},
    {"rings", "LOOM_RINGS", LOOM_PARAM_STRING, 0, 0, 0, "from topology",
     "Ring orders instead of the topology's, / between rings (0,1,2,3/0,3,2,1); channel c runs on ring c % rings; "
     "applies to communicators of as many ranks as each ring lists; set it alike on every rank", 1},
    // waiting (device/wait.h, core/ras/watchdog.h)
    {"timeout", "LOOM_TIMEOUT", LOOM_PARAM_INT, 0, 0, 86400, "0 (none)",
     "Seconds any wait may last, for a late rank too, before the call fails with an error naming who did not "
     "arrive (0: no bound: a late rank is waited for, as MPI does)", 0},
    {"stuck_timeout", "LOOM_STUCK_TIMEOUT", LOOM_PARAM_INT, 300, 0, 86400, "300",
     "Seconds a wait may stay silent once every rank has started the call on its GPU (a peer stopped moving "
     "inside it) before the call fails naming it (0: never)", 0},
    {"warn_after", "LOOM_WARN_AFTER", LOOM_PARAM_INT, 60, 0, 86400, "60",
     "Seconds a call waits for a late rank before loom says once, at WARN, who has not arrived (0: never); it "
     "keeps waiting", 0},
    // one-shot and LL
    {"ll_max_bytes", "LOOM_LL_MAX_BYTES", LOOM_PARAM_INT, 1 * MiB, 0, 16 * MiB, "1 MiB",
     "One-shot LL allreduce up to this size, and the largest piece any one-shot collective sends a peer (0: no "
     "one-shot)", 1},
    {"zero_copy_min_bytes", "LOOM_ZERO_COPY_MIN_BYTES", LOOM_PARAM_INT, 0, 0, 1L << 40, "0",
     "Allreduce inside a host (every pair of GPUs mapped) straight from the ranks' own buffers, mapped with CUDA "
     "IPC, allowed from this size; within the bounds the time model picks it where it predicts it fastest; "
     "buffers that cannot be shared take the FIFO path; set it alike on every rank", 1},
    {"zero_copy_max_bytes", "LOOM_ZERO_COPY_MAX_BYTES", LOOM_PARAM_INT, 1L << 40, 0, 1L << 40, "no limit",
     "The zero-copy allreduce allowed up to this size (the time model hands larger calls to the ring); 0: "
     "never; set it alike on every rank", 1},
    {"zero_copy_oneshot_bytes", "LOOM_ZERO_COPY_ONESHOT_BYTES", LOOM_PARAM_INT, 0, 0, 1L << 40, "0",
     "Zero-copy allreduce up to this size in one shot (every rank reads every input whole) instead of two "
     "(each rank reduces its slice into every output); never in place; set it alike on every rank", 1},
    {"zero_copy_board", "LOOM_ZERO_COPY_BOARD", LOOM_PARAM_INT, 1, 0, 1, "1",
     "1: the zero-copy allreduce's per-call buffer descriptions go through a shared-memory board of the host; 0 "
     "(or a rank without the board): through the MPI library's point-to-point messages", 0},
    {"zero_copy_ctas", "LOOM_ZERO_COPY_CTAS", LOOM_PARAM_INT, 32, 1, 64, "32",
     "Most CTAs of a zero-copy allreduce; set it alike on every rank", 1},
    {"zero_copy_cta_bytes", "LOOM_ZERO_COPY_CTA_BYTES", LOOM_PARAM_INT, 16 * KiB, 512, 1L << 30, "16 KiB",
     "A zero-copy allreduce runs one CTA per this many bytes a rank reduces (its slice; in one shot the whole "
     "buffer), up to LOOM_ZERO_COPY_CTAS; set it alike on every rank", 1},
    {"zero_copy_staged_bytes", "LOOM_ZERO_COPY_STAGED_BYTES", LOOM_PARAM_INT, 0, 0, 1L << 32, "0",
     "Staged two-shot allreduce through a scratch of each rank's (2x this size of device memory per communicator, "
     "mapped by its peers once) for calls up to this size that may not wait on the host for their peers (MPI's "
     "non-blocking and persistent calls) or whose buffers cannot be shared (memory pools, VMM, managed memory), "
     "where the time model picks zero-copy: each rank copies its input in and its result out, no per-call host "
     "agreement. Off (0: the FIFO path) until it wins at every rank count (docs/performance.md); set it alike "
     "on every rank", 1},
    {"resident_idle_us", "LOOM_RESIDENT_IDLE_US", LOOM_PARAM_INT, 1000, 0, 1000000, "1000",
     "Blocking one-shot calls inside a host go to a kernel that stays on the GPU between calls (no launch per "
     "call) and leaves after this many microseconds without one; a device-wide synchronize (cudaFree, "
     "cudaDeviceSynchronize) in between waits at most this long; 0: launch every call", 0},
    {"resident_max_bytes", "LOOM_RESIDENT_MAX_BYTES", LOOM_PARAM_INT, 16 * KiB, 0, 16 * MiB, "16 KiB",
     "One-shot calls up to this many bytes (8-byte units of the call's largest piece) go to the resident kernel "
     "(above it a launch, which gets more CTAs, is faster)", 0},
    {"resident_ctas", "LOOM_RESIDENT_CTAS", LOOM_PARAM_INT, 4, 1, 32, "4",
     "CTAs of the resident kernel (of 512 threads; they stay on the GPU while it waits for calls)", 0},
    {"resident_nonblocking", "LOOM_RESIDENT_NONBLOCKING", LOOM_PARAM_INT, 2, 0, 2, "2",
     "Non-blocking one-shot calls post to the resident kernel and return; a call behind a pending one waits for "
     "it in loom's stream (cuStreamWaitValue32). 2: with any number of communicators per process; 1: only while "
     "the process has one resident-kernel communicator; 0: non-blocking calls launch", 0},
    {"oneshot_max_bytes", "LOOM_ONESHOT_MAX_BYTES", LOOM_PARAM_INT, -1, -1, 1L << 40, "measured per collective",
     "One-shot LL broadcast, reduce, allgather and reduce_scatter inside a host while the bytes a rank moves, "
     "(ranks - 1) x piece, stay below this (-1: the measured table in select.cc: bcast 768 KiB, the others 1.5 MiB; "
     "0: rings only)", 1},
    {"ll_ring_max_bytes", "LOOM_LL_RING_MAX_BYTES", LOOM_PARAM_INT, 0, 0, 1L << 30, "0 (off)",
     "Ring on the LL protocol up to this size (off: slower than zero-copy and one-shot LL where measured; "
     "outside the time model, which passes it over beside the algorithms it knows: LOOM_ALGO=ll_ring runs it)", 1},
    {"ll_slot_bytes", "LOOM_LL_SLOT_BYTES", LOOM_PARAM_INT, 64 * KiB, 4096, 16 * MiB, "64 KiB",
     "Bytes of LL lines per LL-ring FIFO slot", 1},
    {"ll128_max_bytes", "LOOM_LL128_MAX_BYTES", LOOM_PARAM_INT, 0, 0, 1L << 30, "0 (off)",
     "Ring on the LL128 protocol (128-byte lines, 120 bytes of data and a flag; one host, every ring link NVLink "
     "p2p, the topology's rings) allowed up to this size; its FIFOs take channels x slots x LOOM_LL128_SLOT_BYTES "
     "of GPU memory; outside the time model, which passes it over beside the algorithms it knows: "
     "LOOM_ALGO=ll128_ring runs it; set it alike on every rank", 1},
    {"ll128_slot_bytes", "LOOM_LL128_SLOT_BYTES", LOOM_PARAM_INT, 64 * KiB, 4096, 16 * MiB, "64 KiB",
     "Bytes of LL128 lines per LL128-ring FIFO slot (a multiple of 4 KiB)", 1},
    // across hosts
    {"rd_max_bytes", "LOOM_RD_MAX_BYTES", LOOM_PARAM_INT, 128 * KiB, 0, 1L << 40, "128 KiB",
     "Where ranks span hosts: recursive-doubling allreduce up to this size (0: off)", 1},
    {"doubling", "LOOM_DOUBLING", LOOM_PARAM_INT, -1, -1, 1, "-1",
     "Where ranks span hosts, up to rd_max_bytes: binomial bcast/reduce, recursive-doubling allgather, "
     "recursive-halving reduce_scatter; -1 where they take fewer than half the ring's hops (from 8 ranks), 1 always, "
     "0 never", 1},
    {"algo", "LOOM_ALGO", LOOM_PARAM_STRING, 0, 0, 0, "all",
     "Algorithms loom may choose, comma-separated: oneshot, zerocopy, rd, trees, doubling, ll_ring, ll128_ring, ring "
     "(^ excludes the "
     "listed ones); the selection table's other conditions still apply, the ring where nothing else fits; set it "
     "alike on every rank", 1},
    {"proto", "LOOM_PROTO", LOOM_PARAM_STRING, 0, 0, 0, "all",
     "Protocols loom may use, comma-separated: LL (one-shot, the LL ring), LL128 (the LL128 ring), Simple (the ring "
     "and chains, zero-copy, trees, doubling) (^ excludes); narrows LOOM_ALGO; set it alike on every rank", 1},
    {"nchannels", "LOOM_NCHANNELS", LOOM_PARAM_INT, 0, 0, 64, "0",
     "CTAs (channels) of every ring, one-shot and zero-copy call, whatever its size, up to what each has (ring: "
     "LOOM_MAX_NCHANNELS; one-shot 32, zero-copy 64); 0: the tuner decides by size; set it alike on every rank", 1},
    {"stream_blocking", "LOOM_STREAM_BLOCKING", LOOM_PARAM_INT, 1, 0, 1, "1",
     "1: loom's stream is a blocking stream: calls order after the application's legacy-stream work by themselves, "
     "and the application's later legacy-stream work waits for every loom kernel in flight (default-stream compute "
     "does not overlap a non-blocking collective); 0: a non-blocking stream that asks the legacy stream at every "
     "call and waits for its earlier work through an event where it has some (core/stream/app_order.cc): overlap as "
     "NCCL's, a little more host time per launched call", 0},
    {"stream_priority", "LOOM_STREAM_PRIORITY", LOOM_PARAM_INT, 0, 0, 1, "0",
     "1: loom's stream at the device's greatest priority, so that its kernels' CTAs are dispatched before those of "
     "an application kernel that fills the GPU (the collective much faster beside such kernels, which slow down "
     "somewhat more)", 0},
    {"max_ctas", "LOOM_MAX_CTAS", LOOM_PARAM_INT, 0, 0, 64, "0",
     "At most this many CTAs per ring, one-shot and zero-copy call and channels per pair of the exchanges, "
     "whatever the size (NCCL_MAX_CTAS's twin: fewer SMs taken from the application's kernels, less bandwidth); "
     "0: no cap; set it alike on every rank", 1},
    {"nonblocking_setup", "LOOM_NONBLOCKING_SETUP", LOOM_PARAM_INT, 1, 0, 1, "1",
     "1: a communicator's non-blocking calls may make its loom communicator without any blocking collective: "
     "at vote points (its 1st, 2nd, 4th, ... 64th non-blocking call, then every 64th, while none exists) the call "
     "waits inside progress for a non-blocking vote and, where some rank passed device buffers, the creation, "
     "with the calls behind it (no call waits for other ranks); 0: non-blocking calls are staged until a blocking "
     "collective on device buffers has made it; set it alike on every rank", 0},
    {"tree_max_bytes", "LOOM_TREE_MAX_BYTES", LOOM_PARAM_INT, 64 * KiB, 0, 1L << 40, "64 KiB",
     "Where ranks span hosts: the tree allreduce up to this size, above recursive doubling's (0: off)", 1},
    {"edge_slot_bytes", "LOOM_EDGE_SLOT_BYTES", LOOM_PARAM_INT, 128 * KiB, 4096, 64 * MiB, "128 KiB",
     "FIFO slot (one chunk) of the tree and recursive-doubling connections", 1},
    {"exchange_channels", "LOOM_EXCHANGE_CHANNELS", LOOM_PARAM_INT, 32, 1, loom::kMaxExchangeLanes, "32",
     "Most channels (CTAs, FIFOs) per pair of ranks for alltoall(v, w), gather(v), scatter(v): 48 / (ranks - 1) "
     "capped by this; set it alike on every rank", 1},
    {"exchange_direct_bytes", "LOOM_EXCHANGE_DIRECT_BYTES", LOOM_PARAM_INT, 256 * KiB, 0, 1L << 40, "256 KiB",
     "alltoall(v, w), gather(v), scatter(v) inside a host over NVLink/PCIe p2p: a block of at least this size moves "
     "in place, read by its receiver straight from the sender's buffer or written by its sender into the "
     "receiver's (LOOM_EXCHANGE_DIRECT_PUSH): one copy instead of two through the FIFO, where the buffer can be "
     "shared with CUDA IPC (0: never); set it alike on every rank", 1},
    {"exchange_oneshot_bytes", "LOOM_EXCHANGE_ONESHOT_BYTES", LOOM_PARAM_INT, 0, 0, 16 * MiB, "0",
     "alltoallv, alltoallw, gatherv, scatterv and the neighbourhood collectives inside a host where every pair "
     "of GPUs maps the other's memory: a pair whose block has at most this many bytes (an empty one too) moves as "
     "LL lines through the one-shot slots (at most LOOM_LL_MAX_BYTES), and a rank all of whose blocks (its own "
     "too) are that small runs the call one-shot, on the resident kernel where it may; both ends know a block's "
     "size, so no agreement per call; 0 (and copy-engine mode): every pair on the exchange kernel", 1},
    {"exchange_direct_push", "LOOM_EXCHANGE_DIRECT_PUSH", LOOM_PARAM_INT, 0, 0, 2, "0",
     "Who copies a block read in place (LOOM_EXCHANGE_DIRECT_BYTES): 0: its receiver, from the sender's buffer; "
     "1: in gather(v), the root's peers write their blocks into its buffer (the root's GPU no longer does every "
     "copy), elsewhere the receiver; 2: always the sender; set it alike on every rank", 1},
    {"gather_direct_bytes", "LOOM_GATHER_DIRECT_BYTES", LOOM_PARAM_INT, 8 * MiB, 0, 1L << 40, "8 MiB",
     "LOOM_EXCHANGE_DIRECT_BYTES for gather(v): below it a root's FIFOs, written by its peers, beat reading "
     "every block itself; set it alike on every rank", 1},
    {"exchange_copy_engine_bytes", "LOOM_EXCHANGE_COPY_ENGINE_BYTES", LOOM_PARAM_INT, 64 * MiB, 0, 1L << 40,
     "64 MiB",
     "gather whose block is at least this size (inside a host over p2p): the root's peers write their blocks into "
     "its output with their copy engines, whatever LOOM_EXCHANGE_DIRECT_PUSH says; gatherv pushed by "
     "LOOM_EXCHANGE_DIRECT_PUSH: a sender's block of at least this size the same way (0: never); set it alike on "
     "every rank", 1},
    {"exchange_copy_engines", "LOOM_EXCHANGE_COPY_ENGINES", LOOM_PARAM_INT, 0, 0, 1, "0",
     "1: copy-engine mode for the exchanges (alltoall(v, w), gather(v), scatter(v)), and for broadcast and allgather "
     "(run as exchanges), inside a host over p2p: every block of at least LOOM_EXCHANGE_DIRECT_BYTES goes straight "
     "into its receiver's output by the sender's copy engines (no SMs move it; blocking calls: their buffers are "
     "described per call); set it alike on every rank", 1},
    {"dt_fuse", "LOOM_DT_FUSE", LOOM_PARAM_INT, -1, -1, 2, "-1",
     "an exchange (alltoall(v, w), gather(v), scatter(v), neighbourhood) of non-contiguous datatypes on the "
     "exchange kernel: 0 packs and unpacks them by their own kernels around the call; 1 reads and writes the "
     "user's layout in place on both sides, chunk by chunk (no packed copy, but the peers cannot read or write "
     "such a side in place: those pairs through the FIFO); 2 only on the side this rank copies itself in a direct "
     "pair (the receive side; the send side where senders push), the other packed; -1: 2 where that "
     "side's largest block has at least LOOM_DT_FUSE_BYTES and its pieces average 128 B or more (shorter ones, a "
     "struct's fields, the pack kernels copy a lane each, faster), else 0 (the default: fused won from 16 MiB "
     "blocks, docs/performance.md)", 0},
    {"dt_fuse_bytes", "LOOM_DT_FUSE_BYTES", LOOM_PARAM_INT, 8 * MiB, 0, 1L << 40, "8 MiB",
     "LOOM_DT_FUSE=-1: the side of a datatype exchange this rank copies itself is read or written in place (no "
     "pack or unpack pass) where its largest block has at least this many packed bytes (0: whatever the size) and "
     "its pieces are not small", 0},
    {"net_nchannels", "LOOM_NET_NCHANNELS", LOOM_PARAM_INT, 0, 0, loom::kMaxNetChannels, "from NIC bandwidth",
     "Ring channels of a communicator that spans hosts (0: from the NIC's bandwidth, 4 without one)", 0},
    {"net", "LOOM_NET", LOOM_PARAM_STRING, 0, 0, 0, "auto",
     "Network plugin between hosts: ib or ucx (auto: ib where an RDMA port is active, else ucx); all ranks agree on "
     "one", 0},
    {"net_gdr", "LOOM_NET_GDR", LOOM_PARAM_INT, 1, 0, 1, "1",
     "GPUDirect RDMA: FIFO slots in GPU memory where the NIC can register it (0: host memory always)", 0},
    {"net_gdr_flush", "LOOM_NET_GDR_FLUSH", LOOM_PARAM_STRING, 0, 0, 0, "auto",
     "ib: flush (RDMA READ through a loopback QP) after receives into GPU memory: auto, on, off", 0},
    {"proxy_threads", "LOOM_PROXY_THREADS", LOOM_PARAM_INT, 0, 0, 16, "ucx 4, ib 1",
     "Proxy threads per process and plugin (0: 4 for ucx, whose CPU may copy every byte; 1 for ib)", 0},
    {"proxy_spin_us", "LOOM_PROXY_SPIN_US", LOOM_PARAM_INT, 1000, 0, 10000000, "1000",
     "Microseconds a proxy thread keeps spinning after its last move before it sleeps", 0},
    {"ib_gid_index", "LOOM_IB_GID_INDEX", LOOM_PARAM_INT, -1, -1, 255, "auto",
     "RoCE: GID index (-1: the first IPv4 RoCE v2 GID)", 0},
    {"ib_qps_per_conn", "LOOM_IB_QPS_PER_CONN", LOOM_PARAM_INT, 1, 1, 8, "1",
     "ib: QPs per connection; messages are split over all of them", 0},
    {"socket_ifaddr", "LOOM_SOCKET_IFADDR", LOOM_PARAM_STRING, 0, 0, 0, "first non-loopback IPv4",
     "ib: IPv4 address of the TCP side channel used to connect QPs", 0},
    {"ucx_memtype_hint", "LOOM_UCX_MEMTYPE_HINT", LOOM_PARAM_INT, 1, 0, 1, "1",
     "ucx: tell UCX each buffer's memory type instead of letting a CUDA-aware UCX ask the driver per message", 0},
    // inside a host, topology, tests
    {"p2p_disable", "LOOM_P2P_DISABLE", LOOM_PARAM_INT, 0, 0, 1, "0",
     "1: never map peer GPUs (CUDA IPC); GPUs of one host talk through shared host memory", 0},
    {"topo_file", "LOOM_TOPO_FILE", LOOM_PARAM_STRING, 0, 0, 0, "detect",
     "Read this host's topology from this XML file instead of detecting it", 0},
    {"topo_dump_file", "LOOM_TOPO_DUMP_FILE", LOOM_PARAM_STRING, 0, 0, 0, "none",
     "Write the detected system of each new loom communicator to this XML file", 0},
    {"graph_dump_file", "LOOM_GRAPH_DUMP_FILE", LOOM_PARAM_STRING, 0, 0, 0, "none",
     "Write the rings, trees and channel count chosen for each new loom communicator to this XML file", 0},
    {"fake_nodes", "LOOM_FAKE_NODES", LOOM_PARAM_INT, 0, 0, 1024, "0",
     "Testing aid: 1 makes every process a host of its own, k >= 2 pretend hosts of k GPUs (the net path on one "
     "box)", 0},
    {"arrival_per_host", "LOOM_ARRIVAL_PER_HOST", LOOM_PARAM_INT, 0, 0, 1, "0",
     "Testing aid: 1 gives every host the ranks count as (LOOM_FAKE_NODES' pretend hosts too) an arrival board of "
     "its own, as on a cluster, so that a timeout asks the other hosts who arrived (0: one board per OS instance)", 1},
    {"profile", "LOOM_PROFILE", LOOM_PARAM_INT, 0, 0, 1, "0",
     "1: each communicator prints, when freed, the mean host time per phase of its calls on loom's kernels (entry: "
     "the component's routing, pointer queries, to the GPU (a one-shot call: until launched or posted to the resident kernel; "
     "split into lock, checks, choice, order (the resident kernel's legacy-stream query) and post), enqueue, wait, "
     "staging out) per collective and size class, the first call of each (connections, "
     "mappings) apart; a communicator that ran zero-copy allreduces adds their host steps and kernel phases", 0},
    {"direct_map_fail", "LOOM_DIRECT_MAP_FAIL", LOOM_PARAM_INT, -1, -1, 1L << 30, "-1",
     "Testing aid: the rank whose mappings of peers' buffers for in-place exchange blocks fail, as if CUDA IPC "
     "refused them (-1: none)", 0},
    {"stuck_rank", "LOOM_STUCK_RANK", LOOM_PARAM_INT, -1, -1, 1L << 30, "-1",
     "Testing aid: the rank whose GPU says it started call LOOM_STUCK_CALL and then does none of it, as a hung "
     "GPU would (-1: none)", 0},
    {"stuck_call", "LOOM_STUCK_CALL", LOOM_PARAM_INT, 0, 0, 1L << 40, "0",
     "Testing aid: the call (counted from 1 per communicator) LOOM_STUCK_RANK stops in", 0},
};

constexpr int kNumParams = (int)(sizeof(kParams) / sizeof(kParams[0]));

const loomParamDef *find(const char *env) {
    for (const loomParamDef &d : kParams)
        if (!strcmp(d.env, env)) return &d;
    return nullptr;
}

} // namespace

extern "C" int loomParamCount(void) { return kNumParams; }
extern "C" const loomParamDef *loomParamAt(int i) { return i >= 0 && i < kNumParams ? &kParams[i] : nullptr; }
extern "C" long loomParamLong(const char *env) { return loom::paramLong(env); }

namespace {
const loomParamDef *const *agreedList(int *count) {
    static int n = 0;
    static const loomParamDef *list[LOOM_MAX_AGREED];
    static std::once_flag once;
    std::call_once(once, [] {
        for (int i = 0; i < kNumParams; ++i)
            if (kParams[i].agreed && n < LOOM_MAX_AGREED) list[n++] = &kParams[i];
    });
    *count = n;
    return list;
}
} // namespace

extern "C" int loomAgreedCount(void) {
    int n;
    agreedList(&n);
    return n;
}
extern "C" const loomParamDef *loomAgreedAt(int i) {
    int n;
    const loomParamDef *const *list = agreedList(&n);
    return i >= 0 && i < n ? list[i] : nullptr;
}
extern "C" int loomAgreedIndex(const char *env) {
    for (int i = 0; i < loomAgreedCount(); ++i)
        if (!strcmp(loomAgreedAt(i)->env, env)) return i;
    return -1;
}
extern "C" void loomAgreedWords(unsigned long long out[LOOM_MAX_AGREED]) {
    memset(out, 0, sizeof(unsigned long long) * LOOM_MAX_AGREED);
    for (int i = 0; i < loomAgreedCount(); ++i) {
        const loomParamDef *d = loomAgreedAt(i);
        if (d->type == LOOM_PARAM_INT) {
            out[i] = (unsigned long long)loom::paramLong(d->env);
        } else {
            const char *v = loom::paramString(d->env);
            const uint64_t h = v ? loom::fnv1a(v) : 0;
            out[i] = v ? (h ? h : 1) : 0; // 0 only when unset
        }
    }
}

namespace loom {

long paramLong(const char *env) {
    const loomParamDef *d = find(env);
    if (!d || d->type != LOOM_PARAM_INT) {
        LOOM_WARN(kInit, "internal: %s is not an integer tunable of the parameter table", env);
        return 0;
    }
    const char *s = getenv(env); // the only getenv of a LOOM_* tunable
    if (!s || !*s) return d->def;
    char *end = nullptr;
    const long v = strtol(s, &end, 0);
    const bool bad = *end != '\0', out = !bad && (v < d->lo || v > d->hi);
    if (!bad && !out) return v;
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> g(mu);
    if (warned.insert(env).second) {
        if (bad) LOOM_WARN(kInit, "%s=%s is not a number; using the default %ld", env, s, d->def);
        else LOOM_WARN(kInit, "%s=%ld is outside [%ld, %ld]; using the default %ld", env, v, d->lo, d->hi, d->def);
    }
    return d->def;
}

unsigned parseNameMask(const char *text, const NamedBit *names, int n, unsigned all, int *unknown) {
    *unknown = 0;
    const bool invert = text[0] == '^';
    const std::string list(text + (invert ? 1 : 0));
    unsigned mask = 0;
    for (size_t at = 0; at <= list.size();) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        const std::string name = list.substr(at, end - at);
        int i = 0;
        while (i < n && strcasecmp(name.c_str(), names[i].name) != 0) ++i;
        if (i < n) mask |= names[i].bit;
        else ++*unknown;
        at = end + 1;
    }
    return invert ? all & ~mask : mask;
}

const char *paramString(const char *env) {
    const loomParamDef *d = find(env);
    if (!d || d->type != LOOM_PARAM_STRING) {
        LOOM_WARN(kInit, "internal: %s is not a string tunable of the parameter table", env);
        return nullptr;
    }
    const char *s = getenv(env);
    return s && *s ? s : nullptr;
}

} // namespace loom
