#include "topo/detect.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <hwloc.h>
#include <infiniband/verbs.h>
#include <map>
#include <unistd.h>

#include <cuda_runtime.h>

#include "topo/xml.h"
#include "base/param_read.h"

namespace loom {
namespace topo {

namespace {

std::string hostName() {
    char h[256] = "localhost";
    gethostname(h, sizeof(h) - 1);
    return h;
}

void addGpus(System *sys, int host, std::string *notes) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        *notes += "no CUDA devices visible\n";
        return;
    }
    for (int d = 0; d < n; ++d) {
        char bus[32] = "";
        int major = 0, minor = 0;
        cudaDeviceGetPCIBusId(bus, sizeof(bus), d);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
        Node g;
        g.type = NodeType::Gpu;
        g.host = host;
        g.id = "gpu" + std::to_string(d);
        g.busId = bus;
        g.cudaDev = d;
        g.sm = major * 10 + minor;
        sys->addNode(g);
    }
}

// --- NICs through libibverbs (dlopen) -------------------------------------
struct Verbs {
    ibv_device **(*getList)(int *);
    void (*freeList)(ibv_device **);
    const char *(*name)(ibv_device *);
    ibv_context *(*open)(ibv_device *);
    int (*close)(ibv_context *);
    int (*queryDevice)(ibv_context *, ibv_device_attr *);
    int (*queryPort)(ibv_context *, uint8_t, ibv_port_attr *);
};

double laneGbps(int speed) {
    switch (speed) {
    case 1: return 2.5;
    case 2: return 5;
    case 4: case 8: return 10;
    case 16: return 14;
    case 32: return 25;
    case 64: return 50;
    case 128: return 100;
    case 256: return 200;
    default: return 0;
    }
}
int laneCount(int width) {
    switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
    }
}

