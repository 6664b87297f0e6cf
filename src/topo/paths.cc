#include "topo/paths.h"

#include <algorithm>

namespace loom {
namespace topo {

const char *pathTypeName(PathType t) {
    static const char *kNames[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NONE"};
    return kNames[(int)t];
}

Paths::Paths(const System &sys) : sys_(sys), n_(sys.nodes.size()), paths_(n_ * n_) {
    for (size_t i = 0; i < n_; ++i) {
        NodeType t = sys.nodes[i].type;
        if (t == NodeType::Gpu || t == NodeType::Nic) route((int)i);
    }
}

// Widest-path search from one GPU or NIC: maximise the bottleneck, then
// minimise hops; endpoints (GPUs, NICs) are never crossed.
void Paths::route(int from) {
    struct Best {
        double bw = -1;
        int hops = 0;
        int viaDlink = -1;
    };
    std::vector<Best> best(n_);
    std::vector<bool> done(n_, false);
    best[from].bw = 1e30;
    std::vector<std::vector<int>> adj(n_); // directed link ids leaving each node
    for (size_t l = 0; l < sys_.links.size(); ++l) {
        adj[sys_.links[l].a].push_back((int)(2 * l));
        adj[sys_.links[l].b].push_back((int)(2 * l + 1));
    }
    for (;;) {
        int u = -1;
        for (size_t i = 0; i < n_; ++i)
            if (!done[i] && best[i].bw >= 0 &&
                (u < 0 || best[i].bw > best[u].bw || (best[i].bw == best[u].bw && best[i].hops < best[u].hops)))
                u = (int)i;
        if (u < 0) break;
        done[u] = true;
        NodeType t = sys_.nodes[u].type;
        if (u != from && (t == NodeType::Gpu || t == NodeType::Nic)) continue; // endpoint: no transit
        for (int d : adj[u]) {
            const Link &l = sys_.links[d / 2];
            int v = d % 2 == 0 ? l.b : l.a;
            double bw = std::min(best[u].bw, l.bw);
            int hops = best[u].hops + 1;
            if (!done[v] && (bw > best[v].bw || (bw == best[v].bw && hops < best[v].hops)))
                best[v] = Best{bw, hops, d};
        }
    }
    for (size_t to = 0; to < n_; ++to) {
        Path &p = paths_[(size_t)from * n_ + to];
        if ((int)to == from) {
            p.type = PathType::Loc;
            p.bw = 1e30;
            continue;
        }
        if (best[to].bw < 0) continue; // unreachable: PathType::None
        p.bw = best[to].bw;
        for (int v = (int)to; v != from;) {
            int d = best[v].viaDlink;
            p.dlinks.push_back(d);
            const Link &l = sys_.links[d / 2];
            v = d % 2 == 0 ? l.a : l.b;
        }
        std::reverse(p.dlinks.begin(), p.dlinks.end());
        // Classify by what the route crosses.
        bool allNvl = true, sys = false;
        int cpus = 0, switches = 0;
        for (size_t k = 0; k < p.dlinks.size(); ++k) {
            const Link &l = sys_.links[p.dlinks[k] / 2];
            allNvl = allNvl && l.type == LinkType::NvLink;
            sys = sys || l.type == LinkType::Sys;
            if (k + 1 < p.dlinks.size()) { // intermediate node after this link
                int v = p.dlinks[k] % 2 == 0 ? l.b : l.a;
                cpus += sys_.nodes[v].type == NodeType::Cpu;
                switches += sys_.nodes[v].type == NodeType::Pci;
            }
        }
        p.type = allNvl ? PathType::Nvl
                 : sys ? PathType::Sys
                 : cpus ? PathType::Phb
                 : switches > 1 ? PathType::Pxb
                 : PathType::Pix;
    }
}

bool Paths::p2p(int a, int b) const {
    const Node &x = sys_.nodes[a], &y = sys_.nodes[b];
    if (x.host != y.host || !sys_.hosts[x.host].p2p) return false;
    PathType t = between(a, b).type;
    return t != PathType::None && t <= PathType::Phb;
}

} // namespace topo
} // namespace loom
