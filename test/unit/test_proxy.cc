// The proxy thread against a scripted plugin (no network): it stays awake
// while a collective's posted steps are pending, quiesce() waits for the last
// sends, and receives into GPU memory are flushed before the tail moves.
#include <algorithm>
#include <atomic>
#include <check.h>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <unistd.h>
#include <vector>

#include "btl_gpu/net/net.h"
#include "proxy/proxy.h"
#include "unit_suites.h"

namespace {

using loom::net::NetPlugin;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Requests complete when the test allows it: sends (request 1), receives of
// 100 bytes (2) and flushes (3).
std::atomic<int> g_isends{0}, g_flushes{0};
std::atomic<bool> g_complete{true}, g_arrived{false}, g_flushed{false};
loomResult_t scriptedIsend(void *, void *, size_t, int, void *, void **req) {
    ++g_isends;
    *req = (void *)1;
    return loomSuccess;
}
loomResult_t scriptedIrecv(void *, void *, size_t, int, void *, void **req) {
    *req = (void *)2;
    return loomSuccess;
}
loomResult_t scriptedIflush(void *, void *, size_t, void *, void **req) {
    ++g_flushes;
    *req = (void *)3;
    return loomSuccess;
}
std::atomic<int> g_upkeep{0};
loomResult_t scriptedProgress(void *) {
    ++g_upkeep;
    return loomSuccess;
}
loomResult_t scriptedTest(void *req, int *done, size_t *size) {
    const uintptr_t kind = (uintptr_t)req;
    *done = kind == 1 ? g_complete.load() : kind == 2 ? g_arrived.load() : g_flushed.load();
    if (size) *size = kind == 2 ? 100 : 0;
    return loomSuccess;
}

NetPlugin scripted() {
    NetPlugin p;
    memset(&p, 0, sizeof(p));
    p.name = "scripted";
    p.isend = scriptedIsend;
    p.irecv = scriptedIrecv;
    p.iflush = scriptedIflush;
    p.test = scriptedTest;
    p.progress = scriptedProgress;
    return p;
}

constexpr int kSlots = 4;
struct Fifo {
    std::vector<char> slots = std::vector<char>(kSlots * 64);
    volatile uint64_t tail = 0, head = 0, sizes[kSlots] = {};
    loom::ProxyFifo view() { return loom::ProxyFifo{slots.data(), 64, kSlots, &tail, &head, sizes, nullptr}; }
};

bool waitFor(const std::function<bool()> &cond, double seconds) {
    for (double end = now() + seconds; !cond();)
        if (now() > end) return false;
        else usleep(100);
    return true;
}

} // namespace

START_TEST(post_keeps_the_proxy_awake_until_the_steps_are_done) {
    NetPlugin p = scripted();
    g_isends = 0;
    g_complete = true;
    Fifo f;
    loom::Proxy proxy(&p, 200); // 200 us of spinning, then sleeps
    int id = proxy.addSend((void *)1, f.view(), 0);
    usleep(20000);
    ck_assert_uint_gt(proxy.sleeps(), 0); // idle: it sleeps
    // A collective of 4 steps whose GPU is slow: 10 ms between steps, far
    // longer than the spin. The proxy must not fall asleep in between.
    proxy.post(id, 4);
    const uint64_t sleeps = proxy.sleeps();
    uint64_t beforeLast = 0;
    for (int s = 0; s < 4; ++s) {
        usleep(10000);
        if (s == 3) beforeLast = proxy.sleeps(); // once all 4 are done it may sleep again
        f.tail = (uint64_t)s + 1;
    }
    ck_assert(waitFor([&] { return f.head == 4; }, 2));
    ck_assert_uint_eq(beforeLast, sleeps);
    usleep(20000);
    ck_assert_uint_gt(proxy.sleeps(), sleeps); // done: idle again
    // A collective the GPU abandoned: its steps never come; dropPosted()
    // lets the thread idle again instead of spinning until the comm goes.
    proxy.post(id, 4);
    usleep(20000);
    const uint64_t spinning = proxy.sleeps();
    usleep(20000);
    ck_assert_uint_eq(proxy.sleeps(), spinning);
    proxy.dropPosted(id);
    usleep(40000);
    ck_assert_uint_gt(proxy.sleeps(), spinning);
    proxy.remove(id);
}
END_TEST

