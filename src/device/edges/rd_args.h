/*
 * Who a rank talks to in recursive doubling (the edges of peer_edge.h: its
 * partner of each step and its extra rank). Shared by host (core), device
 * code and the tests.
 *
 * Recursive doubling over p = the largest power of two <= n ranks: at step k
 * rank r exchanges its whole vector with r ^ 2^k and both reduce — log2(p)
 * hops, each rank sending the full message every step: for small messages
 * across hosts, where a hop (a network round through the proxies) costs far
 * more than the bytes. Ranks p .. n-1 (the extras) first hand their input to
 * rank r - p and get the result back from it: two hops more.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device/host_device.h"
#include "device/edges/rd_schedule.h"

namespace loom {

// This rank's part, from its rank and the communicator size (host and tests).
struct RdPlan {
    int p;            // ranks in the doubling (a power of two)
    int steps;        // log2(p)
    int extra;        // the rank whose vector this rank folds in first (-1: none)
    int host;         // an extra rank: the rank that does its steps (-1: not an extra)
};

LOOM_HD RdPlan rdPlan(int rank, int n) {
    RdPlan q;
    q.p = 1;
    q.steps = 0;
    while (q.p * 2 <= n) {
        q.p *= 2;
        ++q.steps;
    }
    q.extra = rank + q.p < n ? rank + q.p : -1;
    q.host = rank >= q.p ? rank - q.p : -1;
    return q;
}

// What the kernel is told (rd_schedule.h).
LOOM_HD RdRole rdRoleOf(int rank, int n) {
    const RdPlan q = rdPlan(rank, n);
    RdRole r;
    r.rank = rank;
    r.isExtra = q.host >= 0;
    r.steps = r.isExtra ? 0 : q.steps;
    r.hasExtra = q.extra >= 0;
    return r;
}

// Partner of `rank` at step k (ranks below p).
LOOM_HD constexpr int rdPartner(int rank, int step) { return rank ^ (1 << step); }

} // namespace loom
