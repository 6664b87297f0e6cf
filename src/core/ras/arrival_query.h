/*
 * Who arrived, asked across hosts. An arrival board (core/ras/arrival.h) covers
 * the ranks of one host: a waiting rank whose host's ranks all arrived
 * cannot see the one that did not. So every process with a communicator
 * that spans hosts serves its boards to the communicator's other ranks:
 *  - one thread per process, started with the first such board and joined
 *    with the last, asleep in poll() between questions;
 *  - listening on the side channel's interface (LOOM_SOCKET_IFADDR) behind
 *    a per-process secret (base/side_channel.h: bound to one
 *    address, hellos without the secret closed unheard, fuzz-tested); the
 *    address and secret go around at the communicator's set-up, so only the
 *    job's own ranks can ask;
 *  - a question names the communicator (its tag); the answer is that host's
 *    board: every slot's rank, calls entered, pid, GPU, bus id, host name,
 *    and whether its process is alive as seen on that host. Read-only: a
 *    replayed question changes nothing.
 * The thread answers, not the application's: the rank that did not arrive
 * (computing elsewhere, or stuck) still answers for its host, and so does
 * any live rank of a host whose rank died. A host none of whose processes
 * answers in time is named as unreachable.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/side_channel.h"
#include "core/ras/arrival.h"

namespace loom {

// Where a rank's boards are served (ip 0: nowhere, e.g. its server could
// not start, or its board holds every rank and nobody needs to ask).
using ArrivalContact = net::SideAddress;

// What a communicator that spans boards keeps (the same on every rank).
struct ArrivalPeers {
    std::vector<uint64_t> boardOf;        // per rank: the host whose board holds it
    std::vector<ArrivalContact> contacts; // per rank
};

// Serves `board` under `tag` until arrivalUnserve; *contact: this process's
// address and secret (ip 0 when the server could not start: said at WARN).
void arrivalServe(uint64_t tag, const ArrivalBoard *board, ArrivalContact *contact);
void arrivalUnserve(const ArrivalBoard *board);

// One host's answer.
struct HostArrivals {
    bool answered = false;
    bool refused = false; // not answered: every rank's address refused the connection (all its processes gone)
    std::vector<Arrival> slots;
    std::vector<uint8_t> alive; // per slot, as its host sees it
};

// The communicator's other hosts (those whose board is not `myBoard`), each
// with its ranks' contacts and its ranks, in rank order.
struct OtherHosts {
    std::vector<std::vector<ArrivalContact>> contacts;
    std::vector<std::vector<int>> ranks;
};
OtherHosts otherHosts(const ArrivalPeers &peers, uint64_t myBoard);

// Asks every host of `hosts` (each the contacts of its ranks, tried in turn
// from contact `start` modulo their number, until one answers: askers start
// at different ranks) for its board under `tag`, all hosts at once; gives up
// on a host after `seconds`.
std::vector<HostArrivals> arrivalAsk(uint64_t tag, const std::vector<std::vector<ArrivalContact>> &hosts,
                                     double seconds, unsigned start = 0);

// How long a timed-out rank waits for the other hosts' answers.
constexpr double kArrivalAskSeconds = 3.0;

// For a rank whose own board (`myBoard`) shows everyone arrived at call
// `call`: what the other hosts' boards say. "did not arrive: rank ... entered
// 4 of 5 calls", "dead (process gone): rank ...", "no answer from the host of
// ranks 4, 5 within 3 s (...)", "rank 4 is gone (... refused the connection ...)",
// or that every rank arrived. `me`: the asking rank (where each host's
// questions start). *gone: whether a rank is known gone (dead, or its host
// refused every connection), which makes the call's error MPI_ERR_PROC_FAILED.
std::string describeOtherHosts(const ArrivalPeers &peers, uint64_t myBoard, uint64_t tag, uint64_t call,
                               double seconds, int me = 0, bool *gone = nullptr);

} // namespace loom
