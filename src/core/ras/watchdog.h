/*
 * The watchdog: one thread per process that tells a late rank from a dead
 * or stuck one, for every communicator of the process.
 *
 * Kernels and host-side waits (device/wait.h) wait for a late peer without
 * limit. A wait silent for a moment marks the communicator's `stalled` word
 * with its call's number; from then until the host has seen that call
 * finish, the watchdog looks at the communicator's ranks every tick:
 *  - same host: the arrival board (core/ras/arrival.h): calls entered, calls
 *    started on the GPU, and whether the process is alive (its pid);
 *  - other hosts: their arrival servers (core/ras/arrival_query.h), which answer
 *    for every rank of their host; a host whose every address refuses the
 *    connection has no process left, and one that does not answer for
 *    kHostLostSeconds is gone (or its network is).
 * What it does with that (watchRules, a plain function the unit tests run):
 *  - a dead rank: cancels the communicator's calls (words->cancel): every
 *    pending and later call fails with a message naming it, which the MPI
 *    component returns as MPI_ERR_PROC_FAILED;
 *  - a live rank whose side of the communicator failed (its board slot's
 *    failedIn, which each watchdog publishes for its own side): it will
 *    take part in no call again, so the calls are cancelled too, as
 *    MPI_ERR_OTHER naming it (without this, a rank whose peer failed a call
 *    that it finished itself would wait for that peer for ever);
 *  - every rank has started the call on its GPU: tells the kernels so
 *    (words->allStarted), whose waits may then end as stuck after
 *    LOOM_STUCK_TIMEOUT;
 *  - after LOOM_WARN_AFTER: one warning naming the ranks that have not
 *    arrived (not entered, or entered but their GPU busy with earlier work),
 *    and it keeps waiting.
 * Every tick it also copies each communicator's `started` word to its slot
 * on the arrival board, for the other ranks' watchdogs.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/wait.h"
#include "loom.h"

struct loomComm;

namespace loom {

constexpr double kWatchTickSeconds = 0.25; // how often the thread looks
constexpr double kStallReportSeconds = 0.5; // silence before a wait marks `stalled`
constexpr double kHostLostSeconds = 10.0;  // no answer from any rank of a host this long: gone
constexpr double kAskEverySeconds = 1.0;   // other hosts are asked at most this often
constexpr double kAskSeconds = 1.5;        // ... and given this long to answer

// Starts watching comm (its `watch` words exist); the thread starts with the
// first communicator and stops with the last.
void watchStart(loomComm *comm);
void watchStop(loomComm *comm);

// Why the communicator's calls were cancelled ("" when they were not);
// *deadRank: the first rank found dead (-1: none: a peer's side failed).
std::string watchReason(const loomComm *comm, int *deadRank);
// The error class of calls the watchdog cancelled: a dead peer's, or (its
// process alive, its side failed) a remote error.
inline loomResult_t watchCancelledResult(int deadRank) { return deadRank >= 0 ? loomProcFailed : loomRemoteError; }

// The host clock of host-side waits (steady, nanoseconds), and the limits
// such a wait of the communicator gets: LOOM_TIMEOUT, the stall mark and
// the watchdog's cancel word, never stuck (a rank that posted nothing has
// not started the call).
uint64_t hostNowNs();
WaitLimit hostWaitLimit(const loomComm *comm, uint64_t call);

// ------------------------------------------------------------ the rules

// One rank as the watchdog last saw it.
struct WatchPeer {
    int rank = -1;
    bool known = false;      // its board was read or its host answered
    bool dead = false;       // its process is gone (or its host refused every connection)
    uint64_t entered = 0;    // calls entered on the host
    uint64_t started = 0;    // ... started on its GPU
    uint64_t failedIn = 0;   // its side of the communicator failed (0: it did not)
    double silentSince = -1; // its host has not answered since (-1: it answers, or never asked)
};

// What the watchdog does at one tick for one stalled call.
struct WatchVerdict {
    std::vector<int> dead;       // cancel: these ranks are gone
    std::vector<int> failed;     // cancel: these live ranks' side of the communicator failed
    bool hostsLost = false;      // ... some of them because their host stopped answering
    bool allStarted = false;     // every rank's GPU has started the call
    bool warn = false;           // say now who has not arrived
    std::vector<int> notEntered; // for the warning
    std::vector<int> notStarted; // entered, but their GPU has not started the call
};

// call: the stalled call's number; stalledFor: seconds since the watchdog
// first saw the stall; warned: the warning was given for this call.
WatchVerdict watchRules(const std::vector<WatchPeer> &peers, uint64_t call, double now, double stalledFor,
                        double warnAfter, bool warned);

} // namespace loom
