/*
 * Ring collectives, host side: plan (channels, protocol, the root's ring
 * position), launch, commit (advance each channel's send and receive step
 * counters exactly as the kernel will, from the same schedule functions, and
 * promise the proxy those steps on net connections).
 */
#include "core/enqueue/enqueue.h"

#include <cstring>
#include <vector>

#include "base/debug.h"
#include "core/comm/params.h"
#include "core/stream/pinned_uploads.h"
#include "core/algo/registry.h"
#include "core/select/tuning.h"
#include "device/collectives.h"
#include "device/ring/ring_schedule.h"

namespace loom {

namespace {

// Ragged blocks: the tables go to device memory on the call's stream, after
// the last kernel that read the previous ones (which may be on another stream).
loomResult_t uploadBlocks(loomComm *comm, const std::vector<size_t> &table, cudaStream_t stream) {
    cudaError_t e = cudaSuccess;
    if (!comm->blockTablesDev) {
        e = cudaMalloc((void **)&comm->blockTablesDev, 2 * sizeof(size_t) * (size_t)comm->nranks);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&comm->blockTablesRead, cudaEventDisableTiming);
    } else {
        e = cudaStreamWaitEvent(stream, comm->blockTablesRead, 0);
    }
    // Through pinned memory (core/stream/pinned_uploads.h): `table` may go at once.
    if (e == cudaSuccess)
        e = PinnedUploads::upload(comm, comm->blockTablesDev, table.data(), table.size() * sizeof(size_t), stream);
    if (e != cudaSuccess)
        return fail(loomUnhandledCudaError, "rank %d GPU %d: block table of a ragged call: %s", comm->rank,
                    comm->cudaDev, cudaGetErrorString(e));
    return loomSuccess;
}

} // namespace

loomResult_t ringCollective(loomComm *comm, const RingCall &c, cudaStream_t stream) {
    const bool bytes = c.coll == loomCollAllGather || c.coll == loomCollBroadcast; // moved, never reduced
    const size_t esize = bytes ? 1 : loomTypeSize(c.dtype);
    const size_t scale = bytes ? loomTypeSize(c.dtype) : 1; // elements -> what the kernel counts
    const size_t count = c.count * scale;
    // The host's view of the blocks (commit) and the kernel's (device tables).
    std::vector<size_t> table;
    RingBlocks hostBlocks = {nullptr, nullptr, count};
    if (c.counts) {
        table.resize(2 * (size_t)comm->nranks);
        for (int q = 0; q < comm->nranks; ++q) {
            table[q] = c.counts[q] * scale;
            table[comm->nranks + q] = c.displs[q] * scale;
        }
        hostBlocks = RingBlocks{table.data(), table.data() + comm->nranks, 0};
        loomResult_t r = uploadBlocks(comm, table, stream);
        if (r != loomSuccess) return r;
    }
    RingArgs a;
    memset(&a, 0, sizeof(a));
    a.coll = c.coll;
    a.proto = c.proto;
    a.chans = comm->ring.chansDev[c.proto];
    a.in = c.in;
    a.out = c.out;
    a.blocks = hostBlocks;
    if (c.counts) a.blocks = RingBlocks{comm->blockTablesDev, comm->blockTablesDev + comm->nranks, 0};
    a.nranks = comm->nranks;
    a.root = c.root; // each channel's schedule is in positions on its own ring
    a.nchannels = ringChannels(comm, c.totalBytes); // core/select/tuning.h
    a.nthreads = params().ringThreads;
    a.nslots = comm->ring.nslots;
    a.slotBytes = ringSlotBytes(comm, c.proto);
    enterCollective(comm, loomCollName(c.coll));
    kernelWaits(comm, a);
    ConnSteps *steps = comm->ring.steps[c.proto];
    for (int ch = 0; ch < a.nchannels; ++ch) a.steps[ch] = steps[ch];
    cudaError_t err = bytes ? launchRingBytes(a, stream) : launchRingColl(a, c.dtype, c.op, stream);
    if (err != cudaSuccess) return cudaFailed(comm, loomCollName(c.coll), "ring launch", err);
    if (c.counts && (err = cudaEventRecord(comm->blockTablesRead, stream)) != cudaSuccess)
        return cudaFailed(comm, loomCollName(c.coll), "the block tables' event", err);
    // Commit: what the kernel will send and receive on each channel.
    const size_t align = esize >= 16 ? 1 : 16 / esize;
    const size_t slotElems = ringSlotDataBytes(a.proto, a.slotBytes) / esize;
    uint64_t sends[kMaxChannels] = {}, recvs[kMaxChannels] = {};
    const int nr = (int)comm->ring.links.size();
    // Per ring, not per channel: each walks the round's 2n steps.
    unsigned long long perRoundSends[kMaxChannels] = {}, perRoundRecvs[kMaxChannels] = {};
    for (int k = 0; k < nr && k < a.nchannels && comm->nranks > 1; ++k)
        ringRoundSteps(c.coll, comm->ring.links[k].pos, comm->ring.links[k].posOf[c.root], comm->nranks, &perRoundSends[k],
                       &perRoundRecvs[k]);
    for (int ch = 0; ch < a.nchannels && comm->nranks > 1; ++ch) {
        const size_t rounds = ringGeom(c.coll, hostBlocks, comm->nranks, a.nchannels, ch, slotElems, align).rounds;
        sends[ch] = perRoundSends[ch % nr] * rounds;
        recvs[ch] = perRoundRecvs[ch % nr] * rounds;
        steps[ch].send += sends[ch];
        steps[ch].recv += recvs[ch];
    }
    // Each ring's net links hold its channels only: channel ch is their ch / nr.
    for (int k = 0; k < nr && comm->ring.useNet; ++k) {
        RingLink &ring = comm->ring.links[k];
        if (!ring.usesNet()) continue;
        uint64_t ringSends[kMaxChannels] = {}, ringRecvs[kMaxChannels] = {};
        int used = 0;
        for (int ch = k; ch < a.nchannels; ch += nr, ++used) {
            ringSends[RingLink::netIndex(ch, nr)] = sends[ch];
            ringRecvs[RingLink::netIndex(ch, nr)] = recvs[ch];
        }
        netPost(&ring.netSend, used, ringSends, ringRecvs);
        netPost(&ring.netRecv, used, ringSends, ringRecvs);
    }
    LOOM_TRACE(kColl, "rank %d: %s %zu x %zu B, root %d, ring %s on %d channels", comm->rank, loomCollName(c.coll),
               c.count, loomTypeSize(c.dtype), c.root, protoName(c.proto), a.nchannels);
    return loomSuccess;
}

