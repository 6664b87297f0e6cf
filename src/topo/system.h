/*
 * The system graph: what loom knows about the machines of a communicator.
 * Nodes are CPUs (NUMA domains), PCI switches, GPUs, NICs and NVSwitches of
 * one or more hosts; links are typed (NVLink, PCI by generation and width,
 * CPU-to-CPU) and carry a bandwidth in GB/s each way. Hosts are joined by the
 * network through their NICs.
 *
 * Built by detection (detect.cc) or from XML (xml.cc); searched by search.cc.
 * topo knows no transport: it says which GPU pairs can use peer access, the
 * transports decide what to do with that.
 */
#pragma once

#include <string>
#include <vector>

namespace loom {
namespace topo {

enum class NodeType { Cpu, Pci, Gpu, Nic, NvSwitch };
enum class LinkType { NvLink, Pci, Sys };

const char *nodeTypeName(NodeType t);
const char *linkTypeName(LinkType t);

struct Node {
    NodeType type;
    int host;           // index into System::hosts
    std::string id;     // unique within its host ("gpu0", "mlx5_0", "cpu1", ...)
    std::string busId;  // PCI bus id, lower case "0000:18:00.0" (GPU, NIC, PCI switch)
    int numa = -1;      // CPU: NUMA node (-1: unknown)
    int cudaDev = -1;   // GPU: CUDA ordinal on its host
    int sm = 0;         // GPU: compute capability x 10
    double netGBs = 0;  // NIC: port speed x width in GB/s
    std::string linkLayer; // NIC: "ib" or "roce"
    int port = 1;       // NIC: port number
};

struct Link {
    int a, b;           // node indices; a link carries bw each way
    LinkType type;
    double bw;          // GB/s each way
    int count = 1;      // NVLink: links bundled here
};

struct Host {
    std::string name;
    bool p2p = true;    // false: GPUs of this host cannot use peer access (e.g. ACS, IOMMU)
};

struct System {
    std::vector<Host> hosts;
    std::vector<Node> nodes;
    std::vector<Link> links;

    int addHost(const std::string &name);
    int addNode(const Node &n);
    void addLink(int a, int b, LinkType type, double bw, int count = 1);
    int find(int host, const std::string &id) const; // -1 if absent
    int findBusId(int host, const std::string &busId) const;
    std::vector<int> gpus(int host) const;            // in bus id order
    std::vector<int> nics(int host) const;            // in bus id order
    // Sorts hosts by name and nodes by (host, type, bus id, id), so that the
    // same machines described in any order give the same system.
    void canonicalize();
};

// Bandwidth of one PCIe link (GB/s each way) and of one NVLink of a GPU generation.
double pciBandwidth(int gen, int width);
double nvlinkBandwidth(int sm);

// "0000:18:00.0" from any spelling ("18:00.0", upper case, 8-digit domain).
std::string normalizeBusId(const std::string &busId);

} // namespace topo
} // namespace loom
