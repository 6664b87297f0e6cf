// Topology: XML fixtures of machines (contrib/topo), routes, ring and tree
// search, determinism under reordered input.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "topo/detect.h"
#include "topo/paths.h"
#include "topo/search.h"
#include "topo/xml.h"
#include "unit_suites.h"

using namespace loom::topo;

namespace {

System load(const char *name) {
    std::string text, err;
    std::string path = std::string(LOOM_TOPO_FIXTURES) + "/" + name;
    ck_assert_msg(readFile(path, &text), "cannot read %s", path.c_str());
    System sys;
    ck_assert_msg(parseSystemXml(text, &sys, &err), "%s: %s", name, err.c_str());
    sys.canonicalize();
    return sys;
}

// One rank per GPU, hosts in name order, GPUs in bus id order.
RankPlacement onePerGpu(const System &sys) {
    RankPlacement p;
    for (size_t h = 0; h < sys.hosts.size(); ++h)
        for (int g : sys.gpus((int)h)) p.gpuOfRank.push_back(g);
    return p;
}

int gpu(const System &sys, int host, const char *id) { return sys.find(host, id); }
bool near(double a, double b) { return std::fabs(a - b) < 0.01 * std::max(1.0, std::fabs(b)); }
std::vector<int> v(std::initializer_list<int> l) { return l; }

} // namespace

START_TEST(xml_round_trip_and_errors) {
    System a = load("dgx_h100_8gpu_8nic.xml");
    std::string x1 = systemToXml(a), err;
    System b;
    ck_assert(parseSystemXml(x1, &b, &err));
    b.canonicalize();
    std::string x2 = systemToXml(b);
    ck_assert_str_eq(x2.c_str(), x1.c_str());
    ck_assert_int_eq((int)a.gpus(0).size(), 8);
    ck_assert_int_eq((int)a.nics(0).size(), 8);
    System c;
    ck_assert(!parseSystemXml("<system><host name=\"x\"><gpu busid=\"1\"/></host></system>", &c, &err));
    ck_assert(err.find("without id") != std::string::npos);
    ck_assert(!parseSystemXml("<system><host name=\"x\"><cpu id=\"c\"/><link a=\"c\" b=\"zz\" type=\"pci\"/></host></system>",
                              &c, &err));
    ck_assert(err.find("unknown node") != std::string::npos);
    ck_assert(!parseSystemXml("<system><host name=\"x\"><cpu id=\"c\"", &c, &err));
    ck_assert(normalizeBusId("00000000:3B:00.0") == "0000:3b:00.0");
    ck_assert(normalizeBusId("3b:00.0") == "0000:3b:00.0");
}
END_TEST

START_TEST(pcie_box_routes_and_ring) {
    System sys = load("pcie_4gpu_2switch.xml");
    Paths paths(sys);
    int g0 = gpu(sys, 0, "gpu0"), g1 = gpu(sys, 0, "gpu1"), g2 = gpu(sys, 0, "gpu2"), g3 = gpu(sys, 0, "gpu3");
    ck_assert_int_eq((int)paths.between(g0, g1).type, (int)PathType::Pix);
    ck_assert_int_eq((int)paths.between(g1, g2).type, (int)PathType::Phb);
    ck_assert(near(paths.between(g0, g1).bw, pciBandwidth(4, 16)));
    // Crossing the host bridge once per direction keeps the full bandwidth;
    // an order that crosses twice per direction halves it.
    ck_assert(near(ringBandwidth(paths, v({g0, g1, g2, g3})), pciBandwidth(4, 16)));
    ck_assert(near(ringBandwidth(paths, v({g0, g2, g1, g3})), pciBandwidth(4, 16) / 2));
    Graphs g = searchGraphs(sys, onePerGpu(sys), SearchParams());
    ck_assert(g.rings[0].ranks == v({0, 1, 2, 3}));
    ck_assert(near(g.ringBw, pciBandwidth(4, 16)));
    ck_assert_int_eq(g.channels, 5); // 31.5 GB/s / 7.5 GB/s per channel
    ck_assert_int_eq((int)g.intraType, (int)PathType::Phb);
    ck_assert(g.p2pAll);
}
END_TEST

