// The authenticated side channel (src/base/side_channel.h) over
// loopback, no RDMA hardware needed: the secret holder gets through while a
// seeded fuzzer hammers the port; stalled, wrong and flooding connections are
// dropped, but none pushes out a peer slow to speak within its grace; a
// replay after the connection finds nothing listening; the listener answers
// only on its own address; no descriptor leaks. Every wait is bounded.
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "side_fuzz.h"
#include "unit_suites.h"

using loom::net::SideAddress;
using loom::net::SideListener;
using namespace sidefuzz;

namespace {

constexpr size_t kPayload = 96;

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint32_t loopback(const char *ip = "127.0.0.1") { return inet_addr(ip); }

uint32_t seedFromEnv() {
    const char *e = getenv("LOOM_TEST_SEED");
    uint32_t seed = e ? (uint32_t)strtoul(e, nullptr, 10) : (uint32_t)time(nullptr);
    printf("side channel fuzz: LOOM_TEST_SEED=%u\n", seed);
    return seed;
}

std::vector<uint8_t> legitPayload() {
    std::vector<uint8_t> p(kPayload);
    for (size_t i = 0; i < p.size(); ++i) p[i] = (uint8_t)(i * 7 + 3);
    return p;
}

// The legitimate connector: its hello in two pieces (the header and some of
// the payload, then the rest 20 ms later), then the 4-byte reply.
bool legitConnect(const SideAddress &addr, double delay) {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    std::vector<uint8_t> payload = legitPayload();
    std::vector<uint8_t> m = loom::net::sideHello(addr, payload.data(), payload.size());
    int fd = dial(addr);
    if (fd < 0) return false;
    const size_t first = sizeof(loom::net::SideHello) + 8;
    bool ok = sendAll(fd, m.data(), first);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ok = ok && sendAll(fd, m.data() + first, m.size() - first);
    char reply[4] = {};
    size_t got = 0;
    while (ok && got < 4) {
        ssize_t n = recv(fd, reply + got, 4 - got, 0);
        if (n <= 0) ok = false;
        else got += (size_t)n;
    }
    close(fd);
    return ok && memcmp(reply, "ok!!", 4) == 0;
}

// Polls until a connection is handed over (answered "ok!!", returned) or
// `seconds` pass (-1).
int acceptOne(SideListener *l, std::vector<uint8_t> *payload, double seconds) {
    payload->assign(kPayload, 0);
    for (double end = now() + seconds; now() < end;) {
        int fd = -1;
        ck_assert_int_eq(l->poll(payload->data(), &fd), loomSuccess);
        if (fd >= 0) {
            ck_assert(sendAll(fd, "ok!!", 4));
            close(fd);
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return -1;
}

} // namespace

START_TEST(the_secret_holder_gets_through_a_fuzzer) {
    const int fds0 = openFds();
    const uint32_t seed = seedFromEnv();
    SideAddress addr;
    SideListener *l = nullptr;
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &addr, &l), loomSuccess);
    // 300 hostile connections, then the legitimate one while 100 more come.
    Stats before, during;
    std::atomic<bool> started{false}, legitOk{false};
    std::thread fuzzer([&] {
        before = fuzz(addr, kPayload, seed, 300);
        started = true;
        during = fuzz(addr, kPayload, seed + 1, 100);
    });
    std::thread legit([&] {
        while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        legitOk = legitConnect(addr, 0);
    });
    std::vector<uint8_t> got;
    ck_assert_int_eq(acceptOne(l, &got, 30), 0);
    legit.join();
    fuzzer.join();
    ck_assert(legitOk.load());
    ck_assert(got == legitPayload());
    ck_assert(!l->listening());
    printf("fuzzer: %d connections before the legitimate one, %d during (%d refused: nothing listened); "
           "listener dropped %lu\n", before.connected, during.connected, during.refused,
           (unsigned long)l->dropped());
    ck_assert_int_eq(before.connected, 300); // the listener was there for all of them ...
    // ... and closed every one (those still queued when it stopped listening
    // were reset with the listening socket).
    ck_assert_uint_ge(l->dropped(), 290);
    ck_assert_uint_le(l->dropped(), (uint64_t)(before.connected + during.connected));
    ck_assert_int_eq(during.connected + during.refused, 100);
    // A replay of the legitimate hello finds nothing listening.
    ck_assert_int_lt(dial(addr), 0);
    ck_assert_int_eq(errno, ECONNREFUSED);
    delete l;
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

START_TEST(wrong_secret_and_stalled_hellos_are_dropped) {
    const int fds0 = openFds();
    SideAddress addr;
    SideListener *l = nullptr;
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &addr, &l, 0.2), loomSuccess);
    std::vector<uint8_t> payload = legitPayload();
    // A whole hello, one secret bit off.
    SideAddress wrong = addr;
    wrong.secret[5] ^= 1;
    std::vector<uint8_t> bad = loom::net::sideHello(wrong, payload.data(), payload.size());
    int a = dial(addr);
    ck_assert_int_ge(a, 0);
    ck_assert(sendAll(a, bad.data(), bad.size()));
    // The right secret, but the hello stops one byte short and stays open.
    std::vector<uint8_t> cut = loom::net::sideHello(addr, payload.data(), payload.size());
    int b = dial(addr);
    ck_assert_int_ge(b, 0);
    ck_assert(sendAll(b, cut.data(), cut.size() - 1));
    std::vector<uint8_t> got(kPayload);
    for (double end = now() + 1.0; now() < end && l->dropped() < 2;) {
        int fd = -1;
        ck_assert_int_eq(l->poll(got.data(), &fd), loomSuccess);
        ck_assert_int_lt(fd, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ck_assert_uint_eq(l->dropped(), 2); // the wrong secret at once, the stalled one at its deadline
    char c;
    ck_assert_int_le(recv(a, &c, 1, 0), 0); // both see the listener close them
    ck_assert_int_le(recv(b, &c, 1, 0), 0);
    close(a);
    close(b);
    ck_assert(l->listening());
    std::thread legit([&] { ck_assert(legitConnect(addr, 0)); });
    ck_assert_int_eq(acceptOne(l, &got, 10), 0);
    legit.join();
    ck_assert(got == payload);
    delete l;
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

START_TEST(a_flood_of_silent_connections_cannot_shut_out_the_peer) {
    const int fds0 = openFds();
    SideAddress addr;
    SideListener *l = nullptr;
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &addr, &l), loomSuccess);
    std::vector<int> silent;
    std::vector<uint8_t> got(kPayload);
    for (int k = 0; k < 3 * loom::net::kSidePending; ++k) {
        int fd = dial(addr); // the kernel's queue takes those the listener has no room for yet
        ck_assert_int_ge(fd, 0);
        silent.push_back(fd);
        int none = -1;
        ck_assert_int_eq(l->poll(got.data(), &none), loomSuccess);
        ck_assert_int_lt(none, 0);
    }
    ck_assert_uint_eq(l->dropped(), 0); // none had its grace yet
    const double t0 = now();
    std::thread legit([&] { ck_assert(legitConnect(addr, 0)); });
    ck_assert_int_eq(acceptOne(l, &got, 10), 0);
    legit.join();
    // Behind 96 silent ones, 32 at a time: two graces of waiting.
    ck_assert_double_ge(now() - t0, 2 * loom::net::kSideGraceSeconds * 0.9);
    ck_assert(got == legitPayload());
    ck_assert_uint_eq(l->dropped(), 3 * loom::net::kSidePending);
    for (int fd : silent) close(fd);
    delete l;
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

// The peer connects but its thread is slow to send (a loaded machine): a
// burst of twice the pending table's connections behind it cannot push it out
// before its grace.
START_TEST(a_peer_slow_to_speak_keeps_its_place) {
    const int fds0 = openFds();
    SideAddress addr;
    SideListener *l = nullptr;
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &addr, &l), loomSuccess);
    std::vector<uint8_t> got(kPayload);
    int peer = dial(addr);
    ck_assert_int_ge(peer, 0);
    std::vector<int> silent;
    for (int k = 0; k < 2 * loom::net::kSidePending; ++k) {
        int fd = dial(addr);
        ck_assert_int_ge(fd, 0);
        silent.push_back(fd);
        int none = -1;
        ck_assert_int_eq(l->poll(got.data(), &none), loomSuccess);
        ck_assert_int_lt(none, 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // within the grace
    std::vector<uint8_t> payload = legitPayload();
    std::vector<uint8_t> m = loom::net::sideHello(addr, payload.data(), payload.size());
    ck_assert(sendAll(peer, m.data(), m.size()));
    ck_assert_int_eq(acceptOne(l, &got, 10), 0);
    ck_assert(got == payload);
    char reply[4] = {};
    ck_assert_int_eq(recv(peer, reply, 4, MSG_WAITALL), 4);
    ck_assert_int_eq(memcmp(reply, "ok!!", 4), 0);
    close(peer);
    for (int fd : silent) close(fd);
    delete l;
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

START_TEST(listens_only_on_its_address) {
    SideAddress addr;
    SideListener *l = nullptr;
    ck_assert_int_eq(SideListener::open(loopback("127.0.0.1"), kPayload, &addr, &l), loomSuccess);
    SideAddress other = addr;
    other.ip = loopback("127.0.0.2"); // also this host (all of 127/8 is), another address
    ck_assert_int_lt(dial(other), 0);
    ck_assert_int_eq(errno, ECONNREFUSED);
    int fd = dial(addr);
    ck_assert_int_ge(fd, 0);
    close(fd);
    delete l;
    // An address that is not this host's: a clear error, nothing left open.
    const int fds0 = openFds();
    ck_assert_int_eq(SideListener::open(loopback("192.0.2.1"), kPayload, &addr, &l), loomSystemError);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(openFds(), fds0);
}
END_TEST

START_TEST(every_listener_has_its_own_secret) {
    SideAddress a, b;
    SideListener *la = nullptr, *lb = nullptr;
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &a, &la), loomSuccess);
    ck_assert_int_eq(SideListener::open(loopback(), kPayload, &b, &lb), loomSuccess);
    ck_assert_int_ne(memcmp(a.secret, b.secret, sizeof(a.secret)), 0);
    ck_assert_int_ne(a.port, b.port);
    // A's hello (payload and all) presented to B is refused.
    std::vector<uint8_t> payload = legitPayload();
    std::vector<uint8_t> m = loom::net::sideHello(a, payload.data(), payload.size());
    int fd = dial(b);
    ck_assert_int_ge(fd, 0);
    ck_assert(sendAll(fd, m.data(), m.size()));
    std::vector<uint8_t> got(kPayload);
    for (double end = now() + 2; now() < end && lb->dropped() == 0;) {
        int none = -1;
        ck_assert_int_eq(lb->poll(got.data(), &none), loomSuccess);
        ck_assert_int_lt(none, 0);
    }
    ck_assert_uint_eq(lb->dropped(), 1);
    close(fd);
    delete la;
    delete lb;
}
END_TEST

Suite *side_channel_suite(void) {
    Suite *s = suite_create("side_channel");
    TCase *tc = tcase_create("side_channel");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_secret_holder_gets_through_a_fuzzer);
    tcase_add_test(tc, wrong_secret_and_stalled_hellos_are_dropped);
    tcase_add_test(tc, a_flood_of_silent_connections_cannot_shut_out_the_peer);
    tcase_add_test(tc, a_peer_slow_to_speak_keeps_its_place);
    tcase_add_test(tc, listens_only_on_its_address);
    tcase_add_test(tc, every_listener_has_its_own_secret);
    suite_add_tcase(s, tc);
    return s;
}