START_TEST(quiesce_waits_for_the_last_sends) {
    NetPlugin p = scripted();
    g_isends = 0;
    g_complete = false; // the network holds on to the sends
    Fifo f;
    loom::Proxy proxy(&p);
    int id = proxy.addSend((void *)1, f.view(), 0);
    f.tail = 3; // the GPU has finished its collective: 3 steps in the FIFO
    ck_assert(!proxy.quiesce(id, 0.2));
    ck_assert_int_eq(g_isends.load(), 3);
    g_complete = true;
    ck_assert(proxy.quiesce(id, 5));
    ck_assert_uint_eq(f.head, 3);
    proxy.remove(id);
}
END_TEST

START_TEST(abandoned_sends_do_not_keep_the_proxy_awake) {
    NetPlugin p = scripted();
    g_complete = false; // the peer stopped taking them
    Fifo f;
    loom::Proxy proxy(&p, 200);
    int id = proxy.addSend((void *)1, f.view(), 0);
    proxy.post(id, 8);
    f.tail = 2; // the GPU wrote 2 of 8 steps, then timed out
    usleep(20000);
    const uint64_t spinning = proxy.sleeps();
    usleep(20000);
    ck_assert_uint_eq(proxy.sleeps(), spinning); // sends in flight: awake
    proxy.dropPosted(id);
    usleep(40000);
    ck_assert_uint_gt(proxy.sleeps(), spinning); // abandoned: idle again
    const double t0 = now();
    ck_assert(!proxy.quiesce(id, 30)); // and closing does not wait for them
    ck_assert(now() - t0 < 1);
    proxy.remove(id);
}
END_TEST

START_TEST(gpu_memory_receives_are_flushed_before_the_gpu_is_told) {
    NetPlugin p = scripted();
    g_arrived = false;
    g_flushed = false;
    Fifo f;
    loom::ProxyFifo view = f.view();
    view.flush = true; // slots in GPU memory (GPUDirect RDMA)
    loom::Proxy proxy(&p);
    int id = proxy.addRecv((void *)1, view, 0);
    proxy.post(id, 1);
    g_arrived = true; // the data is in the slot, not yet visible to the GPU
    ck_assert(waitFor([] { return g_flushes.load() > 0; }, 2));
    usleep(20000);
    ck_assert_uint_eq(f.tail, 0); // no tail before the flush completes
    g_flushed = true;
    ck_assert(waitFor([&] { return f.tail >= 1; }, 2));
    ck_assert_uint_eq(f.sizes[0], 100); // the received size, not the flush's
    proxy.remove(id);
}
END_TEST

START_TEST(idle_connections_get_upkeep_while_the_proxy_sleeps) {
    NetPlugin p = scripted();
    g_upkeep = 0;
    Fifo f;
    loom::Proxy proxy(&p, 200);
    int id = proxy.addSend((void *)1, f.view(), 0);
    usleep(200000); // nothing to send: the thread sleeps, waking every <= 16 ms
    ck_assert_uint_gt(proxy.sleeps(), 5);
    ck_assert_int_gt(g_upkeep.load(), 5); // and the idle connection was looked after
    proxy.remove(id);
}
END_TEST

Suite *proxy_suite(void) {
    Suite *s = suite_create("proxy");
    TCase *tc = tcase_create("proxy");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, post_keeps_the_proxy_awake_until_the_steps_are_done);
    tcase_add_test(tc, quiesce_waits_for_the_last_sends);
    tcase_add_test(tc, abandoned_sends_do_not_keep_the_proxy_awake);
    tcase_add_test(tc, gpu_memory_receives_are_flushed_before_the_gpu_is_told);
    tcase_add_test(tc, idle_connections_get_upkeep_while_the_proxy_sleeps);
    suite_add_tcase(s, tc);
    return s;
}
