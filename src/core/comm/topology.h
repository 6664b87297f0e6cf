/*
 * The communicator's view of the machines: every host's description is
 * gathered over the bootstrap (only the first rank of each host detects),
 * the rings and trees are searched, and the chosen graphs are logged and,
 * on request, dumped (LOOM_TOPO_DUMP_FILE, LOOM_GRAPH_DUMP_FILE).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom.h"
#include "topo/search.h"

namespace loom {

struct RankIdentity {
    uint64_t hostHash;
    char busId[16];
    uint8_t mps; // this rank's contexts on its GPU go through CUDA's MPS server
};

// The NICs this rank uses on one ring, "device:port": where the ring enters
// its host (recv) and where it leaves (send); "" where it does neither.
struct RingNics {
    std::string recv, send;
};

// Collective over the communicator; identical graphs on every rank. *myNic:
// the NIC nearest this rank's GPU, "device:port" ("" when its host has none);
// ringNics: this rank's per ring of graphs->rings.
loomResult_t commTopology(int rank, int nranks, const std::vector<RankIdentity> &ids, const loomBootstrap_t *bs,
                          topo::Graphs *graphs, std::string *myNic, std::vector<RingNics> *ringNics);

} // namespace loom
