#include "topo/system.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <tuple>

namespace loom {
namespace topo {

const char *nodeTypeName(NodeType t) {
    switch (t) {
    case NodeType::Cpu: return "cpu";
    case NodeType::Pci: return "pci";
    case NodeType::Gpu: return "gpu";
    case NodeType::Nic: return "nic";
    case NodeType::NvSwitch: return "nvswitch";
    }
    return "?";
}

const char *linkTypeName(LinkType t) {
    switch (t) {
    case LinkType::NvLink: return "nvlink";
    case LinkType::Pci: return "pci";
    case LinkType::Sys: return "sys";
    }
    return "?";
}

double pciBandwidth(int gen, int width) {
    // Per lane and direction, after line encoding.
    static const double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
    if (gen < 1) gen = 4; // unknown: assume Gen4
    if (gen > 6) gen = 6;
    if (width < 1) width = 16;
    return kLane[gen] * width;
}

double nvlinkBandwidth(int sm) {
    if (sm >= 100) return 50.0;  // NVLink 5
    if (sm >= 90) return 26.56;  // NVLink 4 (Hopper): 18 links = 478 GB/s
    if (sm >= 80) return 25.0;   // NVLink 3
    if (sm >= 70) return 25.0;   // NVLink 2 (Volta)
    return 20.0;
}

std::string normalizeBusId(const std::string &in) {
    std::string s;
    for (char c : in) s += (char)tolower((unsigned char)c);
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (sscanf(s.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4 ||
        (sscanf(s.c_str(), "%x:%x.%x", &bus, &dev, &fn) == 3 && (dom = 0, true))) {
        char out[32];
        snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", dom & 0xffff, bus, dev, fn);
        return out;
    }
    return s;
}

int System::addHost(const std::string &name) {
    hosts.push_back(Host{name, true});
    return (int)hosts.size() - 1;
}

int System::addNode(const Node &n) {
    nodes.push_back(n);
    if (!nodes.back().busId.empty()) nodes.back().busId = normalizeBusId(nodes.back().busId);
    return (int)nodes.size() - 1;
}

void System::addLink(int a, int b, LinkType type, double bw, int count) {
    links.push_back(Link{a, b, type, bw, count});
}

int System::find(int host, const std::string &id) const {
    for (size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].host == host && nodes[i].id == id) return (int)i;
    return -1;
}

int System::findBusId(int host, const std::string &busId) const {
    std::string b = normalizeBusId(busId);
    for (size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].host == host && nodes[i].busId == b) return (int)i;
    return -1;
}

static std::vector<int> ofType(const System &s, int host, NodeType t) {
    std::vector<int> v;
    for (size_t i = 0; i < s.nodes.size(); ++i)
        if (s.nodes[i].host == host && s.nodes[i].type == t) v.push_back((int)i);
    std::sort(v.begin(), v.end(), [&](int a, int b) {
        return std::tie(s.nodes[a].busId, s.nodes[a].id) < std::tie(s.nodes[b].busId, s.nodes[b].id);
    });
    return v;
}

std::vector<int> System::gpus(int host) const { return ofType(*this, host, NodeType::Gpu); }
std::vector<int> System::nics(int host) const { return ofType(*this, host, NodeType::Nic); }

void System::canonicalize() {
    std::vector<int> hostOrder(hosts.size());
    for (size_t i = 0; i < hosts.size(); ++i) hostOrder[i] = (int)i;
    std::sort(hostOrder.begin(), hostOrder.end(), [&](int a, int b) { return hosts[a].name < hosts[b].name; });
    std::vector<int> newHost(hosts.size());
    std::vector<Host> h;
    for (size_t i = 0; i < hostOrder.size(); ++i) {
        newHost[hostOrder[i]] = (int)i;
        h.push_back(hosts[hostOrder[i]]);
    }
    hosts = h;
    for (Node &n : nodes) n.host = newHost[n.host];

    std::vector<int> order(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) order[i] = (int)i;
    auto key = [&](int i) { return std::make_tuple(nodes[i].host, (int)nodes[i].type, nodes[i].busId, nodes[i].id); };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
    std::vector<int> newIndex(nodes.size());
    std::vector<Node> sorted;
    for (size_t i = 0; i < order.size(); ++i) {
        newIndex[order[i]] = (int)i;
        sorted.push_back(nodes[order[i]]);
    }
    nodes = sorted;
    for (Link &l : links) {
        l.a = newIndex[l.a];
        l.b = newIndex[l.b];
        if (l.a > l.b) std::swap(l.a, l.b);
    }
    std::sort(links.begin(), links.end(), [](const Link &x, const Link &y) {
        return std::make_tuple(x.a, x.b, (int)x.type) < std::make_tuple(y.a, y.b, (int)y.type);
    });
}

} // namespace topo
} // namespace loom