void addNics(System *sys, int host, std::string *notes) {
    void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *notes += "no libibverbs.so.1: no NICs\n";
        return;
    }
    Verbs v;
    *(void **)&v.getList = dlsym(lib, "ibv_get_device_list");
    *(void **)&v.freeList = dlsym(lib, "ibv_free_device_list");
    *(void **)&v.name = dlsym(lib, "ibv_get_device_name");
    *(void **)&v.open = dlsym(lib, "ibv_open_device");
    *(void **)&v.close = dlsym(lib, "ibv_close_device");
    *(void **)&v.queryDevice = dlsym(lib, "ibv_query_device");
    *(void **)&v.queryPort = dlsym(lib, "ibv_query_port");
    if (!v.getList || !v.freeList || !v.name || !v.open || !v.close || !v.queryDevice || !v.queryPort) {
        *notes += "libibverbs lacks a needed symbol: no NICs\n";
        return;
    }
    int n = 0;
    ibv_device **list = v.getList(&n);
    for (int i = 0; list && i < n; ++i) {
        const char *name = v.name(list[i]);
        ibv_context *ctx = v.open(list[i]);
        if (!ctx) continue;
        ibv_device_attr da;
        if (v.queryDevice(ctx, &da) == 0) {
            for (int port = 1; port <= da.phys_port_cnt; ++port) {
                ibv_port_attr pa;
                memset(&pa, 0, sizeof(pa));
                if (v.queryPort(ctx, (uint8_t)port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
                char link[PATH_MAX], real[PATH_MAX];
                snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", name);
                Node nic;
                nic.type = NodeType::Nic;
                nic.host = host;
                nic.id = std::string(name) + (da.phys_port_cnt > 1 ? ":" + std::to_string(port) : "");
                if (realpath(link, real)) nic.busId = strrchr(real, '/') + 1;
                nic.netGBs = laneGbps(pa.active_speed) * laneCount(pa.active_width) / 8.0;
                nic.linkLayer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "ib";
                nic.port = port;
                sys->addNode(nic);
            }
        }
        v.close(ctx);
    }
    if (list) v.freeList(list);
    if (sys->nics(host).empty()) *notes += "no active RDMA ports\n";
}

// --- NVLinks through NVML (dlopen) -----------------------------------------
struct NvmlPciInfo { // nvmlPciInfo_t
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
};
typedef struct NvmlDevice *NvmlDev;

void addNvlinks(System *sys, int host, std::string *notes) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *notes += "no libnvidia-ml.so.1: NVLinks unknown\n";
        return;
    }
    int (*init)() = (int (*)())dlsym(lib, "nvmlInit_v2");
    int (*byBus)(const char *, NvmlDev *) = (int (*)(const char *, NvmlDev *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*state)(NvmlDev, unsigned, int *) = (int (*)(NvmlDev, unsigned, int *))dlsym(lib, "nvmlDeviceGetNvLinkState");
    int (*remote)(NvmlDev, unsigned, NvmlPciInfo *) =
        (int (*)(NvmlDev, unsigned, NvmlPciInfo *))dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    int (*remoteType)(NvmlDev, unsigned, int *) = (int (*)(NvmlDev, unsigned, int *))dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
    if (!init || !byBus || !state || !remote || init() != 0) {
        *notes += "NVML unusable: NVLinks unknown\n";
        return;
    }
    const int kMaxLinks = 18, kRemoteGpu = 0;
    std::map<std::pair<int, int>, int> links; // (node, node or -1 = NVSwitch) -> count
    for (int g : sys->gpus(host)) {
        NvmlDev dev;
        if (byBus(sys->nodes[g].busId.c_str(), &dev) != 0) continue;
        for (unsigned l = 0; l < (unsigned)kMaxLinks; ++l) {
            int active = 0;
            if (state(dev, l, &active) != 0 || !active) continue;
            NvmlPciInfo pci;
            memset(&pci, 0, sizeof(pci));
            int type = -1;
            if (remoteType) remoteType(dev, l, &type);
            int peer = -1;
            if (remote(dev, l, &pci) == 0 && (type == kRemoteGpu || type < 0)) {
                char bus[32];
                snprintf(bus, sizeof(bus), "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
                peer = sys->findBusId(host, bus);
                if (peer >= 0 && sys->nodes[peer].type != NodeType::Gpu) peer = -1;
            }
            if (peer >= 0 && peer < g) continue; // the pair is counted from its lower end
            ++links[{g, peer}];
        }
    }
    int nvs = -1;
    for (const auto &l : links) {
        int a = l.first.first, b = l.first.second;
        if (b < 0) {
            if (nvs < 0) {
                Node s;
                s.type = NodeType::NvSwitch;
                s.host = host;
                s.id = "nvs";
                nvs = sys->addNode(s);
            }
            b = nvs;
        }
        sys->addLink(a, b, LinkType::NvLink, l.second * nvlinkBandwidth(sys->nodes[a].sm), l.second);
    }
    if (links.empty()) *notes += "no active NVLinks\n";
}

// --- PCI tree and CPUs through hwloc ----------------------------------------
// Attaches every GPU and NIC: to the top-most PCI bridge below the host bridge
// (a switch; nested switches are merged) or, without one, to its CPU.
void addPciTree(System *sys, int host, std::string *notes) {
    hwloc_topology_t topo;
    bool ok = hwloc_topology_init(&topo) == 0;
    ok = ok && hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) == 0;
    ok = ok && hwloc_topology_load(topo) == 0;
    std::map<std::string, int> cpus, switches;
    auto cpuNode = [&](int numa) {
        std::string id = "cpu" + std::to_string(numa < 0 ? 0 : numa);
        auto it = cpus.find(id);
        if (it != cpus.end()) return it->second;
        Node c;
        c.type = NodeType::Cpu;
        c.host = host;
        c.id = id;
        c.numa = numa;
        return cpus[id] = sys->addNode(c);
    };
    std::vector<int> devices = sys->gpus(host);
    for (int n : sys->nics(host)) devices.push_back(n);
    int unplaced = 0;
    for (int d : devices) {
        Node &dev = sys->nodes[d];
        unsigned dom = 0, bus = 0, dv = 0, fn = 0;
        hwloc_obj_t obj = nullptr;
        if (ok && sscanf(dev.busId.c_str(), "%x:%x:%x.%x", &dom, &bus, &dv, &fn) == 4)
            obj = hwloc_get_pcidev_by_busid(topo, dom, bus, dv, fn);
        double bw = 0;
        int gen = dev.sm >= 90 ? 5 : 4; // unknown link speed: what such a GPU has
        if (obj && obj->attr && obj->attr->pcidev.linkspeed > 0) bw = obj->attr->pcidev.linkspeed;
        if (bw <= 0) bw = pciBandwidth(gen, 16);
        int numa = -1;
        hwloc_obj_t top = nullptr; // top-most PCI-PCI bridge
        if (obj) {
            for (hwloc_obj_t p = obj->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
                if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) top = p;
            hwloc_obj_t cpu = hwloc_get_non_io_ancestor_obj(topo, obj);
            if (cpu && cpu->nodeset && cpu->type != HWLOC_OBJ_MACHINE) numa = hwloc_bitmap_first(cpu->nodeset);
        } else {
            ++unplaced;
        }
        int parent = cpuNode(numa);
        if (top) {
            char id[32];
            snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", top->attr->pcidev.domain, top->attr->pcidev.bus,
                     top->attr->pcidev.dev, top->attr->pcidev.func);
            auto it = switches.find(id);
            if (it == switches.end()) {
                Node s;
                s.type = NodeType::Pci;
                s.host = host;
                s.id = std::string("sw") + std::to_string(switches.size());
                s.busId = id;
                int sn = sys->addNode(s);
                switches[id] = sn;
                double up = top->attr->pcidev.linkspeed > 0 ? top->attr->pcidev.linkspeed : pciBandwidth(gen, 16);
                sys->addLink(parent, sn, LinkType::Pci, up);
                it = switches.find(id);
            }
            parent = it->second;
        }
        sys->addLink(parent, d, LinkType::Pci, bw);
    }
    if (cpus.empty()) cpuNode(-1);
    for (auto a = cpus.begin(); a != cpus.end(); ++a)
        for (auto b = std::next(a); b != cpus.end(); ++b) sys->addLink(a->second, b->second, LinkType::Sys, 40.0);
    if (!ok) *notes += "hwloc could not load the topology: PCI tree unknown\n";
    else if (unplaced) *notes += std::to_string(unplaced) + " device(s) not in hwloc's PCI tree: attached to the CPU\n";
    if (ok) hwloc_topology_destroy(topo);
}

} // namespace

