// Questions about another host's arrival board (src/core/ras/arrival_query.h),
// on loopback: a rank behind is named from its host's answer, then as dead
// once its process is gone; a host reached through its second rank when the
// first is gone; a wrong communicator tag or secret gets no answer; a fuzzer
// on the server leaves it answering; after the last board is withdrawn
// nothing listens; forks while another thread starts and stops the server
// leave no child stuck on its lock.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <atomic>
#include <csignal>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/ras/arrival_query.h"
#include "side_fuzz.h"
#include "unit_suites.h"

using namespace loom;

namespace {

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A contact where nothing listens (a port that was just given back).
ArrivalContact nobodyThere() {
    net::SideListener *l = nullptr;
    ArrivalContact c;
    ck_assert_int_eq(net::SideListener::open(htonl(INADDR_LOOPBACK), 8, &c, &l), loomSuccess);
    delete l;
    return c;
}

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

} // namespace

START_TEST(another_hosts_board_names_who_is_behind_or_dead) {
    setenv("LOOM_SOCKET_IFADDR", "127.0.0.1", 1);
    const std::string name = "/loom-arrive-query-test-" + std::to_string(getpid());
    ArrivalBoard *b = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &b), loomSuccess);
    // The other host: rank 2 (this process, 3 calls) and rank 3 (a child, 2 calls).
    int done[2], go[2];
    ck_assert_int_eq(pipe(done), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
        ArrivalBoard *mine = nullptr;
        if (ArrivalBoard::open(name, 2, 0, &mine) != loomSuccess) _exit(2);
        mine->publish(1, 3, 1, "0000:1b:00.0");
        mine->enter(1, 2);
        char c = 1;
        if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(3);
        _exit(0);
    }
    b->publish(0, 2, 0, "0000:19:00.0");
    b->enter(0, 3);
    char c;
    ck_assert_int_eq(read(done[0], &c, 1), 1);
    b->unlink();
    const uint64_t tag = 0x1234abcdull;
    ArrivalContact served;
    arrivalServe(tag, b, &served);
    ck_assert_uint_ne(served.ip, 0);

    // Ranks 0, 1 on this host (board 1), 2, 3 on the other (board 2); rank
    // 2's contact is gone, so the question reaches the host through rank 3.
    ArrivalPeers ap;
    ap.boardOf = {1, 1, 2, 2};
    ap.contacts = {ArrivalContact{}, ArrivalContact{}, nobodyThere(), served};
    std::string text = describeOtherHosts(ap, 1, tag, 3, 3.0);
    printf("%s\n", text.c_str());
    ck_assert_msg(has(text, "did not arrive: rank 3 (host "), "%s", text.c_str());
    ck_assert_msg(has(text, ", pid " + std::to_string(pid) + ", GPU 1, 0000:1b:00.0) entered 2 of 3 calls"), "%s",
                  text.c_str());
    ck_assert_msg(!has(text, "rank 2 "), "%s", text.c_str());
    ck_assert_msg(has(describeOtherHosts(ap, 1, tag, 2, 3.0), "every rank arrived, on every host"), "call 2");
    // The answer carries the call each rank's GPU started (the watchdog's word).
    b->started(0, 2);
    std::vector<HostArrivals> ans = arrivalAsk(tag, {{served}}, 2.0);
    ck_assert(ans[0].answered && !ans[0].refused);
    ck_assert_uint_eq(ans[0].slots[0].started, 2);
    ck_assert_uint_eq(ans[0].slots[0].failedIn, 0);
    b->failed(0, 2); // ... and whether its side of the communicator failed
    ans = arrivalAsk(tag, {{served}}, 2.0);
    ck_assert_uint_eq(ans[0].slots[0].failedIn, 2);

    // Its process gone: dead, as its host sees it.
    ck_assert_int_eq(write(go[1], &c, 1), 1);
    int st = 0;
    waitpid(pid, &st, 0);
    bool deadGone = false;
    text = describeOtherHosts(ap, 1, tag, 3, 3.0, 0, &deadGone);
    printf("%s\n", text.c_str());
    ck_assert_msg(has(text, "dead (process gone): rank 3 (host "), "%s", text.c_str());
    ck_assert_msg(deadGone, "a rank its host sees dead is gone");

    // Another communicator's tag, or another secret: no answer.
    bool silentGone = true;
    text = describeOtherHosts(ap, 1, tag + 1, 3, 1.0, 0, &silentGone);
    ck_assert_msg(has(text, "no answer within 1 s from the host of ranks 2, 3"), "%s", text.c_str());
    ck_assert_msg(!silentGone, "a host that only did not answer is not known gone");
    ans = arrivalAsk(tag + 1, {{nobodyThere(), served}}, 1.0);
    ck_assert(!ans[0].answered && !ans[0].refused); // one of them listens: not a host whose processes are gone
    ArrivalPeers forged = ap;
    forged.contacts[3].secret[5] ^= 1;
    ck_assert_msg(has(describeOtherHosts(forged, 1, tag, 3, 1.0), "no answer"), "a wrong secret was answered");

    // A fuzzer first: still listening, still answering.
    const sidefuzz::Stats fz = sidefuzz::fuzz(served, sizeof(uint64_t), 7, 300);
    ck_assert_int_eq(fz.refused, 0);
    ck_assert_msg(has(describeOtherHosts(ap, 1, tag, 3, 3.0), "dead (process gone): rank 3"), "after the fuzzer");

    // Withdrawn: nothing listens; the asker learns it at once (refused).
    arrivalUnserve(b);
    ans = arrivalAsk(tag, {{nobodyThere(), served}}, 1.0);
    ck_assert(!ans[0].answered && ans[0].refused);
    const double t0 = seconds();
    bool gone = false;
    text = describeOtherHosts(ap, 1, tag, 3, 3.0, 0, &gone);
    ck_assert_msg(has(text, "ranks 2, 3 are gone (every address of their host refused the connection: no process "
                            "left there)"), "%s", text.c_str());
    ck_assert_msg(gone, "a host that refused every connection: its ranks are gone");
    ck_assert_msg(seconds() - t0 < 1.0, "a refused host took %.2f s", seconds() - t0);
    delete b;
    unsetenv("LOOM_SOCKET_IFADDR");
}
END_TEST

