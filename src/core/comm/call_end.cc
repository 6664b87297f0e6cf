/*
 * How calls end: callsFinished reads what the GPU and the watchdog left
 * after loom's stream drained (or a wait gave up) and names the failure:
 * a kernel error, a broken connection, a dead or silent peer (with what the
 * arrival board says of who did not arrive). cudaFailed and failedEarlier
 * word the other failures of a call. Below the communicator's life cycle
 * (comm.cc) and the resident kernel (core/stream/resident.cc), which both
 * end calls through here; it calls neither (the resident kernel's state,
 * for a bug report, is logged by core/stream/resident.cc's
 * residentCallsFinished, which wraps callsFinished for every wait).
 */
#include "core/comm/comm.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "base/debug.h"
#include "btl_gpu/net/net_transport.h"
#include "core/comm/params.h"
#include "core/connect/connect.h"
#include "core/ras/arrival_query.h"
#include "core/ras/watchdog.h"

using namespace loom;

namespace {

// Every net link of the communicator: the rings' and the edges'.
template <typename F> void forEachNet(loomComm *comm, F f) {
    for (RingLink &ring : comm->ring.links) {
        f(&ring.netSend);
        f(&ring.netRecv);
    }
    for (NetLinks &l : comm->edges.net) f(&l);
}

loomResult_t anyNetError(loomComm *comm) {
    loomResult_t r = loomSuccess;
    forEachNet(comm, [&](NetLinks *l) { if (r == loomSuccess) r = netError(l); });
    return r;
}

// "dead (process gone): rank ..." for ranks of this host whose process is
// gone (a peer's death can also fail a kernel that reads its memory), else "".
std::string deadPeers(const loomComm *comm) {
    if (!comm->ras.arrivals) return "";
    const std::vector<Arrival> dead = deadRanks(*comm->ras.arrivals);
    return dead.empty() ? "" : "dead (process gone): " + describeRanks(dead);
}

// What this host's arrival board says about the oldest unfinished call
// (the one that timed out: calls finish in order), and the other hosts'
// when everyone here arrived. *gone: a rank is known gone (dead process).
std::string whoDidNotArrive(const loomComm *comm, bool *gone = nullptr) {
    if (gone) *gone = false;
    if (!comm->ras.arrivals) return "no arrival board to say who did not arrive";
    std::string dead = deadPeers(comm);
    if (gone) *gone = !dead.empty();
    if (!dead.empty()) return dead;
    const uint64_t call = comm->ras.collsDone + 1;
    const std::vector<Arrival> absent = absentRanks(*comm->ras.arrivals, call);
    if (!absent.empty()) return "did not arrive: " + describeAbsent(absent, call);
    if (int unknown = unfilledSlots(*comm->ras.arrivals))
        return std::to_string(unknown) + " rank(s) of this host are not on its arrival board (see the warning at "
               "set-up): whether they arrived is unknown";
    if (comm->ras.arrivals->slots() == comm->nranks) return "every rank arrived (one is stuck inside the call, or its GPU is)";
    if (!comm->ras.arrivalPeers) return "every rank of this host arrived: the missing one is on another host";
    const ArrivalPeers &ap = *comm->ras.arrivalPeers;
    return describeOtherHosts(ap, ap.boardOf[comm->rank], comm->commTag, call, kArrivalAskSeconds, comm->rank, gone);
}

// "call 5" or "calls 5..7" (in flight when the wait failed).
std::string callsInFlight(const loomComm *comm) {
    const unsigned long long a = comm->ras.collsDone + 1, b = comm->ras.collsEntered;
    return a >= b ? "call " + std::to_string(b) : "calls " + std::to_string(a) + ".." + std::to_string(b);
}

void abandonNets(loomComm *comm) {
    forEachNet(comm, [](NetLinks *l) { netAbandon(l); });
}

} // namespace

namespace loom {
std::string describeAbsentPeers(const loomComm *comm) { return whoDidNotArrive(comm); }

loomResult_t cudaFailed(const loomComm *comm, const char *coll, const char *step, cudaError_t e) {
    return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): %s: %s: %s", comm->rank, comm->cudaDev, comm->busId, coll,
                step, cudaGetErrorString(e));
}

loomResult_t failedEarlier(const loomComm *comm, const char *what) {
    int dead = -1;
    const std::string gone = watchReason(comm, &dead);
    if (!gone.empty())
        return fail(watchCancelledResult(dead), "%s: rank %d: communicator failed earlier: %s", what,
                    comm->rank, gone.c_str());
    return fail(loomRemoteError, "%s: rank %d: communicator failed earlier", what, comm->rank);
}
} // namespace loom

