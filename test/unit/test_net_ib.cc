// The ib net plugin on a real kernel RDMA stack. Where there is none (CI) it
// skips, saying how to run it: in loom's soft-RoCE VM,
//   contrib/rdma-vm/run.sh build build/test/unit/loom_net_ib
// Two processes (forked before verbs is used): handshake, concurrent
// RDMA WRITE WITH IMM transfers of 0 B .. 16 MiB with data and guard checks,
// a receiver that deregisters its buffer (bad rkey), a sender that dies, a
// fuzzer on the side channel before the real sender connects.
#include <atomic>
#include <check.h>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "btl_gpu/net/ib/ib_internal.h"
#include "btl_gpu/net/ib/net_ib.h"
#include "net_test_common.h"
#include "proxy/proxy.h"
#include "side_fuzz.h"

using namespace loom::net;

namespace {

const NetPlugin *P() { return ibPlugin(); }
using namespace nettest;

// 0 B .. 16 MiB (the VM moves some 20 MB/s) and 32 small messages.
std::vector<Msg> ibMessages() { return messages(16u << 20, 32); }
loomResult_t waitAll(std::vector<Msg> &m, double deadline, std::vector<size_t> *sizes) {
    return nettest::waitAll(P(), m, deadline, sizes);
}

enum Mode { kNormal, kDie, kBadRkey, kProxy, kRandom, kProxyUntilKilled };
constexpr int kRandomMsgs = 200; // 0 .. 1 MiB each: the VM moves some 20 MB/s

// The proxy over ib: steps through 4-slot FIFOs registered once.
constexpr int kSteps = 2000;

// Child: the sender. Returns its exit status.
int sender(int fd, Mode mode) {
    void *sc = nullptr;
    if (int rc = connectFromPipe(P(), fd, 30, &sc)) return rc;
    if (mode == kDie) _exit(0); // gone without closing
    if (mode == kRandom) return randomTrafficSender(P(), sc, kRandomMsgs, 1u << 20, 120);
    if (mode == kProxy || mode == kProxyUntilKilled) { // the sending "GPU": a host thread feeding the proxy
        HostFifo f;
        if (P()->regMr(sc, f.slots.data(), f.slots.size(), MemType::Host, &f.mr) != loomSuccess) return 10;
        int rc;
        {
            loom::Proxy proxy(P());
            int id = proxy.addSend(sc, f.view(), 7);
            proxy.kick();
            rc = mode == kProxy ? proxyProduce(proxy, f, kSteps, 120) : proxyProduce(proxy, f, 1u << 30, 600);
            proxy.remove(id);
        }
        P()->deregMr(sc, f.mr);
        P()->closeSend(sc);
        return rc;
    }
    std::vector<Msg> m = ibMessages();
    if (mode == kBadRkey) m = {Msg{{}, 4096}}; // one message, tag 0
    for (size_t k = 0; k < m.size(); ++k) {
        m[k].buf.resize(m[k].size + 1);
        for (size_t i = 0; i < m[k].size; ++i) m[k].buf[i] = pattern(k, i);
        if (P()->regMr(sc, m[k].buf.data(), m[k].buf.size(), MemType::Host, &m[k].mr) != loomSuccess) return 5;
        // isend may say "not yet" (null request) until the receiver has posted.
        for (double end = now() + 30; !m[k].req && now() < end;)
            if (P()->isend(sc, m[k].buf.data(), m[k].size, (int)k, m[k].mr, &m[k].req) != loomSuccess) return 6;
        if (!m[k].req) return 7;
    }
    loomResult_t r = waitAll(m, now() + 60, nullptr);
    for (auto &x : m) P()->deregMr(sc, x.mr);
    P()->closeSend(sc);
    if (mode == kBadRkey) return r == loomRemoteError ? 0 : 8; // the sender must see the access error
    return r == loomSuccess ? 0 : 9;
}

pid_t startPair(void **lc, void **rc, Mode mode) {
    return nettest::startPair(P(), lc, rc, [mode](int fd) { return sender(fd, mode); });
}


void postAll(void *rc, std::vector<Msg> &m) {
    for (size_t k = m.size(); k-- > 0;) { // posted in reverse: matching is by order and tag
        m[k].buf.assign(m[k].size + 16, 0xee);
        ck_assert_int_eq(P()->regMr(rc, m[k].buf.data(), m[k].buf.size(), MemType::Host, &m[k].mr), loomSuccess);
    }
    for (size_t k = 0; k < m.size(); ++k) {
        for (double end = now() + 30; !m[k].req && now() < end;)
            ck_assert_int_eq(P()->irecv(rc, m[k].buf.data(), m[k].size, (int)k, m[k].mr, &m[k].req), loomSuccess);
        ck_assert_ptr_nonnull(m[k].req);
    }
}

} // namespace

