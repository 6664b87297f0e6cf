/*
 * Paths inside a host: for every GPU pair and GPU-NIC pair, the route with
 * the largest bottleneck bandwidth, as the directed links it uses (so that a
 * ring's routes can be checked for sharing) and a class in the usual
 * vocabulary: NVL (NVLink, direct or through NVSwitch), PIX (one PCI switch),
 * PXB (several switches), PHB (through a CPU's host bridge), SYS (across CPUs).
 * Routes never pass through another GPU or NIC.
 */
#pragma once

#include <string>
#include <vector>

#include "topo/system.h"

namespace loom {
namespace topo {

enum class PathType { Loc = 0, Nvl = 1, Pix = 2, Pxb = 3, Phb = 4, Sys = 5, None = 6 };
const char *pathTypeName(PathType t);

struct Path {
    PathType type = PathType::None;
    double bw = 0;              // bottleneck, GB/s each way
    std::vector<int> dlinks;    // directed links: 2 * link index + (0: a->b, 1: b->a)
};

class Paths {
  public:
    explicit Paths(const System &sys);
    // Route between two nodes of one host (GPUs or GPU and NIC).
    const Path &between(int from, int to) const { return paths_[(size_t)from * n_ + to]; }
    // Can the two GPUs use peer access (same host, host allows it, not across CPUs)?
    bool p2p(int gpuA, int gpuB) const;
    // Bandwidth of a directed link.
    double dlinkBw(int dlink) const { return sys_.links[dlink / 2].bw; }

  private:
    void route(int from);
    const System &sys_;
    size_t n_;
    std::vector<Path> paths_;
};

} // namespace topo
} // namespace loom