namespace loom {

loomResult_t callsFinished(loomComm *comm, cudaError_t err, bool all) {
    if (*comm->ras.abortFlag) {
        comm->ras.failed = true;
        abandonNets(comm);
        char host[64] = "?";
        gethostname(host, sizeof(host) - 1);
        const char *others = comm->edges.treeReady || comm->edges.rdReady ? ", or a tree or recursive-doubling peer" : "";
        std::string neighbours = "ring neighbours " + ringNeighbours(comm);
        const int to = comm->ras.abortFlag[kAbortSendPeer] - 1, from = comm->ras.abortFlag[kAbortRecvPeer] - 1;
        if (to >= 0 || from >= 0) { // an exchange or the scan chain: the peers of the stalled step
            others = "";
            neighbours = std::string(comm->ras.lastColl) + " peers:" +
                         (to >= 0 ? " sending to rank " + std::to_string(to) : std::string()) +
                         (to >= 0 && from >= 0 ? "," : "") +
                         (from >= 0 ? " receiving from rank " + std::to_string(from) : std::string());
        }
        if (anyNetError(comm) != loomSuccess) { // the proxy's error said what broke (logged at WARN)
            // A connection that broke because its peer died: that peer's failure, as the watchdog would say.
            bool gone = false;
            const std::string who = whoDidNotArrive(comm, &gone);
            return fail(gone ? loomProcFailed : loomRemoteError, "%s rank %d GPU %d (%s): %s (%s): a network connection (%s%s) failed (see the warning above); %s; communicator unusable", host,
                        comm->rank, comm->cudaDev, comm->busId, comm->ras.lastColl, callsInFlight(comm).c_str(),
                        neighbours.c_str(), others, who.c_str());
        }
        int dead = -1;
        const std::string gone = watchReason(comm, &dead);
        if (!gone.empty()) // the watchdog cancelled the calls (core/ras/watchdog.h): a dead peer, or a failed one
            return fail(watchCancelledResult(dead), "%s rank %d GPU %d (%s): %s (%s): %s; communicator unusable", host, comm->rank,
                        comm->cudaDev, comm->busId, comm->ras.lastColl, callsInFlight(comm).c_str(), gone.c_str());
        char silence[160];
        if (comm->ras.watch->why == kWaitStuck)
            snprintf(silence, sizeof(silence), "stopped moving inside the call: silent for %.0f s after every rank "
                     "had started it (LOOM_STUCK_TIMEOUT)", params().stuckSeconds);
        else
            snprintf(silence, sizeof(silence), "silent for %.0f s (LOOM_TIMEOUT)", params().timeoutSeconds);
        return fail(loomRemoteError, "%s rank %d GPU %d (%s): %s (%s): a peer (%s%s) %s; %s; communicator unusable",
                    host, comm->rank, comm->cudaDev, comm->busId, comm->ras.lastColl, callsInFlight(comm).c_str(),
                    neighbours.c_str(), others, silence, whoDidNotArrive(comm).c_str());
    }
    if (err != cudaSuccess) {
        comm->ras.failed = true;
        abandonNets(comm);
        const std::string dead = deadPeers(comm);
        // MPS reports a fatal fault of any client to every client on the GPU;
        // a process killed inside a kernel that reads its own pinned host
        // memory is one (seen with the net transport's host FIFOs).
        const char *mps = comm->mpsClient ? "; this process is a CUDA MPS client, and MPS fails every client's "
                                            "kernels on a GPU when one client faults or dies inside a kernel: the "
                                            "cause may be another process on this GPU"
                                          : "";
        return fail(loomUnhandledCudaError, "rank %d GPU %d (%s): %s (%s): kernel failed: %s%s%s%s", comm->rank,
                    comm->cudaDev, comm->busId, comm->ras.lastColl, callsInFlight(comm).c_str(), cudaGetErrorString(err),
                    dead.empty() ? "" : "; ", dead.c_str(), mps);
    }
    if (all) comm->ras.watch->done = comm->ras.collsDone = comm->ras.collsEntered;
    if (const int q = comm->ras.abortFlag[kAbortUndelivered]) { // the kernel ran to its end: only a block is missing
        comm->ras.abortFlag[kAbortUndelivered] = 0;
        if (strcmp(comm->ras.lastColl, "allreduce") == 0) // the zero-copy allreduce (core/algo/zerocopy/zerocopy.h)
            return fail(loomRemoteError, "rank %d GPU %d (%s): allreduce: rank %d could not take part (it could "
                        "not map a peer's buffer with CUDA IPC, or it timed out waiting for another rank; its error "
                        "says which), so this rank moved no data and this call's result is missing; unless a rank "
                        "timed out the communicator stays usable (LOOM_ALGO=^zerocopy: the FIFO path only)",
                        comm->rank, comm->cudaDev, comm->busId, q - 1);
        return fail(loomRemoteError, "rank %d GPU %d (%s): %s: rank %d could not map this rank's output (CUDA IPC), "
                    "or its copy engines could not be given the block (its error says which), so its block was not "
                    "delivered; the communicator stays usable (%s)", comm->rank, comm->cudaDev, comm->busId,
                    comm->ras.lastColl, q - 1,
                    params().exchangeCopyEngines ? "LOOM_EXCHANGE_COPY_ENGINES=0 and LOOM_EXCHANGE_DIRECT_PUSH=0: "
                                                   "receivers map their senders' inputs instead"
                                                 : "LOOM_EXCHANGE_DIRECT_PUSH=0: receivers map their senders' inputs "
                                                   "instead");
    }
    return loomSuccess;
}

} // namespace loom
