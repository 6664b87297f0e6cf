#include "core/comm/topology.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/bootstrap.h"
#include "base/debug.h"
#include "core/comm/params.h"
#include "device/ring/ring_args.h"
#include "topo/detect.h"
#include "topo/xml.h"

namespace loom {

namespace {

// This host's description, detected (or read from LOOM_TOPO_FILE) once per
// process: the machine does not change between communicators, and detection
// (hwloc, NVML, verbs) would otherwise be paid by every one of them.
const std::string &localSystem(std::string *notes) {
    static std::string xml, why;
    static std::once_flag once;
    std::call_once(once, [] { xml = topo::localSystemXml(&why); });
    *notes = why;
    return xml;
}

void dumpIfAsked(const char *env, const std::string &text) {
    const char *path = paramString(env);
    if (!path) return;
    if (topo::writeFile(path, text)) LOOM_INFO(kTopo, "wrote %s (%s)", path, env);
    else LOOM_WARN(kTopo, "cannot write %s (%s)", path, env);
}

} // namespace

loomResult_t commTopology(int rank, int nranks, const std::vector<RankIdentity> &ids, const loomBootstrap_t *bs,
                          topo::Graphs *graphs, std::string *myNic, std::vector<RingNics> *ringNics) {
    // The first rank of each host describes it.
    std::map<uint64_t, int> firstOfHost;
    for (int r = 0; r < nranks; ++r) firstOfHost.emplace(ids[r].hostHash, r);
    std::string notes, mine;
    if (firstOfHost[ids[rank].hostHash] == rank) mine = localSystem(&notes);
    std::vector<std::string> xml;
    loomResult_t gathered = allgatherStrings(bs, rank, nranks, mine, &xml);
    if (gathered != loomSuccess) return gathered;
    if (!notes.empty()) LOOM_INFO(kTopo, "rank %d: %s", rank, notes.c_str());

    topo::System sys;
    std::map<uint64_t, std::string> hostName; // host hash -> unique name in sys
    for (const auto &f : firstOfHost) {
        std::string err;
        size_t before = sys.hosts.size();
        if (!topo::parseSystemXml(xml[f.second], &sys, &err) || sys.hosts.size() != before + 1)
            return fail(loomInternalError, "rank %d: topology of rank %d unreadable: %s", rank, f.second, err.c_str());
        // Two machines may share a host name: keep them apart.
        for (size_t h = 0; h < before; ++h)
            if (sys.hosts[h].name == sys.hosts[before].name) sys.hosts[before].name += "#" + std::to_string(before);
        hostName[f.first] = sys.hosts[before].name;
    }
    sys.canonicalize();
    std::vector<std::string> hosts(nranks), bus(nranks);
    for (int r = 0; r < nranks; ++r) {
        hosts[r] = hostName[ids[r].hostHash];
        bus[r] = ids[r].busId;
    }
    topo::RankPlacement place;
    std::string err;
    if (!topo::placeRanks(sys, hosts, bus, &place, &err))
        return fail(loomInternalError, "rank %d: topology: %s", rank, err.c_str());
    topo::SearchParams sp;
    sp.channelBw = params().channelGBs;
    sp.maxChannels = kMaxChannels;
    *graphs = topo::searchGraphs(sys, place, sp);
    auto nicName = [&](int node) {
        return node < 0 ? "" : sys.nodes[node].id + ":" + std::to_string(sys.nodes[node].port);
    };
    *myNic = nicName(topo::closestNic(sys, topo::Paths(sys), place.gpuOfRank[rank]));
    ringNics->clear();
    for (const topo::Ring &ring : graphs->rings) {
        const bool known = (size_t)rank < ring.recvNicOf.size() && (size_t)rank < ring.sendNicOf.size();
        ringNics->push_back({known ? nicName(ring.recvNicOf[rank]) : "", known ? nicName(ring.sendNicOf[rank]) : ""});
    }

    if (rank == 0) {
        LOOM_INFO(kTopo, "system: %zu host(s), %zu nodes, %zu links", sys.hosts.size(), sys.nodes.size(),
                  sys.links.size());
        LOOM_INFO(kGraph, "%s", topo::describeGraphs(sys, *graphs).c_str());
        dumpIfAsked("LOOM_TOPO_DUMP_FILE", topo::systemToXml(sys));
        dumpIfAsked("LOOM_GRAPH_DUMP_FILE", topo::graphsToXml(*graphs));
    }
    return loomSuccess;
}

} // namespace loom
