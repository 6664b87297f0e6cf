#include "topo/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace loom {
namespace topo {

namespace {

constexpr int kExhaustiveMax = 9; // GPUs per host searched exhaustively (8! orders)
constexpr double kInf = 1e30;

// Routes of a sequence of hops, each directed link's bandwidth split by the
// number of routes that use it. Empty hops list: unlimited.
double sharedBandwidth(const Paths &paths, const std::vector<std::pair<int, int>> &hops) {
    std::map<int, int> uses;
    for (const auto &h : hops) {
        const Path &p = paths.between(h.first, h.second);
        if (p.type == PathType::None) return 0;
        for (int d : p.dlinks) ++uses[d];
    }
    double bw = kInf;
    for (const auto &u : uses) bw = std::min(bw, paths.dlinkBw(u.first) / u.second);
    return bw;
}

// Hosts' ranks, in rank order.
std::vector<std::vector<int>> ranksByHost(const System &sys, const RankPlacement &place) {
    std::vector<std::vector<int>> r(sys.hosts.size());
    for (size_t k = 0; k < place.gpuOfRank.size(); ++k) r[sys.nodes[place.gpuOfRank[k]].host].push_back((int)k);
    return r;
}

// Best order of `ranks` between fixed first and (optionally) fixed last rank,
// evaluated by score(order). Exhaustive up to kExhaustiveMax, else rank order.
template <typename Score>
std::vector<int> bestOrder(std::vector<int> ranks, int first, int last, Score score, double *bestBw) {
    std::vector<int> middle;
    for (int r : ranks)
        if (r != first && r != last) middle.push_back(r);
    std::sort(middle.begin(), middle.end());
    auto assemble = [&](const std::vector<int> &m) {
        std::vector<int> o{first};
        o.insert(o.end(), m.begin(), m.end());
        if (last >= 0 && last != first) o.push_back(last);
        return o;
    };
    std::vector<int> best = assemble(middle);
    *bestBw = score(best);
    if ((int)ranks.size() > kExhaustiveMax) return best;
    while (std::next_permutation(middle.begin(), middle.end())) {
        std::vector<int> o = assemble(middle);
        double bw = score(o);
        if (bw > *bestBw * (1 + 1e-9)) { // strictly better: ties keep the earlier (lexicographic) order
            *bestBw = bw;
            best = o;
        }
    }
    return best;
}

// Which of two routes is closer: better class (PIX before PHB: a shared switch
// beats a trip through the CPU even at equal bottleneck), then more bandwidth.
bool closer(const Path &p, const Path &q) { return p.type < q.type || (p.type == q.type && p.bw > q.bw); }

// GPU of `ranks` nearest to `nic`, not `except`; ties: lowest rank.
int nearestRank(const Paths &paths, const RankPlacement &place, const std::vector<int> &ranks, int nic, int except) {
    int best = -1;
    for (int r : ranks) {
        if (r == except) continue;
        if (best < 0) { best = r; continue; }
        if (closer(paths.between(place.gpuOfRank[r], nic), paths.between(place.gpuOfRank[best], nic))) best = r;
    }
    return best;
}

Ring singleHostRing(const Paths &paths, const RankPlacement &place, const std::vector<int> &ranks) {
    Ring ring;
    auto score = [&](const std::vector<int> &o) {
        if (o.size() < 2) return kInf;
        std::vector<std::pair<int, int>> hops;
        for (size_t i = 0; i < o.size(); ++i)
            hops.push_back({place.gpuOfRank[o[i]], place.gpuOfRank[o[(i + 1) % o.size()]]});
        return sharedBandwidth(paths, hops);
    };
    ring.ranks = bestOrder(ranks, ranks[0], -1, score, &ring.bw);
    ring.nicOfHost = {-1};
    ring.recvNicOf.assign(place.gpuOfRank.size(), -1);
    ring.sendNicOf.assign(place.gpuOfRank.size(), -1);
    return ring;
}

// Ring k over several hosts: each host's chain runs from the GPU nearest its
// entry NIC to the GPU nearest its exit NIC.
Ring multiHostRing(const System &sys, const Paths &paths, const RankPlacement &place,
                   const std::vector<std::vector<int>> &byHost, int k) {
    Ring ring;
    ring.bw = kInf;
    ring.recvNicOf.assign(place.gpuOfRank.size(), -1);
    ring.sendNicOf.assign(place.gpuOfRank.size(), -1);
    for (size_t h = 0; h < byHost.size(); ++h) {
        const std::vector<int> &ranks = byHost[h];
        if (ranks.empty()) continue;
        std::vector<int> nics = sys.nics((int)h);
        if (nics.empty()) { // no way off this host
            ring.bw = 0;
            ring.ranks.insert(ring.ranks.end(), ranks.begin(), ranks.end());
            ring.nicOfHost.push_back(-1);
            continue;
        }
        int nicIn = nics[k % nics.size()], nicOut = nics[(k + 1) % nics.size()];
        int entry = nearestRank(paths, place, ranks, nicIn, -1);
        int exit = ranks.size() > 1 ? nearestRank(paths, place, ranks, nicOut, entry) : entry;
        auto score = [&](const std::vector<int> &o) {
            std::vector<std::pair<int, int>> hops{{nicIn, place.gpuOfRank[o.front()]},
                                                  {place.gpuOfRank[o.back()], nicOut}};
            for (size_t i = 0; i + 1 < o.size(); ++i) hops.push_back({place.gpuOfRank[o[i]], place.gpuOfRank[o[i + 1]]});
            double bw = sharedBandwidth(paths, hops);
            return std::min({bw, sys.nodes[nicIn].netGBs, sys.nodes[nicOut].netGBs});
        };
        double bw;
        std::vector<int> chain = bestOrder(ranks, entry, exit, score, &bw);
        ring.bw = std::min(ring.bw, bw);
        ring.ranks.insert(ring.ranks.end(), chain.begin(), chain.end());
        ring.nicOfHost.push_back(nicIn);
        ring.recvNicOf[chain.front()] = nicIn;
        ring.sendNicOf[chain.back()] = nicOut;
    }
    return ring;
}

void chainTree(const std::vector<int> &order, Tree *t) {
    for (size_t i = 0; i < order.size(); ++i) {
        t->parent[order[i]] = i == 0 ? -1 : order[i - 1];
        if (i > 0) t->children[order[i - 1]].push_back(order[i]);
    }
}

// Host-level tree `hostParent`; each host is a chain in `ring` order from the
// rank where the ring enters it; host heads hang under their parent's head.
void hostTree(const Ring &ring, const std::vector<std::vector<int>> &byHost, const RankPlacement &place,
              const System &sys, const std::vector<int> &hostParent, Tree *t) {
    std::vector<std::vector<int>> chain(byHost.size());
    for (int r : ring.ranks) chain[sys.nodes[place.gpuOfRank[r]].host].push_back(r);
    std::vector<int> hosts; // hosts with ranks, in host order: tree positions
    for (size_t h = 0; h < byHost.size(); ++h)
        if (!byHost[h].empty()) hosts.push_back((int)h);
    for (size_t pos = 0; pos < hosts.size(); ++pos) {
        const std::vector<int> &c = chain[hosts[pos]];
        chainTree(c, t);
        int up = hostParent[pos];
        if (up >= 0) {
            int parentHead = chain[hosts[up]].front();
            t->parent[c.front()] = parentHead;
            t->children[parentHead].push_back(c.front());
        }
    }
}

} // namespace

bool placeRanks(const System &sys, const std::vector<std::string> &hosts, const std::vector<std::string> &busIds,
                RankPlacement *place, std::string *error) {
    place->gpuOfRank.assign(hosts.size(), -1);
    for (size_t r = 0; r < hosts.size(); ++r) {
        int h = -1;
        for (size_t k = 0; k < sys.hosts.size(); ++k)
            if (sys.hosts[k].name == hosts[r]) h = (int)k;
        int g = h < 0 ? -1 : sys.findBusId(h, busIds[r]);
        if (g < 0 || sys.nodes[g].type != NodeType::Gpu) {
            *error = "rank " + std::to_string(r) + ": no GPU " + busIds[r] + " on host " + hosts[r];
            return false;
        }
        place->gpuOfRank[r] = g;
    }
    return true;
}

double ringBandwidth(const Paths &paths, const std::vector<int> &cycle) {
    if (cycle.size() < 2) return kInf;
    std::vector<std::pair<int, int>> hops;
    for (size_t i = 0; i < cycle.size(); ++i) hops.push_back({cycle[i], cycle[(i + 1) % cycle.size()]});
    return sharedBandwidth(paths, hops);
}

// Positions p = 1..n; p's lowest set bit b gives its height. The parent is
// p with bit b cleared and bit 2b set, or, past n, with bit b cleared only.
// Odd positions (even indices) are the leaves, so a tree shifted by one has
// its interior nodes exactly where this one has leaves.
void binaryTree(int n, std::vector<int> *parent) {
    parent->assign(n, -1);
    for (int p = 1; p <= n; ++p) {
        int b = p & -p;
        int up = (p ^ b) | (b << 1);
        if (up > n) up = p ^ b;
        (*parent)[p - 1] = up == 0 ? -1 : up - 1;
    }
}

void complementaryTree(int n, std::vector<int> *parent) {
    std::vector<int> t0;
    binaryTree(n, &t0);
    parent->assign(n, -1);
    for (int i = 0; i < n; ++i) (*parent)[(i + 1) % n] = t0[i] < 0 ? -1 : (t0[i] + 1) % n;
}

Graphs searchGraphs(const System &sys, const RankPlacement &place, const SearchParams &params) {
    Graphs g;
    Paths paths(sys);
    const int nranks = (int)place.gpuOfRank.size();
    std::vector<std::vector<int>> byHost = ranksByHost(sys, place);
    int usedHosts = 0, rings = 1;
    for (size_t h = 0; h < byHost.size(); ++h)
        if (!byHost[h].empty()) {
            ++usedHosts;
            if (byHost.size() > 1) rings = std::max(rings, (int)sys.nics((int)h).size());
        }
    if (usedHosts > 1)
        for (size_t h = 0; h < byHost.size(); ++h)
            if (!byHost[h].empty()) rings = std::min(rings, std::max(1, (int)sys.nics((int)h).size()));

    for (int k = 0; k < rings; ++k) {
        if (usedHosts <= 1) {
            for (const auto &r : byHost)
                if (!r.empty()) g.rings.push_back(singleHostRing(paths, place, r));
            if (g.rings.empty()) g.rings.push_back(Ring{{}, kInf, {-1}, {}, {}});
            break;
        }
        g.rings.push_back(multiHostRing(sys, paths, place, byHost, k));
    }
    g.ringBw = kInf;
    for (const Ring &r : g.rings) g.ringBw = std::min(g.ringBw, r.bw);

    // Route classes and peer access between ring neighbours on one host.
    for (const Ring &r : g.rings)
        for (size_t i = 0; i < r.ranks.size() && r.ranks.size() > 1; ++i) {
            int a = place.gpuOfRank[r.ranks[i]], b = place.gpuOfRank[r.ranks[(i + 1) % r.ranks.size()]];
            if (sys.nodes[a].host != sys.nodes[b].host) continue;
            g.intraType = std::max(g.intraType, paths.between(a, b).type);
            g.p2pAll = g.p2pAll && paths.p2p(a, b);
        }

    // Channels: enough CTAs to move the ring bandwidth, a multiple of the rings.
    int nr = (int)g.rings.size();
    double total = g.ringBw >= kInf ? 0 : g.ringBw * nr;
    int ch = nranks <= 1 ? 1 : (int)std::ceil(total / params.channelBw - 1e-9);
    ch = std::max(ch, nr);
    ch = (ch + nr - 1) / nr * nr;
    g.channels = std::min(ch, std::max(nr, params.maxChannels / nr * nr));

    for (int t = 0; t < 2; ++t) {
        g.trees[t].parent.assign(nranks, -1);
        g.trees[t].children.assign(nranks, {});
        const Ring &ring = g.rings[t % nr];
        if (usedHosts <= 1) {
            chainTree(ring.ranks, &g.trees[t]);
            continue;
        }
        std::vector<int> hostParent;
        if (t == 0) binaryTree(usedHosts, &hostParent);
        else complementaryTree(usedHosts, &hostParent);
        hostTree(ring, byHost, place, sys, hostParent, &g.trees[t]);
    }
    return g;
}

int closestNic(const System &sys, const Paths &paths, int gpu) {
    int best = -1;
    for (int nic : sys.nics(sys.nodes[gpu].host)) { // bus id order: ties keep the first
        if (best < 0) { best = nic; continue; }
        if (closer(paths.between(gpu, nic), paths.between(gpu, best))) best = nic;
    }
    return best;
}

std::string graphsToXml(const Graphs &g) {
    std::ostringstream o;
    char bw[32];
    snprintf(bw, sizeof(bw), "%.2f", g.ringBw >= kInf ? 0.0 : g.ringBw);
    o << "<graphs channels=\"" << g.channels << "\" ringbw=\"" << bw << "\" intra=\"" << pathTypeName(g.intraType)
      << "\" p2p=\"" << (g.p2pAll ? 1 : 0) << "\">\n";
    for (size_t i = 0; i < g.rings.size(); ++i) {
        snprintf(bw, sizeof(bw), "%.2f", g.rings[i].bw >= kInf ? 0.0 : g.rings[i].bw);
        o << "  <ring id=\"" << i << "\" bw=\"" << bw << "\" ranks=\"";
        for (size_t k = 0; k < g.rings[i].ranks.size(); ++k) o << (k ? " " : "") << g.rings[i].ranks[k];
        o << "\"/>\n";
    }
    for (int t = 0; t < 2; ++t) {
        o << "  <tree id=\"" << t << "\" parents=\"";
        for (size_t k = 0; k < g.trees[t].parent.size(); ++k) o << (k ? " " : "") << g.trees[t].parent[k];
        o << "\"/>\n";
    }
    o << "</graphs>\n";
    return o.str();
}

std::string describeGraphs(const System &sys, const Graphs &g) {
    std::ostringstream o;
    o << sys.hosts.size() << " host(s); " << g.rings.size() << " ring(s), " << g.channels << " channels, ring bw "
      << (g.ringBw >= kInf ? 0.0 : g.ringBw) << " GB/s, routes " << pathTypeName(g.intraType)
      << (g.p2pAll ? ", peer access" : ", no peer access");
    for (size_t i = 0; i < g.rings.size() && i < 4; ++i) {
        o << "\n  ring " << i << ":";
        for (int r : g.rings[i].ranks) o << " " << r;
    }
    for (int t = 0; t < 2; ++t) {
        o << "\n  tree " << t << " parents:";
        for (int p : g.trees[t].parent) o << " " << p;
    }
    return o.str();
}

} // namespace topo
} // namespace loom
