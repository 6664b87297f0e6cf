// The ib net plugin on a real kernel RDMA stack. Where there is none (CI) it
// skips, saying how to run it: in loom's soft-RoCE VM,
//   contrib/rdma-vm/run.sh build build/test/unit/loom_net_ib
// Two processes (forked before verbs is used): handshake, concurrent
// RDMA WRITE WITH IMM transfers of 0 B .. 16 MiB with data and guard checks,
// a receiver that deregisters its buffer (bad rkey), a sender that dies.
#include <atomic>
#include <check.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "btl_gpu/net/ib/net_ib.h"
#include "proxy/proxy.h"

using namespace loom::net;

namespace {

const NetPlugin *P() { return ibPlugin(); }
const size_t kSizes[] = {0, 1, 7, 4096, 65537, (1u << 20) + 3, 16u << 20};
const int kNumSizes = 7, kSmall = 32;
enum Mode { kNormal, kDie, kBadRkey, kProxy };

// The proxy over ib: steps of 0..64 KiB through 4-slot FIFOs registered once.
constexpr int kSteps = 2000, kSlots = 4;
constexpr size_t kSlotBytes = 64 * 1024;
size_t stepBytes(uint64_t s) { return (size_t)(s * 7919) % (kSlotBytes + 1); }

struct HostFifo {
    std::vector<char> slots = std::vector<char>(kSlots * kSlotBytes);
    volatile uint64_t tail = 0, head = 0, sizes[kSlots] = {};
    void *mr = nullptr;
    loom::ProxyFifo view() { return loom::ProxyFifo{slots.data(), kSlotBytes, kSlots, &tail, &head, sizes, mr}; }
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
unsigned char pattern(size_t msg, size_t i) { return (unsigned char)(msg * 31 + i * 7 + 1); }

struct Msg {
    std::vector<unsigned char> buf;
    size_t size;
    void *mr = nullptr;
    void *req = nullptr;
    bool done = false;
};

std::vector<Msg> messages() {
    std::vector<Msg> m;
    for (int i = 0; i < kNumSizes; ++i) m.push_back(Msg{{}, kSizes[i]});
    for (int i = 0; i < kSmall; ++i) m.push_back(Msg{{}, (size_t)i + 1});
    return m;
}

loomResult_t waitAll(std::vector<Msg> &m, double deadline, std::vector<size_t> *sizes) {
    size_t left = 0;
    for (auto &x : m) left += !x.done;
    while (left && now() < deadline)
        for (size_t i = 0; i < m.size(); ++i) {
            if (m[i].done) continue;
            int done = 0;
            size_t n = 0;
            loomResult_t r = P()->test(m[i].req, &done, &n);
            if (r != loomSuccess) return r;
            if (done) {
                m[i].done = true;
                if (sizes) (*sizes)[i] = n;
                --left;
            }
        }
    return left ? loomInProgress : loomSuccess;
}

// Child: the sender. Returns its exit status.
int sender(int fd, Mode mode) {
    Handle h;
    if (read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || P()->init() != loomSuccess) return 2;
    void *sc = nullptr;
    for (double end = now() + 30; !sc && now() < end;)
        if (P()->connect(0, &h, &sc) != loomSuccess) return 3;
    if (!sc) return 4;
    if (mode == kDie) _exit(0); // gone without closing
    if (mode == kProxy) { // the sending "GPU": a host thread feeding the proxy
        HostFifo f;
        if (P()->regMr(sc, f.slots.data(), f.slots.size(), MemType::Host, &f.mr) != loomSuccess) return 10;
        int rc = 0;
        {
            loom::Proxy proxy(P());
            int id = proxy.addSend(sc, f.view(), 7);
            proxy.kick();
            double end = now() + 120;
            for (uint64_t st = 0; st < (uint64_t)kSteps && !rc; ++st) {
                while (st - f.head >= (uint64_t)kSlots && !rc)
                    if (now() > end || proxy.error() != loomSuccess) rc = 11;
                char *slot = f.slots.data() + (st % kSlots) * kSlotBytes;
                for (size_t i = 0; i < stepBytes(st); ++i) slot[i] = (char)pattern(st, i);
                f.sizes[st % kSlots] = stepBytes(st);
                std::atomic_thread_fence(std::memory_order_release);
                f.tail = st + 1;
                if (st % 256 == 0) proxy.kick();
            }
            while (!rc && f.head < (uint64_t)kSteps)
                if (now() > end || proxy.error() != loomSuccess) rc = 12;
            proxy.remove(id);
        }
        P()->deregMr(sc, f.mr);
        P()->closeSend(sc);
        return rc;
    }
    std::vector<Msg> m = messages();
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
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        _exit(sender(fds[0], mode));
    }
    close(fds[0]);
    ck_assert_int_eq(P()->init(), loomSuccess);
    Handle h;
    ck_assert_int_eq(P()->listen(0, &h, lc), loomSuccess);
    ck_assert_int_eq((int)write(fds[1], &h, sizeof(h)), (int)sizeof(h));
    close(fds[1]);
    *rc = nullptr;
    for (double end = now() + 30; !*rc && now() < end;) ck_assert_int_eq(P()->accept(*lc, rc), loomSuccess);
    ck_assert_msg(*rc, "accept did not complete in 30 s");
    return pid;
}

int childStatus(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
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
    for (size_t k = 0; k < m.size(); ++k) {
        ck_assert_uint_eq(got[k], m[k].size);
        for (size_t i = 0; i < m[k].size; ++i)
            if (m[k].buf[i] != pattern(k, i)) ck_abort_msg("message %zu byte %zu corrupted", k, i);
        for (size_t i = m[k].size; i < m[k].size + 16; ++i) ck_assert_uint_eq(m[k].buf[i], 0xee);
    }
    ck_assert_int_eq(childStatus(pid), 0);
}

START_TEST(messages_split_over_three_qps) {
    setenv("LOOM_IB_QPS_PER_CONN", "3", 1); // read by the connecting (forked) sender
    void *lc, *rc;
    std::vector<Msg> m = messages();
    exchangeAndVerify(&lc, &rc, m);
    for (auto &x : m) P()->deregMr(rc, x.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(rdma_write_with_imm_0B_to_16MiB) {
    void *lc, *rc;
    std::vector<Msg> m = messages();
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
        double end = now() + 120;
        for (uint64_t st = 0; st < (uint64_t)kSteps; ++st) {
            while (f.tail <= st)
                ck_assert_msg(now() < end && proxy.error() == loomSuccess, "step %lu never arrived", (unsigned long)st);
            std::atomic_thread_fence(std::memory_order_acquire);
            const char *slot = f.slots.data() + (st % kSlots) * kSlotBytes;
            ck_assert_uint_eq(f.sizes[st % kSlots], stepBytes(st));
            for (size_t i = 0; i < stepBytes(st); ++i)
                if ((unsigned char)slot[i] != pattern(st, i)) ck_abort_msg("step %lu byte %zu", (unsigned long)st, i);
            f.head = st + 1;
        }
        ck_assert_int_eq(childStatus(pid), 0);
        proxy.remove(id);
    }
    P()->deregMr(rc, f.mr);
    P()->closeRecv(rc);
    P()->closeListen(lc);
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
    std::vector<Msg> m = messages();
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
    tcase_add_test(tc, registration_cache_shares_live_registrations);
    tcase_add_test(tc, port_error_reaches_the_async_event_thread); // last: it bounces the port
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
