// The ucx net plugin over TCP on loopback, between two processes (forked
// before UCX starts): handshake, many concurrent isend/irecv of 0 B .. 64 MiB
// with data checks, a peer that dies, bad arguments. Every wait is bounded.
#include <atomic>
#include <check.h>
#include <chrono>
#include <sched.h>
#include <sys/resource.h>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

#include "btl_gpu/net/ucx/net_ucx.h"
#include "proxy/proxy.h"

using namespace loom::net;

namespace {

const NetPlugin *P() { return ucxPlugin(); }
const size_t kSizes[] = {0, 1, 7, 4096, 65537, (1u << 20) + 3, 64u << 20};
const int kNumSizes = 7, kSmall = 64; // plus 64 small messages of 1..64 bytes

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
unsigned char pattern(size_t msg, size_t i) { return (unsigned char)(msg * 31 + i * 7 + 1); }

void useLoopback() {
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
}

struct Msg {
    std::vector<unsigned char> buf;
    size_t size;
    void *req = nullptr;
    bool done = false;
};

std::vector<Msg> messages() {
    std::vector<Msg> m;
    for (int i = 0; i < kNumSizes; ++i) m.push_back(Msg{{}, kSizes[i]});
    for (int i = 0; i < kSmall; ++i) m.push_back(Msg{{}, (size_t)i + 1});
    return m;
}

// Tests every request until all are done or `deadline`; returns the first error.
loomResult_t waitAll(std::vector<Msg> &m, double deadline, std::vector<size_t> *sizes) {
    size_t left = m.size();
    while (left && now() < deadline) {
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
    }
    return left ? loomInProgress : loomSuccess;
}

int proxySender(void *sc);

// Child: connects with the handle read from the pipe, sends every message,
// or (dieAfterConnect) exits abruptly once connected.
int sender(int fd, bool dieAfterConnect) {
    useLoopback();
    Handle h;
    if (read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || P()->init() != loomSuccess) return 2;
    void *sc = nullptr;
    for (double end = now() + 20; !sc && now() < end;)
        if (P()->connect(0, &h, &sc) != loomSuccess) return 3;
    if (!sc) return 4;
    if (dieAfterConnect) _exit(0); // no close: the receiver must notice
    if (getenv("LOOM_TEST_PROXY")) {
        int rc = proxySender(sc);
        P()->closeSend(sc);
        return rc;
    }
    std::vector<Msg> m = messages();
    for (size_t k = 0; k < m.size(); ++k) {
        m[k].buf.resize(m[k].size + 1);
        for (size_t i = 0; i < m[k].size; ++i) m[k].buf[i] = pattern(k, i);
        if (P()->isend(sc, m[k].buf.data(), m[k].size, (int)k, nullptr, &m[k].req) != loomSuccess || !m[k].req)
            return 5;
    }
    if (waitAll(m, now() + 30, nullptr) != loomSuccess) return 6;
    P()->closeSend(sc);
    return 0;
}

// The proxy between two "GPUs" (host threads of two processes): steps of
// varying size (0 .. slot) through 4-slot FIFOs, in order, flow-controlled.
constexpr int kSteps = 3000, kSlots = 4;
constexpr size_t kSlotBytes = 64 * 1024;
size_t stepBytes(uint64_t s) { return (size_t)(s * 7919) % (kSlotBytes + 1); }

struct HostFifo {
    std::vector<char> slots = std::vector<char>(kSlots * kSlotBytes);
    volatile uint64_t tail = 0, head = 0, sizes[kSlots] = {};
    loom::ProxyFifo view() {
        return loom::ProxyFifo{slots.data(), kSlotBytes, kSlots, &tail, &head, sizes, nullptr};
    }
};

int proxySender(void *sc) {
    HostFifo f;
    loom::Proxy proxy(P());
    int id = proxy.addSend(sc, f.view(), 7);
    proxy.kick();
    double end = now() + 60;
    for (uint64_t s = 0; s < (uint64_t)kSteps; ++s) {
        while (s - f.head >= (uint64_t)kSlots) // the GPU's credit wait
            if (now() > end || proxy.error() != loomSuccess) return 7;
        char *slot = f.slots.data() + (s % kSlots) * kSlotBytes;
        for (size_t i = 0; i < stepBytes(s); ++i) slot[i] = (char)pattern(s, i);
        f.sizes[s % kSlots] = stepBytes(s);
        std::atomic_thread_fence(std::memory_order_release);
        f.tail = s + 1;
        if (s % 512 == 0) proxy.kick(); // as the host does when it enqueues
    }
    while (f.head < (uint64_t)kSteps)
        if (now() > end || proxy.error() != loomSuccess) return 8;
    proxy.remove(id);
    return 0;
}

// Parent: listens, forks the sender, accepts.
pid_t startPair(void **listenComm, void **recvComm, bool dieAfterConnect) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        _exit(sender(fds[0], dieAfterConnect));
    }
    close(fds[0]);
    useLoopback();
    ck_assert_int_eq(P()->init(), loomSuccess);
    Handle h;
    ck_assert_int_eq(P()->listen(0, &h, listenComm), loomSuccess);
    ck_assert_int_eq((int)write(fds[1], &h, sizeof(h)), (int)sizeof(h));
    close(fds[1]);
    *recvComm = nullptr;
    for (double end = now() + 20; !*recvComm && now() < end;)
        ck_assert_int_eq(P()->accept(*listenComm, recvComm), loomSuccess);
    ck_assert_msg(*recvComm, "accept did not complete in 20 s");
    return pid;
}