START_TEST(pcie_box_rank_order_does_not_fool_the_search) {
    // Ranks placed so that rank order alternates switches: the ring must not.
    System sys = load("pcie_4gpu_2switch.xml");
    RankPlacement p;
    p.gpuOfRank = {gpu(sys, 0, "gpu0"), gpu(sys, 0, "gpu2"), gpu(sys, 0, "gpu1"), gpu(sys, 0, "gpu3")};
    Graphs g = searchGraphs(sys, p, SearchParams());
    ck_assert(near(g.ringBw, pciBandwidth(4, 16)));
    ck_assert(g.rings[0].ranks != v({0, 1, 2, 3})); // rank order would cross the bridge twice per direction
    std::vector<int> cycle;
    for (int r : g.rings[0].ranks) cycle.push_back(p.gpuOfRank[r]);
    ck_assert(near(ringBandwidth(Paths(sys), cycle), pciBandwidth(4, 16)));
}
END_TEST

START_TEST(nvswitch_node_uses_all_links) {
    System sys = load("dgx_h100_8gpu_8nic.xml");
    Paths paths(sys);
    int g0 = gpu(sys, 0, "gpu0"), g5 = gpu(sys, 0, "gpu5"), n0 = sys.find(0, "mlx5_0"), n5 = sys.find(0, "mlx5_5");
    ck_assert_int_eq((int)paths.between(g0, g5).type, (int)PathType::Nvl);
    ck_assert(near(paths.between(g0, g5).bw, 18 * 26.56));
    ck_assert_int_eq((int)paths.between(g0, n0).type, (int)PathType::Pix);
    ck_assert_int_eq((int)paths.between(g0, n5).type, (int)PathType::Sys);
    Graphs g = searchGraphs(sys, onePerGpu(sys), SearchParams());
    ck_assert(g.rings[0].ranks == v({0, 1, 2, 3, 4, 5, 6, 7}));
    ck_assert(near(g.ringBw, 18 * 26.56));
    ck_assert_int_eq(g.channels, 64);
    ck_assert_int_eq((int)g.intraType, (int)PathType::Nvl);
    ck_assert(g.trees[0].parent == v({-1, 0, 1, 2, 3, 4, 5, 6})); // a chain inside one node
}
END_TEST

START_TEST(test_host_vm) {
    // The hand-written fixture and what detection wrote on the 4x H200 test host.
    for (const char *f : {"vm_4gpu_nv18.xml", "detected_h200x4_vm.xml"}) {
        System sys = load(f);
        Graphs g = searchGraphs(sys, onePerGpu(sys), SearchParams());
        ck_assert(g.rings[0].ranks == v({0, 1, 2, 3}));
        ck_assert(near(g.ringBw, 478.08));
        ck_assert_int_eq(g.channels, 64);
        ck_assert(g.p2pAll);
    }
}
END_TEST

START_TEST(two_nodes_rings_enter_and_leave_near_nics) {
    System sys = load("two_nodes_4gpu_2nic.xml");
    Paths paths(sys);
    Graphs g = searchGraphs(sys, onePerGpu(sys), SearchParams());
    ck_assert_int_eq((int)g.rings.size(), 2); // one per NIC
    ck_assert(near(g.ringBw, 25.0));          // 200 Gb/s NICs
    ck_assert_int_eq(g.channels, 8);
    RankPlacement p = onePerGpu(sys);
    for (size_t k = 0; k < g.rings.size(); ++k) {
        const Ring &r = g.rings[k];
        ck_assert_int_eq((int)r.ranks.size(), 8);
        for (int h = 0; h < 2; ++h) { // per host: first and last rank sit beside a NIC
            std::vector<int> nics = sys.nics(h);
            int first = r.ranks[4 * h], last = r.ranks[4 * h + 3];
            ck_assert_int_eq((int)paths.between(p.gpuOfRank[first], nics[k % 2]).type, (int)PathType::Pix);
            ck_assert_int_eq((int)paths.between(p.gpuOfRank[last], nics[(k + 1) % 2]).type, (int)PathType::Pix);
            // The ranks where the ring crosses hosts are told which NIC to
            // use (core connects ring k's net links on them); nobody else is.
            ck_assert_int_eq(r.recvNicOf[first], nics[k % 2]);
            ck_assert_int_eq(r.sendNicOf[last], nics[(k + 1) % 2]);
            for (int i = 4 * h + 1; i < 4 * h + 4; ++i) ck_assert_int_eq(r.recvNicOf[r.ranks[i]], -1);
            for (int i = 4 * h; i < 4 * h + 3; ++i) ck_assert_int_eq(r.sendNicOf[r.ranks[i]], -1);
        }
    }
    ck_assert(g.rings[0].ranks != g.rings[1].ranks);
    // Double binary tree over the two hosts: each host's head is the root of one tree.
    int roots0 = 0, roots1 = 0;
    for (int r = 0; r < 8; ++r) {
        roots0 += g.trees[0].parent[r] < 0;
        roots1 += g.trees[1].parent[r] < 0;
    }
    ck_assert_int_eq(roots0, 1);
    ck_assert_int_eq(roots1, 1);
    int root0 = (int)(std::find(g.trees[0].parent.begin(), g.trees[0].parent.end(), -1) - g.trees[0].parent.begin());
    int root1 = (int)(std::find(g.trees[1].parent.begin(), g.trees[1].parent.end(), -1) - g.trees[1].parent.begin());
    ck_assert_int_ne(root0 / 4, root1 / 4);
}
END_TEST