System detectLocalSystem(std::string *notes) {
    System sys;
    int host = sys.addHost(hostName());
    addGpus(&sys, host, notes);
    addNics(&sys, host, notes);
    addPciTree(&sys, host, notes);
    addNvlinks(&sys, host, notes);
    sys.canonicalize();
    return sys;
}

std::string localSystemXml(std::string *notes) {
    const char *file = paramString("LOOM_TOPO_FILE");
    if (file && *file) {
        std::string text, err;
        System all;
        if (!readFile(file, &text) || !parseSystemXml(text, &all, &err)) {
            *notes += std::string("LOOM_TOPO_FILE ") + file + " unusable (" + (err.empty() ? "cannot read" : err) +
                      "): detecting instead\n";
        } else if (!all.hosts.empty()) {
            // Keep one host: the one named like this machine, else the first.
            int keep = 0;
            for (size_t h = 0; h < all.hosts.size(); ++h)
                if (all.hosts[h].name == hostName()) keep = (int)h;
            System one;
            one.addHost(hostName());
            one.hosts[0].p2p = all.hosts[keep].p2p;
            std::vector<int> map(all.nodes.size(), -1);
            for (size_t i = 0; i < all.nodes.size(); ++i)
                if (all.nodes[i].host == keep) {
                    Node n = all.nodes[i];
                    n.host = 0;
                    map[i] = one.addNode(n);
                }
            for (const Link &l : all.links)
                if (map[l.a] >= 0 && map[l.b] >= 0) one.addLink(map[l.a], map[l.b], l.type, l.bw, l.count);
            *notes += std::string("topology from LOOM_TOPO_FILE ") + file + "\n";
            return systemToXml(one);
        }
    }
    return systemToXml(detectLocalSystem(notes));
}

} // namespace topo
} // namespace loom