int childStatus(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

} // namespace

START_TEST(exchange_0B_to_64MiB_concurrently) {
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, false);
    std::vector<Msg> m = messages();
    // Posted in reverse order: matching is by tag, not by arrival.
    for (size_t k = m.size(); k-- > 0;) {
        m[k].buf.assign(m[k].size + 16, 0xee); // 16 guard bytes
        ck_assert_int_eq(P()->irecv(rc, m[k].buf.data(), m[k].size, (int)k, nullptr, &m[k].req), loomSuccess);
    }
    std::vector<size_t> got(m.size(), ~(size_t)0);
    ck_assert_int_eq(waitAll(m, now() + 60, &got), loomSuccess);
    for (size_t k = 0; k < m.size(); ++k) {
        ck_assert_uint_eq(got[k], m[k].size);
        for (size_t i = 0; i < m[k].size; ++i)
            if (m[k].buf[i] != pattern(k, i)) ck_abort_msg("message %zu byte %zu corrupted", k, i);
        for (size_t i = m[k].size; i < m[k].size + 16; ++i) ck_assert_uint_eq(m[k].buf[i], 0xee);
    }
    ck_assert_int_eq(childStatus(pid), 0);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(dead_peer_is_an_error_not_a_hang) {
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, true);
    std::vector<unsigned char> buf(4096);
    void *req = nullptr;
    ck_assert_int_eq(P()->irecv(rc, buf.data(), buf.size(), 1, nullptr, &req), loomSuccess);
    ck_assert_int_eq(childStatus(pid), 0); // the sender is gone
    loomResult_t r = loomSuccess;
    int done = 0;
    for (double end = now() + 30; r == loomSuccess && !done && now() < end;) r = P()->test(req, &done, nullptr);
    ck_assert_int_eq(r, loomRemoteError);
    // Later calls on the failed connection fail at once.
    ck_assert_int_eq(P()->irecv(rc, buf.data(), buf.size(), 2, nullptr, &req), loomRemoteError);
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

START_TEST(proxy_moves_steps_in_order_and_idles) {
    setenv("LOOM_TEST_PROXY", "1", 1); // the forked sender runs proxySender
    void *lc, *rc;
    pid_t pid = startPair(&lc, &rc, false);
    HostFifo f;
    {
        loom::Proxy proxy(P());
        int id = proxy.addRecv(rc, f.view(), 7);
        proxy.kick();
        double end = now() + 60;
        for (uint64_t s = 0; s < (uint64_t)kSteps; ++s) {
            while (f.tail <= s) // the GPU waits for data
                ck_assert_msg(now() < end && proxy.error() == loomSuccess, "step %lu never arrived", (unsigned long)s);
            std::atomic_thread_fence(std::memory_order_acquire);
            const char *slot = f.slots.data() + (s % kSlots) * kSlotBytes;
            ck_assert_uint_eq(f.sizes[s % kSlots], stepBytes(s));
            for (size_t i = 0; i < stepBytes(s); ++i)
                if ((unsigned char)slot[i] != pattern(s, i)) ck_abort_msg("step %lu byte %zu", (unsigned long)s, i);
            f.head = s + 1;
        }
        ck_assert_int_eq(childStatus(pid), 0);
        // Idle (receives still posted): the thread must sleep, not spin.
        usleep(50000);
        struct rusage a, b;
        getrusage(RUSAGE_SELF, &a);
        uint64_t sleeps = proxy.sleeps();
        usleep(500000);
        getrusage(RUSAGE_SELF, &b);
        double cpu = (b.ru_utime.tv_sec - a.ru_utime.tv_sec) + (b.ru_utime.tv_usec - a.ru_utime.tv_usec) / 1e6 +
                     (b.ru_stime.tv_sec - a.ru_stime.tv_sec) + (b.ru_stime.tv_usec - a.ru_stime.tv_usec) / 1e6;
        printf("proxy idle: %.1f%% of a core over 0.5 s, %lu sleeps\n", cpu / 0.5 * 100,
               (unsigned long)(proxy.sleeps() - sleeps));
        ck_assert_msg(cpu < 0.025, "idle proxy used %.1f%% of a core", cpu / 0.5 * 100);
        ck_assert_uint_gt(proxy.sleeps(), sleeps);
        proxy.remove(id);
    }
    P()->closeRecv(rc);
    P()->closeListen(lc);
}
END_TEST