// Not a loom server on the port: it streams bytes without end. The asker
// gives up within its attempt, holding at most one answer's worth.
START_TEST(a_stranger_that_streams_is_cut_off) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    ck_assert_int_eq(bind(fd, (sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    ck_assert_int_eq(getsockname(fd, (sockaddr *)&sa, &len), 0);
    std::atomic<long> sent{0};
    std::thread stranger([&] {
        int c = accept(fd, nullptr, nullptr);
        std::vector<char> junk(1 << 16, 'x');
        for (ssize_t k; c >= 0 && (k = send(c, junk.data(), junk.size(), MSG_NOSIGNAL)) > 0;) sent += k;
        if (c >= 0) close(c);
    });
    ArrivalPeers ap;
    ap.boardOf = {1, 2};
    ap.contacts.resize(2);
    memset(&ap.contacts[1], 0, sizeof(ArrivalContact));
    ap.contacts[1].ip = sa.sin_addr.s_addr;
    ap.contacts[1].port = sa.sin_port;
    const double t0 = seconds();
    const std::string text = describeOtherHosts(ap, 1, 7, 1, 1.5);
    const double took = seconds() - t0;
    stranger.join();
    close(fd);
    printf("stranger: %s after %.2f s (%ld bytes offered)\n", text.c_str(), took, sent.load());
    ck_assert_msg(has(text, "no answer"), "%s", text.c_str());
    ck_assert_msg(took < 2.5, "took %.2f s", took);
}
END_TEST

// A child forked while the server runs starts a server of its own (the
// parent's thread is not in it) and answers for its boards; the parent's
// server goes on answering for its own.
START_TEST(a_forked_child_serves_on_its_own) {
    setenv("LOOM_SOCKET_IFADDR", "127.0.0.1", 1);
    const std::string name = "/loom-arrive-fork-test-" + std::to_string(getpid());
    ArrivalBoard *b = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 1, 0, &b), loomSuccess);
    b->unlink();
    b->publish(0, 1, 0, "0000:19:00.0");
    b->enter(0, 1);
    ArrivalContact parent;
    arrivalServe(11, b, &parent);
    pid_t pid = fork();
    if (pid == 0) {
        ArrivalContact child;
        b->enter(0, 5); // the mapping is shared: the parent's answer below shows it
        arrivalServe(12, b, &child);
        ArrivalPeers ap;
        ap.boardOf = {1, 2};
        ap.contacts = {ArrivalContact{}, child};
        const bool ok = child.port != parent.port && has(describeOtherHosts(ap, 1, 12, 3, 2.0), "every rank arrived");
        arrivalUnserve(b);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child did not answer for its own board");
    ArrivalPeers ap;
    ap.boardOf = {1, 2};
    ap.contacts = {ArrivalContact{}, parent};
    const std::string text = describeOtherHosts(ap, 1, 11, 9, 2.0);
    ck_assert_msg(has(text, "did not arrive: rank 1 ") && has(text, "entered 5 of 9"), "%s", text.c_str());
    arrivalUnserve(b);
    delete b;
    unsetenv("LOOM_SOCKET_IFADDR");
}
END_TEST

// Forks while another thread starts and stops the server: no child finds
// the server's lock taken for good, or a listener (or, under ASan, whose
// allocator does not lock itself around fork, a heap lock) that the
// parent's server thread was changing (each child starts and stops its own
// in time).
START_TEST(forks_while_the_server_starts_and_stops) {
    setenv("LOOM_SOCKET_IFADDR", "127.0.0.1", 1);
    const std::string name = "/loom-arrive-forks-test-" + std::to_string(getpid());
    ArrivalBoard *b = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 1, 0, &b), loomSuccess);
    b->unlink();
    b->publish(0, 1, 0, "0000:19:00.0");
    std::atomic<bool> stop{false}, started{false};
    std::thread churn([&] {
        started = true; // the thread's start-up (outside any of loom's locks) is behind it
        while (!stop.load()) {
            ArrivalContact c;
            arrivalServe(21, b, &c);
            arrivalUnserve(b);
        }
    });
    while (!started.load()) std::this_thread::yield();
    int stuck = 0;
    for (int k = 0; k < 40; ++k) {
        pid_t pid = fork();
        if (pid == 0) {
            ArrivalContact c;
            arrivalServe(22, b, &c);
            arrivalUnserve(b);
            _exit(0);
        }
        int st = 0;
        const double end = seconds() + 5; // a child stuck on the lock is killed then
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (seconds() > end) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                break;
            }
            usleep(1000);
        }
        stuck += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (stuck) break;
    }
    stop = true;
    churn.join();
    delete b;
    unsetenv("LOOM_SOCKET_IFADDR");
    ck_assert_msg(!stuck, "a child forked during server start/stop did not finish within 5 s");
}
END_TEST

Suite *arrival_query_suite(void) {
    Suite *s = suite_create("arrival_query");
    TCase *tc = tcase_create("arrival_query");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, another_hosts_board_names_who_is_behind_or_dead);
    tcase_add_test(tc, a_stranger_that_streams_is_cut_off);
    tcase_add_test(tc, a_forked_child_serves_on_its_own);
    tcase_add_test(tc, forks_while_the_server_starts_and_stops);
    suite_add_tcase(s, tc);
    return s;
}