// The registry's entries (core/algo/registry.h): the ring on each protocol.

namespace {

// The LL ring (off by default: it won only in a narrow band of sizes).
bool ringLLFits(const loomComm *comm, const CallShape &s) { return s.bytes <= comm->ring.llMaxBytes && s.esize <= 8; }

// The LL128 ring (off by default, LOOM_LL128_MAX_BYTES): NVLink rings only
// (comm->ring.ll128Ready), elements that fit its 8-byte units.
bool ringLL128Fits(const loomComm *comm, const CallShape &s) {
    return comm->ring.ll128Ready && s.bytes <= comm->ring.ll128MaxBytes && s.esize <= 8;
}

int ringCtas(const loomComm *comm, const CallShape &s) { return ringChannels(comm, s.bytes); }

template <int kProto>
loomResult_t ringRun(loomComm *comm, const TableCall &t) {
    RingCall c;
    c.coll = t.coll;
    c.proto = kProto;
    c.in = t.in;
    c.out = t.out;
    c.count = t.counts ? 0 : t.count;
    c.counts = t.counts;
    c.displs = t.displs;
    c.totalBytes = t.total * loomTypeSize(t.dtype);
    c.dtype = t.dtype;
    c.op = t.op;
    c.root = t.root;
    return ringCollective(comm, c, t.stream);
}

} // namespace

extern const AlgoEntry kRingAlgo = {kAlgoRing,     "ring",    "ring",   kProtoSimple, kTableColls,
                                    fitsAlways,    "bandwidth", ringCtas, ringRun<kProtoSimple>, loadRingKernels};
extern const AlgoEntry kRingLLAlgo = {kAlgoRingLL, "ll_ring", "ring (LL)", kProtoLL, collBit(loomCollAllReduce), ringLLFits,
                                      "up to LOOM_LL_RING_MAX_BYTES", ringCtas, ringRun<kProtoLL>, loadRingKernels};
extern const AlgoEntry kRingLL128Algo = {kAlgoRingLL128, "ll128_ring", "ring (LL128)", kProtoLL128,
                                         collBit(loomCollAllReduce), ringLL128Fits,
                                         "NVLink rings, up to LOOM_LL128_MAX_BYTES", ringCtas, ringRun<kProtoLL128>,
                                         loadRingKernels};

} // namespace loom
