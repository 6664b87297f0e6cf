/*
 * Ring and tree search over the system graph.
 *
 * Rings: inside a host, the cyclic order of its GPUs whose routes give the
 * highest bandwidth once routes that share a directed link split it (a PCIe
 * box with two switches crosses the host bridge once per direction).
 * Across hosts, rings go host by host (hosts in name order); ring c enters a
 * host at the GPU closest to NIC c and leaves at the GPU closest to the next
 * NIC, so consecutive rings use different NICs. Trees: a double binary tree
 * over hosts (two complementary trees; every host interior in at most one),
 * chains of GPUs inside a host. Channels follow the ring bandwidth.
 *
 * Deterministic: the same system and rank placement, given in any order,
 * give the same graphs (ties are broken by rank order).
 */
#pragma once

#include <string>
#include <vector>

#include "topo/paths.h"
#include "topo/system.h"

namespace loom {
namespace topo {

// Where rank r's GPU is: a node index of the system (a GPU node).
struct RankPlacement {
    std::vector<int> gpuOfRank;
};

// Rank r's GPU is the GPU with PCI bus id busIds[r] on the host named hosts[r].
bool placeRanks(const System &sys, const std::vector<std::string> &hosts, const std::vector<std::string> &busIds,
                RankPlacement *place, std::string *error);

struct Ring {
    std::vector<int> ranks; // ring order (one host: from the lowest rank; several: from host 0's entry)
    double bw = 0;          // GB/s each way this ring can move
    std::vector<int> nicOfHost; // per host: NIC node used (-1 on a single host)
    // Per rank: the NIC node it receives on where the ring enters its host,
    // and the one it sends on where the ring leaves it (-1: none).
    std::vector<int> recvNicOf, sendNicOf;
};

struct Tree {
    std::vector<int> parent;                // per rank, -1 at the root
    std::vector<std::vector<int>> children; // per rank
};

struct SearchParams {
    double channelBw = 7.5; // GB/s one channel (one CTA) moves; sets the channel count
    int maxChannels = 64;
};

struct Graphs {
    std::vector<Ring> rings; // distinct rings; channel c uses rings[c % rings.size()]
    int channels = 1;
    double ringBw = 0;       // bottleneck of the rings
    PathType intraType = PathType::Loc; // worst route type inside a host
    bool p2pAll = true;      // every intra-host ring neighbour pair can use peer access
    Tree trees[2];
};

Graphs searchGraphs(const System &sys, const RankPlacement &place, const SearchParams &params);

// Bandwidth of a cyclic order of GPU nodes of one host, with route sharing.
double ringBandwidth(const Paths &paths, const std::vector<int> &gpuCycle);

// Binary tree over n positions: parent[i] (-1 at the root); even indices are
// leaves, so the complementary tree's interior nodes are this tree's leaves.
void binaryTree(int n, std::vector<int> *parent);
// The complementary tree: shifted by one (n even) or mirrored (n odd).
void complementaryTree(int n, std::vector<int> *parent);

// The NIC a GPU should use: best route class (PIX before PHB before SYS), then
// bandwidth, then bus id. -1 when its host has no NIC.
int closestNic(const System &sys, const Paths &paths, int gpu);

std::string graphsToXml(const Graphs &g);
std::string describeGraphs(const System &sys, const Graphs &g); // a few readable lines

} // namespace topo
} // namespace loom
