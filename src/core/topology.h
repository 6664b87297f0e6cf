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
};

// Collective over the communicator; identical result on every rank. *myNic:
// the NIC nearest this rank's GPU, "device:port" ("" when its host has none).
loomResult_t commTopology(int rank, int nranks, const std::vector<RankIdentity> &ids, const loomBootstrap_t *bs,
                          topo::Graphs *graphs, std::string *myNic);

} // namespace loom