// A plugin whose isend records when it was called and completes at once.
std::atomic<double> g_isendAt{0};
loomResult_t fakeIsend(void *, void *, size_t, int, void *, void **req) {
    g_isendAt.store(now());
    *req = (void *)1;
    return loomSuccess;
}
loomResult_t fakeTest(void *, int *done, size_t *size) {
    *done = 1;
    if (size) *size = 0;
    return loomSuccess;
}

START_TEST(idle_proxy_wakes_on_kick) {
    NetPlugin fake;
    memset(&fake, 0, sizeof(fake));
    fake.isend = fakeIsend;
    fake.test = fakeTest;
    HostFifo f;
    loom::Proxy proxy(&fake);
    int id = proxy.addSend((void *)1, f.view(), 0);
    // Without kicks the thread would find the step at its next timed wake-up
    // (up to 16 ms, ~8 ms on average); a kick must beat that by far. Wake-up
    // of a sleeping thread on a small VM takes up to a few ms at worst.
    std::vector<double> lat;
    for (int k = 0; k < 21; ++k) {
        usleep(40000); // long enough for the longest idle sleep
        f.sizes[k % kSlots] = 0;
        g_isendAt.store(0);
        double t0 = now();
        f.tail = (uint64_t)k + 1; // the GPU posts a step, the host kicks
        proxy.kick();
        // Wait as a host thread should while the proxy works: yielding. A
        // thread spinning on the CPU the woken proxy is placed on delays it
        // by a scheduler slice (~3 ms here).
        while (g_isendAt.load() == 0 && now() < t0 + 1) sched_yield();
        lat.push_back(g_isendAt.load() - t0);
    }
    std::sort(lat.begin(), lat.end());
    printf("proxy wake-up after kick: median %.1f us, worst %.1f us (21 kicks)\n", lat[10] * 1e6, lat.back() * 1e6);
    ck_assert_msg(lat[10] < 0.002, "median kick-to-isend %.1f us", lat[10] * 1e6);
    proxy.remove(id);
}
END_TEST

START_TEST(bad_arguments) {
    useLoopback();
    ck_assert_int_eq(P()->init(), loomSuccess);
    Handle h;
    memset(&h, 0x5a, sizeof(h));
    void *sc = nullptr, *req = nullptr, *lc = nullptr;
    ck_assert_int_eq(P()->connect(0, &h, &sc), loomInvalidArgument); // not a ucx handle
    ck_assert_int_eq(P()->isend(nullptr, nullptr, 0, 0, nullptr, &req), loomInvalidArgument);
    ck_assert_int_eq(P()->listen(3, &h, &lc), loomInvalidUsage);
    ck_assert_int_eq(P()->listen(0, &h, &lc), loomSuccess);
    void *rc = nullptr;
    ck_assert_int_eq(P()->accept(lc, &rc), loomSuccess); // nobody connects: still pending, no error
    ck_assert_ptr_null(rc);
    Properties props;
    ck_assert_int_eq(P()->getProperties(0, &props), loomSuccess);
    ck_assert_str_eq(props.name, "ucx");
    ck_assert_int_eq(P()->getProperties(1, &props), loomInvalidArgument);
    P()->closeListen(lc);
}
END_TEST

int main() {
    Suite *s = suite_create("net_ucx");
    TCase *tc = tcase_create("net_ucx");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, exchange_0B_to_64MiB_concurrently);
    tcase_add_test(tc, dead_peer_is_an_error_not_a_hang);
    tcase_add_test(tc, proxy_moves_steps_in_order_and_idles);
    tcase_add_test(tc, idle_proxy_wakes_on_kick);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