START_TEST(single_gpu_and_no_p2p) {
    System solo = load("single_gpu.xml");
    Graphs g = searchGraphs(solo, onePerGpu(solo), SearchParams());
    ck_assert(g.rings[0].ranks == v({0}));
    ck_assert_int_eq(g.channels, 1);
    System np = load("no_p2p_2socket.xml");
    Graphs h = searchGraphs(np, onePerGpu(np), SearchParams());
    ck_assert(!h.p2pAll);
    ck_assert_int_eq((int)h.intraType, (int)PathType::Sys);
    ck_assert(h.rings[0].ranks == v({0, 1, 2, 3})); // crosses the sockets once per direction
    ck_assert(near(h.ringBw, 20.0));
}
END_TEST

START_TEST(reordered_input_gives_identical_graphs) {
    std::string text, err;
    ck_assert(readFile(std::string(LOOM_TOPO_FIXTURES) + "/two_nodes_4gpu_2nic.xml", &text));
    // Reverse the element lines inside each host and swap the hosts.
    std::vector<std::string> lines, hostA, hostB;
    size_t at = 0;
    while (at < text.size()) {
        size_t e = text.find('\n', at);
        lines.push_back(text.substr(at, e - at));
        at = e + 1;
    }
    std::vector<std::string> *cur = nullptr;
    for (const std::string &l : lines) {
        if (l.find("<host name=\"node0\"") != std::string::npos) cur = &hostA;
        if (l.find("<host name=\"node1\"") != std::string::npos) cur = &hostB;
        if (cur) cur->push_back(l);
        if (l.find("</host>") != std::string::npos) cur = nullptr;
    }
    auto reversedHost = [](std::vector<std::string> h) {
        std::reverse(h.begin() + 1, h.end() - 1);
        std::string s;
        for (const std::string &l : h) s += l + "\n";
        return s;
    };
    std::string shuffled = "<system version=\"1\">\n" + reversedHost(hostB) + reversedHost(hostA) + "</system>\n";
    System a, b;
    ck_assert(parseSystemXml(text, &a, &err));
    ck_assert_msg(parseSystemXml(shuffled, &b, &err), "%s", err.c_str());
    a.canonicalize();
    b.canonicalize();
    // Ranks named by (host, bus id), in a scrambled rank order.
    std::vector<std::string> hosts = {"node1", "node0", "node1", "node0", "node0", "node1", "node1", "node0"};
    std::vector<std::string> bus = {"0000:51:00.0", "0000:12:00.0", "0000:11:00.0", "0000:52:00.0",
                                    "0000:11:00.0", "0000:12:00.0", "0000:52:00.0", "0000:51:00.0"};
    RankPlacement pa, pb;
    ck_assert_msg(placeRanks(a, hosts, bus, &pa, &err), "%s", err.c_str());
    ck_assert(placeRanks(b, hosts, bus, &pb, &err));
    std::string ga = graphsToXml(searchGraphs(a, pa, SearchParams()));
    std::string gb = graphsToXml(searchGraphs(b, pb, SearchParams()));
    ck_assert_str_eq(ga.c_str(), gb.c_str());
    std::vector<std::string> badBus = bus;
    badBus[3] = "0000:99:00.0";
    ck_assert(!placeRanks(a, hosts, badBus, &pa, &err));
}
END_TEST