// Every message once, verified; leaves the messages registered for more checks.
void exchangeAndVerify(void **lc, void **rc, std::vector<Msg> &m) {
    pid_t pid = startPair(lc, rc, kNormal);
    postAll(*rc, m);
    std::vector<size_t> got(m.size(), ~(size_t)0);
    ck_assert_int_eq(waitAll(m, now() + 120, &got), loomSuccess);
    checkReceived(m, got);
    ck_assert_int_eq(childStatus(pid), 0);
}

START_TEST(messages_split_over_three_qps) {
    setenv("LOOM_IB_QPS_PER_CONN", "3", 1); // read by the connecting (forked) sender
    void *lc, *rc;
    std::vector<Msg> m = ibMessages();
    exchangeAndVerify(&lc, &rc, m);
    for (auto &x : m) P()->deregMr(rc, x.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(rdma_write_with_imm_0B_to_16MiB) {
    void *lc, *rc;
    std::vector<Msg> m = ibMessages();
    exchangeAndVerify(&lc, &rc, m);
    // The flush read through the loopback QP, forced on for host memory.
    setenv("LOOM_NET_GDR_FLUSH", "on", 1);
    for (size_t k = 0; k < m.size(); ++k) {
        void *req = nullptr;
        ck_assert_int_eq(P()->iflush(rc, m[k].buf.data(), m[k].size, m[k].mr, &req), loomSuccess);
        if (m[k].size == 0) {
            ck_assert_ptr_null(req);
            continue;
        }
        ck_assert_ptr_nonnull(req);
        int done = 0;
        for (double end = now() + 30; !done && now() < end;)
            ck_assert_int_eq(P()->test(req, &done, nullptr), loomSuccess);
        ck_assert_msg(done, "flush of message %zu did not complete", k);
        ck_assert_uint_eq(m[k].buf[0], pattern(k, 0));
        P()->deregMr(rc, m[k].mr);
    }
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(proxy_moves_steps_over_ib) {
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, kProxy);
    HostFifo f;
    ck_assert_int_eq(P()->regMr(rc, f.slots.data(), f.slots.size(), MemType::Host, &f.mr), loomSuccess);
    {
        loom::Proxy proxy(P());
        int id = proxy.addRecv(rc, f.view(), 7);
        proxy.kick();
        std::string err = proxyConsume(proxy, f, kSteps, 120);
        ck_assert_msg(err.empty(), "%s", err.c_str());
        ck_assert_int_eq(childStatus(pid), 0);
        proxy.remove(id);
    }
    P()->deregMr(rc, f.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

int openFds(); // below

// A sender killed (SIGKILL) while its proxy streams steps: the receiving
// proxy reports an error, within seconds, instead of waiting forever; then
// removing it, deregistering and closing return and leave no descriptor or
// registration behind (its QP destroyed with the connection).
START_TEST(sender_killed_mid_stream_is_an_error_then_a_clean_close) {
    // As startPair, with the descriptors counted between init and listen
    // (verbs must not be opened before the fork: the child's would fail).
    int toSender;
    pid_t pid = forkWithPipe([](int fd) { return sender(fd, kProxyUntilKilled); }, &toSender);
    ck_assert_int_eq(P()->init(), loomSuccess);
    const int fds0 = openFds() - 1; // less the pipe's write end, closed by giveHandle
    const size_t regs0 = loom::net::ibLiveRegistrations();
    Handle h;
    void *lc = nullptr, *rc = nullptr;
    ck_assert_int_eq(P()->listen(0, &h, &lc), loomSuccess);
    giveHandle(toSender, h);
    for (double end = now() + 30; !rc && now() < end;) ck_assert_int_eq(P()->accept(lc, &rc), loomSuccess);
    ck_assert_msg(rc, "accept did not complete in 30 s");
    HostFifo f;
    ck_assert_int_eq(P()->regMr(rc, f.slots.data(), f.slots.size(), MemType::Host, &f.mr), loomSuccess);
    {
        loom::Proxy proxy(P());
        int id = proxy.addRecv(rc, f.view(), 7);
        proxy.kick();
        std::string err = proxyConsume(proxy, f, 200, 120); // streaming, verified
        ck_assert_msg(err.empty(), "%s", err.c_str());
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int st = 0;
        waitpid(pid, &st, 0);
        const double killed = now();
        // What was in flight drains (slots freed unchecked), then the proxy fails.
        while (proxy.error() == loomSuccess && now() < killed + 60) {
            if (f.tail > f.head) f.head = f.tail;
            usleep(100);
        }
        const double after = now() - killed;
        printf("ib: sender killed mid-stream after %llu steps: %s after %.2f s\n", (unsigned long long)f.head,
               proxy.error() != loomSuccess ? "proxy error" : "no error", after);
        ck_assert_msg(proxy.error() != loomSuccess, "the receiving proxy saw no error in 60 s");
        ck_assert_msg(after < 30, "the error took %.1f s", after);
        proxy.remove(id);
    }
    P()->deregMr(rc, f.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
    ck_assert_uint_eq(loom::net::ibLiveRegistrations(), regs0);
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

START_TEST(registration_cache_shares_live_registrations) {
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, kDie);
    std::vector<unsigned char> buf(1 << 20);
    size_t base = loom::net::ibLiveRegistrations();
    void *whole = nullptr, *part = nullptr, *other = nullptr;
    ck_assert_int_eq(P()->regMr(rc, buf.data(), buf.size(), MemType::Host, &whole), loomSuccess);
    ck_assert_int_eq(P()->regMr(rc, buf.data() + 4096, 8192, MemType::Host, &part), loomSuccess);
    ck_assert_ptr_eq(part, whole); // inside a live registration: shared
    ck_assert_uint_eq(loom::net::ibLiveRegistrations(), base + 1);
    std::vector<unsigned char> elsewhere(4096);
    ck_assert_int_eq(P()->regMr(rc, elsewhere.data(), elsewhere.size(), MemType::Host, &other), loomSuccess);
    ck_assert_ptr_ne(other, whole);
    ck_assert_uint_eq(loom::net::ibLiveRegistrations(), base + 2);
    P()->deregMr(rc, part);
    ck_assert_uint_eq(loom::net::ibLiveRegistrations(), base + 2); // still referenced
    P()->deregMr(rc, whole);
    P()->deregMr(rc, other);
    ck_assert_uint_eq(loom::net::ibLiveRegistrations(), base);
    ck_assert_int_eq(childStatus(pid), 0);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(auto_flush_policy_skips_host_memory) {
    unsetenv("LOOM_NET_GDR_FLUSH"); // auto
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, kDie);
    std::vector<unsigned char> buf(64);
    void *mr = nullptr, *req = (void *)1;
    ck_assert_int_eq(P()->regMr(rc, buf.data(), buf.size(), MemType::Host, &mr), loomSuccess);
    ck_assert_int_eq(P()->iflush(rc, buf.data(), buf.size(), mr, &req), loomSuccess);
    ck_assert_ptr_null(req); // host memory: nothing to flush
    ck_assert_int_eq(childStatus(pid), 0);
    P()->deregMr(rc, mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(bad_rkey_is_an_error_on_the_sender) {
    // The receive advertises 4096 bytes of a region registered for 64 only:
    // the sender's RDMA write must fail with a remote access error.
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, kBadRkey);
    std::vector<unsigned char> buf(4096 + 16, 0xee);
    void *mr = nullptr, *req = nullptr;
    ck_assert_int_eq(P()->regMr(rc, buf.data(), 64, MemType::Host, &mr), loomSuccess);
    for (double end = now() + 30; !req && now() < end;)
        ck_assert_int_eq(P()->irecv(rc, buf.data(), 4096, 0, mr, &req), loomSuccess);
    ck_assert_ptr_nonnull(req);
    ck_assert_int_eq(childStatus(pid), 0); // 0: the sender saw loomRemoteError
    P()->deregMr(rc, mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(dead_sender_is_an_error_not_a_hang) {
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, kDie);
    std::vector<Msg> m = ibMessages();
    m.resize(1);
    m[0].size = 4096;
    postAll(rc, m);
    ck_assert_int_eq(childStatus(pid), 0);
    ck_assert_int_eq(waitAll(m, now() + 30, nullptr), loomRemoteError);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

// Verbs contexts must not cross fork (uverbs answers EACCES in the child), and
// every test forks: probe for a device in a child of its own.
bool rdmaDevicePresent() {
    pid_t pid = fork();
    if (pid == 0) _exit(P()->init() == loomSuccess ? 0 : 1);
    return childStatus(pid) == 0;
}

// In loom's VM, rxe0 runs on the dummy netdev rxenet0: taking it down makes
// the device report a port error, which the async-event thread must see.
START_TEST(port_error_reaches_the_async_event_thread) {
    if (system("ip link show rxenet0 >/dev/null 2>&1") != 0) {
        printf("SKIP: port_error test needs loom's soft-RoCE VM (rxenet0)\n");
        return;
    }
    ck_assert_int_eq(P()->init(), loomSuccess); // starts the event thread
    uint64_t before = loom::net::ibAsyncEvents();
    ck_assert_int_eq(system("ip link set rxenet0 down"), 0);
    double end = now() + 10;
    while (loom::net::ibAsyncEvents() == before && now() < end) usleep(1000);
    ck_assert_int_eq(system("ip link set rxenet0 up"), 0);
    ck_assert_msg(loom::net::ibAsyncEvents() > before, "no async event within 10 s of the port going down");
}
END_TEST

int openFds() {
    int n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (readdir(d)) ++n;
        closedir(d);
    }
    return n;
}

START_TEST(an_abandoned_connect_releases_what_it_holds) {
    // Nobody accepts: the connect stays in progress (TCP side channel open,
    // QP created) until the caller gives it up.
    ck_assert_int_eq(P()->init(), loomSuccess);
    Handle h;
    void *lc = nullptr, *sc = nullptr;
    ck_assert_int_eq(P()->listen(0, &h, &lc), loomSuccess);
    const int before = openFds();
    for (int i = 0; i < 50 && !sc; ++i) {
        ck_assert_int_eq(P()->connect(0, &h, &sc), loomSuccess);
        usleep(1000);
    }
    ck_assert_ptr_null(sc);
    ck_assert_int_gt(openFds(), before); // its socket
    ck_assert_int_eq(P()->abandonConnect(&h), loomSuccess);
    ck_assert_int_eq(openFds(), before);
    ck_assert_int_eq(P()->abandonConnect(&h), loomSuccess); // nothing left: fine
    P()->closeListen(lc);
}
END_TEST

// The side channel under fire: before the sender has the handle, a seeded
// fuzzer hammers the receiver's listening port (garbage, cut-short and
// stalled hellos, wrong secrets). None of it becomes a connection; then the
// real sender connects and every message arrives intact; closing leaves no
// descriptor behind.
START_TEST(side_channel_fuzz_then_the_real_sender) {
    int toSender;
    pid_t pid = forkWithPipe([](int fd) { return sender(fd, kNormal); }, &toSender);
    ck_assert_int_eq(P()->init(), loomSuccess);
    const int fds0 = sidefuzz::openFds() - 1; // less the pipe's write end, closed below
    Handle h;
    void *lc = nullptr, *rc = nullptr;
    ck_assert_int_eq(P()->listen(0, &h, &lc), loomSuccess);
    const SideAddress addr = reinterpret_cast<ib::HandleData *>(h.data)->side;
    const uint32_t seed = trafficSeed();
    sidefuzz::Stats st;
    std::atomic<bool> fuzzed{false};
    std::thread fuzzer([&] {
        st = sidefuzz::fuzz(addr, sizeof(ib::ConnInfo), seed, 200);
        fuzzed = true;
    });
    while (!fuzzed.load()) {
        ck_assert_int_eq(P()->accept(lc, &rc), loomSuccess);
        ck_assert_ptr_null(rc);
    }
    fuzzer.join();
    ck_assert_int_eq(st.connected, 200);
    giveHandle(toSender, h);
    for (double end = now() + 30; !rc && now() < end;) ck_assert_int_eq(P()->accept(lc, &rc), loomSuccess);
    ck_assert_msg(rc, "the real sender was not accepted in 30 s");
    std::vector<Msg> m = ibMessages();
    postAll(rc, m);
    std::vector<size_t> got(m.size(), ~(size_t)0);
    ck_assert_int_eq(waitAll(m, now() + 120, &got), loomSuccess);
    checkReceived(m, got);
    ck_assert_int_eq(childStatus(pid), 0);
    for (auto &x : m) P()->deregMr(rc, x.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
    ck_assert_int_eq(sidefuzz::openFds(), fds0);
}
END_TEST

START_TEST(random_traffic) {
    randomTrafficReceiver(P(), [](void **lc, void **rc) { return startPair(lc, rc, kRandom); }, kRandomMsgs, 1u << 20, 120);
}
END_TEST

START_TEST(two_way_traffic_on_several_connections_and_threads) {
    const uint32_t seed = trafficSeed();
    std::string err = twoWayTraffic(P(), 3, seed, 60, 256u << 10, 180);
    ck_assert_msg(err.empty(), "seed %u: %s", seed, err.c_str());
}
END_TEST

int main() {
    if (!rdmaDevicePresent()) {
        printf("SKIP: no RDMA device here; run it on a real kernel RDMA stack: "
               "contrib/rdma-vm/run.sh BUILDDIR BUILDDIR/test/unit/loom_net_ib\n");
        return 77;
    }
    Suite *s = suite_create("net_ib");
    TCase *tc = tcase_create("net_ib");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, rdma_write_with_imm_0B_to_16MiB);
    tcase_add_test(tc, messages_split_over_three_qps);
    tcase_add_test(tc, bad_rkey_is_an_error_on_the_sender);
    tcase_add_test(tc, dead_sender_is_an_error_not_a_hang);
    tcase_add_test(tc, auto_flush_policy_skips_host_memory);
    tcase_add_test(tc, proxy_moves_steps_over_ib);
    tcase_add_test(tc, sender_killed_mid_stream_is_an_error_then_a_clean_close);
    tcase_add_test(tc, registration_cache_shares_live_registrations);
    tcase_add_test(tc, random_traffic);
    tcase_add_test(tc, side_channel_fuzz_then_the_real_sender);
    tcase_add_test(tc, an_abandoned_connect_releases_what_it_holds);
    tcase_add_test(tc, two_way_traffic_on_several_connections_and_threads);
    tcase_add_test(tc, port_error_reaches_the_async_event_thread); // last: it bounces the port
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
