/*
 * What the host hands the recursive-doubling allreduce kernel: this rank's
 * edges (peer_edge.h) to its partner of each step and to its extra rank.
 * Shared by host (core) and device code.
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

#include "device/peer_edge.h"

namespace loom {

// This rank's part, from its rank and the communicator size (host and tests).
struct RdPlan {
    int p;            // ranks in the doubling (a power of two)
    int steps;        // log2(p)
    int extra;        // the rank whose vector this rank folds in first (-1: none)
    int host;         // an extra rank: the rank that does its steps (-1: not an extra)
};

inline RdPlan rdPlan(int rank, int n) {
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

// Partner of `rank` at step k (ranks below p).
inline constexpr int rdPartner(int rank, int step) { return rank ^ (1 << step); }

struct RdArgs {
    EdgeCall c;
    int rank;
    int steps;                   // log2(p); 0 for an extra rank
    int hasExtra;                // fold in the extra rank's vector first
    int isExtra;                 // hand the input to edge[kMaxRdSteps], get the result from it
    PeerEdge edge[kRdEdgeSlots]; // [k] partner of step k; [kMaxRdSteps] the extra (or host) rank
};

static_assert(sizeof(RdArgs) <= 4096, "kernel parameters of CUDA < 12.1");

} // namespace loom