START_TEST(double_binary_trees) {
    for (int n = 1; n <= 64; ++n) {
        std::vector<int> t[2];
        binaryTree(n, &t[0]);
        complementaryTree(n, &t[1]);
        std::vector<int> interior[2];
        for (int k = 0; k < 2; ++k) {
            std::vector<int> kids(n, 0);
            int roots = 0;
            for (int i = 0; i < n; ++i) {
                if (t[k][i] < 0) ++roots;
                else ++kids[t[k][i]];
                int steps = 0; // reaches the root without a cycle
                for (int j = i; t[k][j] >= 0 && steps <= n; j = t[k][j]) ++steps;
                ck_assert_int_le(steps, n);
            }
            ck_assert_int_eq(roots, 1);
            for (int i = 0; i < n; ++i) {
                ck_assert_int_le(kids[i], 2);
                if (kids[i]) interior[k].push_back(i);
            }
        }
        for (int i : interior[0])
            ck_assert_msg(std::find(interior[1].begin(), interior[1].end(), i) == interior[1].end(),
                          "n=%d: rank %d interior in both trees", n, i);
    }
}
END_TEST

START_TEST(each_gpu_uses_its_closest_nic) {
    System dgx = load("dgx_h100_8gpu_8nic.xml");
    Paths dp(dgx);
    for (int i = 0; i < 8; ++i) {
        std::string g = "gpu" + std::to_string(i), n = "mlx5_" + std::to_string(i);
        ck_assert_int_eq(closestNic(dgx, dp, dgx.find(0, g)), dgx.find(0, n));
    }
    System two = load("two_nodes_4gpu_2nic.xml");
    Paths tp(two);
    for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) {
            std::string g = "gpu" + std::to_string(i), n = "mlx5_" + std::to_string(i / 2);
            ck_assert_int_eq(closestNic(two, tp, two.find(h, g)), two.find(h, n));
        }
    System vm = load("vm_4gpu_nv18.xml");
    Paths vp(vm);
    ck_assert_int_eq(closestNic(vm, vp, vm.gpus(0)[0]), -1);
}
END_TEST

START_TEST(detection_degrades_without_gpu_and_topo_file_replaces_it) {
    std::string notes;
    System sys = detectLocalSystem(&notes); // CI machines: no driver, no GPU, maybe no NIC
    ck_assert_int_eq((int)sys.hosts.size(), 1);
    bool cpu = false;
    for (const Node &n : sys.nodes) cpu = cpu || n.type == NodeType::Cpu;
    ck_assert(cpu);
    std::string xml = systemToXml(sys), err;
    System again;
    ck_assert_msg(parseSystemXml(xml, &again, &err), "%s", err.c_str());

    std::string file = std::string(LOOM_TOPO_FIXTURES) + "/vm_4gpu_nv18.xml";
    setenv("LOOM_TOPO_FILE", file.c_str(), 1);
    std::string fromFile = localSystemXml(&notes);
    unsetenv("LOOM_TOPO_FILE");
    System vm;
    ck_assert(parseSystemXml(fromFile, &vm, &err));
    ck_assert_int_eq((int)vm.gpus(0).size(), 4);
    ck_assert_str_eq(vm.hosts[0].name.c_str(), sys.hosts[0].name.c_str()); // renamed to this machine
    ck_assert(notes.find("LOOM_TOPO_FILE") != std::string::npos);

    setenv("LOOM_TOPO_FILE", "/nonexistent/topo.xml", 1);
    notes.clear();
    localSystemXml(&notes); // falls back to detection, says so
    unsetenv("LOOM_TOPO_FILE");
    ck_assert(notes.find("unusable") != std::string::npos);
}
END_TEST

Suite *topo_suite(void) {
    Suite *s = suite_create("topo");
    TCase *tc = tcase_create("topo");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, xml_round_trip_and_errors);
    tcase_add_test(tc, pcie_box_routes_and_ring);
    tcase_add_test(tc, pcie_box_rank_order_does_not_fool_the_search);
    tcase_add_test(tc, nvswitch_node_uses_all_links);
    tcase_add_test(tc, test_host_vm);
    tcase_add_test(tc, two_nodes_rings_enter_and_leave_near_nics);
    tcase_add_test(tc, single_gpu_and_no_p2p);
    tcase_add_test(tc, reordered_input_gives_identical_graphs);
    tcase_add_test(tc, double_binary_trees);
    tcase_add_test(tc, each_gpu_uses_its_closest_nic);
    tcase_add_test(tc, detection_degrades_without_gpu_and_topo_file_replaces_it);
    suite_add_tcase(s, tc);
    return s;
}
