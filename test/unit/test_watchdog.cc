// A late rank is waited for, a stuck or dead one is not: the rule every
// kernel wait follows (device/wait.h: waitCheck), the watchdog's rule
// (core/ras/watchdog.h: watchRules), and the watchdog thread itself on a
// communicator whose arrival board names a live and a dead process.
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/ras/arrival.h"
#include "core/comm/comm.h"
#include "core/ras/watchdog.h"
#include "unit_suites.h"

using namespace loom;

namespace {

constexpr unsigned long long kSecond = 1000000000ull; // the tests' clock: nanoseconds

WaitLimit limitOf(WatchWords *w, uint64_t seq, double hard, double stuck) {
    WaitLimit l = {};
    l.hardCycles = (unsigned long long)(hard * kSecond);
    l.stuckCycles = (unsigned long long)(stuck * kSecond);
    l.reportCycles = kSecond / 2;
    l.seq = seq;
    l.words = w;
    return l;
}

} // namespace

START_TEST(a_late_peer_is_waited_for_without_limit) {
    WatchWords w;
    memset(&w, 0, sizeof(w));
    const WaitLimit l = limitOf(&w, 5, 0, 300);
    WaitClock c{1000, 0, false};
    // A day of silence while some rank has not started call 5: the wait goes on.
    for (unsigned long long t = 1000; t < 86400 * kSecond; t += 3600 * kSecond)
        ck_assert_int_eq(waitCheck(l, c, t), kWaitGoesOn);
    ck_assert_uint_eq(w.stalled, 5); // the watchdog was told once the wait passed half a second
    ck_assert(c.reported);
    w.allStarted = 4; // every rank is in call 4 only: still late
    ck_assert_int_eq(waitCheck(l, c, 90000 * kSecond), kWaitGoesOn);
}
END_TEST

START_TEST(stuck_counts_from_when_every_rank_started) {
    WatchWords w;
    memset(&w, 0, sizeof(w));
    const WaitLimit l = limitOf(&w, 7, 0, 300);
    WaitClock c{0, 0, false};
    ck_assert_int_eq(waitCheck(l, c, 1000 * kSecond), kWaitGoesOn); // 1000 s late: fine
    w.allStarted = 7;                                                // now every rank is inside call 7
    ck_assert_int_eq(waitCheck(l, c, 1001 * kSecond), kWaitGoesOn);
    ck_assert_int_eq(waitCheck(l, c, 1300 * kSecond), kWaitGoesOn); // 299 s since: not yet
    ck_assert_int_eq(waitCheck(l, c, 1302 * kSecond), kWaitStuck);
    // LOOM_STUCK_TIMEOUT=0: never stuck.
    const WaitLimit never = limitOf(&w, 7, 0, 0);
    WaitClock c2{0, 0, false};
    ck_assert_int_eq(waitCheck(never, c2, 1 * kSecond), kWaitGoesOn);
    ck_assert_int_eq(waitCheck(never, c2, 100000 * kSecond), kWaitGoesOn);
}
END_TEST

START_TEST(cancel_and_hard_bound_end_a_wait) {
    WatchWords w;
    memset(&w, 0, sizeof(w));
    WaitClock c{0, 0, false};
    ck_assert_int_eq(waitCheck(limitOf(&w, 1, 0, 300), c, 2 * kSecond), kWaitGoesOn);
    w.cancel = 1; // the watchdog found a dead rank
    ck_assert_int_eq(waitCheck(limitOf(&w, 1, 0, 300), c, 3 * kSecond), kWaitCancelled);
    w.cancel = 0;
    // LOOM_TIMEOUT=5: a late rank too, measured from the wait's start.
    WaitClock h{10 * kSecond, 0, false};
    ck_assert_int_eq(waitCheck(limitOf(&w, 1, 5, 300), h, 14 * kSecond), kWaitGoesOn);
    ck_assert_int_eq(waitCheck(limitOf(&w, 1, 5, 300), h, 16 * kSecond), kWaitTimedOut);
    // No words (no watchdog): only the hard bound.
    WaitLimit bare = limitOf(nullptr, 1, 0, 300);
    WaitClock b{0, 0, false};
    ck_assert_int_eq(waitCheck(bare, b, 100000 * kSecond), kWaitGoesOn);
}
END_TEST

START_TEST(a_stall_mark_never_goes_back) {
    WatchWords w;
    memset(&w, 0, sizeof(w));
    w.stalled = 9; // a later call already stalled (another CTA)
    WaitClock c{0, 0, false};
    ck_assert_int_eq(waitCheck(limitOf(&w, 8, 0, 0), c, 1 * kSecond), kWaitGoesOn);
    ck_assert_uint_eq(w.stalled, 9);
    WaitClock early{0, 0, false};
    w.stalled = 0;
    ck_assert_int_eq(waitCheck(limitOf(&w, 8, 0, 0), early, kSecond / 4), kWaitGoesOn);
    ck_assert_uint_eq(w.stalled, 0); // a quarter second is not worth a look
}
END_TEST

namespace {

std::vector<WatchPeer> peersAt(uint64_t entered, uint64_t started, int n) {
    std::vector<WatchPeer> p((size_t)n);
    for (int q = 0; q < n; ++q) {
        p[q].rank = q;
        p[q].known = true;
        p[q].entered = entered;
        p[q].started = started;
    }
    return p;
}

} // namespace

START_TEST(rules_name_late_ranks_once_after_warn_after) {
    std::vector<WatchPeer> p = peersAt(3, 3, 4);
    p[1].entered = 2, p[1].started = 2; // still on the host before call 3
    p[2].started = 2;                   // entered call 3, its GPU busy with earlier work
    WatchVerdict v = watchRules(p, 3, 100, 10, 60, false);
    ck_assert(!v.warn && v.dead.empty() && !v.allStarted);
    v = watchRules(p, 3, 160, 60, 60, false);
    ck_assert(v.warn);
    ck_assert_int_eq(v.notEntered.size(), 1);
    ck_assert_int_eq(v.notEntered[0], 1);
    ck_assert_int_eq(v.notStarted.size(), 1);
    ck_assert_int_eq(v.notStarted[0], 2);
    ck_assert(!watchRules(p, 3, 500, 400, 60, true).warn); // once
    ck_assert(!watchRules(p, 3, 500, 400, 0, false).warn); // LOOM_WARN_AFTER=0: never
    ck_assert(watchRules(peersAt(3, 3, 4), 3, 100, 10, 60, false).allStarted);
    std::vector<WatchPeer> unknown = peersAt(3, 3, 4);
    unknown[3].known = false; // its host has not answered yet
    ck_assert(!watchRules(unknown, 3, 100, 10, 60, false).allStarted);
}
END_TEST

START_TEST(rules_cancel_for_dead_and_lost_ranks_only) {
    std::vector<WatchPeer> p = peersAt(1, 0, 3);
    p[2].dead = true;
    WatchVerdict v = watchRules(p, 5, 100, 1, 60, false);
    ck_assert_int_eq(v.dead.size(), 1);
    ck_assert_int_eq(v.dead[0], 2);
    ck_assert(!v.hostsLost && !v.warn && !v.allStarted);
    std::vector<WatchPeer> q = peersAt(5, 5, 3);
    q[1].silentSince = 100;
    ck_assert(watchRules(q, 5, 100 + kHostLostSeconds - 0.5, 30, 60, false).dead.empty()); // slow host: wait
    v = watchRules(q, 5, 100 + kHostLostSeconds + 0.5, 30, 60, false);
    ck_assert_int_eq(v.dead.size(), 1);
    ck_assert(v.hostsLost);
}
END_TEST

START_TEST(rules_cancel_for_a_peer_whose_side_failed) {
    std::vector<WatchPeer> p = peersAt(4, 4, 3);
    p[0].entered = 5, p[0].started = 5; // this rank, in call 5
    p[1].failedIn = 4;                  // alive, but its side failed in call 4: it never enters call 5
    WatchVerdict v = watchRules(p, 5, 100, 120, 60, false);
    ck_assert_int_eq(v.failed.size(), 1);
    ck_assert_int_eq(v.failed[0], 1);
    ck_assert(v.dead.empty() && !v.warn && !v.allStarted);
    p[1].failedIn = 0; // the same ranks, nobody failed: rank 1 and 2 are only late
    v = watchRules(p, 5, 100, 120, 60, false);
    ck_assert(v.failed.empty() && v.warn);
}
END_TEST

START_TEST(the_watchdog_cancels_a_communicator_whose_rank_died) {
    // Rank 1 of a 2-rank communicator is a child process that filled its
    // slot and exited; rank 0 (this process) has a call stalled.
    char name[64];
    snprintf(name, sizeof(name), "/loom-unit-watch-%d", (int)getpid());
    ArrivalBoard *board = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &board), loomSuccess);
    board->publish(0, 0, 0, "0000:00:00.0");
    board->enter(0, 1);
    pid_t kid = fork();
    if (kid == 0) {
        ArrivalBoard *b = nullptr;
        if (ArrivalBoard::open(name, 2, 0, &b) != loomSuccess) _exit(1);
        b->publish(1, 1, 1, "0000:00:01.0");
        b->enter(1, 1);
        b->started(1, 1);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(kid, &status, 0), kid); // reaped: its pid is gone
    loomComm *comm = new loomComm;
    comm->nranks = 2;
    comm->rank = 0;
    comm->ras.arrivals = board;
    comm->ras.arrivalSlot = 0;
    WatchWords words;
    memset(&words, 0, sizeof(words));
    comm->ras.watch = &words;
    words.started = 1;
    watchStart(comm);
    usleep(600 * 1000);
    ck_assert_int_eq(words.cancel, 0); // nothing stalled: nothing looked at
    ck_assert_uint_eq(board->read(0).started, 1); // but this rank's GPU progress is on the board
    words.stalled = 1;                 // a wait of call 1 passed half a second
    for (int k = 0; k < 40 && !words.cancel; ++k) usleep(100 * 1000);
    ck_assert_int_eq(words.cancel, 1);
    int dead = -1;
    const std::string why = watchReason(comm, &dead);
    ck_assert_int_eq(dead, 1);
    ck_assert_msg(why.find("rank 1 (host ") == 0 && why.find("gone (process dead)") != std::string::npos, "%s",
                  why.c_str());
    watchStop(comm);
    ck_assert(watchReason(comm, &dead).empty()); // forgotten with the communicator
    comm->ras.arrivals = nullptr;
    comm->ras.watch = nullptr;
    delete comm;
    delete board;
}
END_TEST

START_TEST(the_watchdog_tells_kernels_every_rank_started) {
    char name[64];
    snprintf(name, sizeof(name), "/loom-unit-started-%d", (int)getpid());
    ArrivalBoard *board = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &board), loomSuccess);
    board->publish(0, 0, 0, "0000:00:00.0");
    board->publish(1, 1, 1, "0000:00:01.0"); // this process stands in for rank 1 too: alive
    board->enter(0, 4);
    board->enter(1, 4);
    board->started(1, 3); // rank 1's GPU is still on call 3
    loomComm *comm = new loomComm;
    comm->nranks = 2;
    comm->ras.arrivals = board;
    comm->ras.arrivalSlot = 0;
    WatchWords words;
    memset(&words, 0, sizeof(words));
    words.started = 4;
    words.done = 3;
    words.stalled = 4;
    comm->ras.watch = &words;
    watchStart(comm);
    usleep(800 * 1000);
    ck_assert_uint_eq(words.allStarted, 0); // rank 1 is late: no stuck clock yet
    ck_assert_int_eq(words.cancel, 0);
    board->started(1, 4);
    for (int k = 0; k < 20 && words.allStarted != 4; ++k) usleep(100 * 1000);
    ck_assert_uint_eq(words.allStarted, 4);
    watchStop(comm);
    comm->ras.arrivals = nullptr;
    comm->ras.watch = nullptr;
    delete comm;
    delete board;
}
END_TEST

// Two communicators of one 2-rank communicator in this process (slots 0
// and 1 of one board): rank 1's side fails after its call 2 (comm->ras.failed,
// as a failed wait leaves it); its watchdog puts that on its slot, and rank
// 0's, stalled in call 3, cancels with the reason naming rank 1, not dead.
START_TEST(a_failed_side_cancels_the_peers_that_wait_for_it) {
    char name[64];
    snprintf(name, sizeof(name), "/loom-unit-failed-%d", (int)getpid());
    ArrivalBoard *board = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &board), loomSuccess);
    board->publish(0, 0, 0, "0000:00:00.0");
    board->publish(1, 1, 1, "0000:00:01.0");
    board->enter(0, 3);
    board->enter(1, 2);
    WatchWords words[2];
    memset(words, 0, sizeof(words));
    loomComm *comms[2];
    for (int r = 0; r < 2; ++r) {
        comms[r] = new loomComm;
        comms[r]->nranks = 2;
        comms[r]->rank = r;
        comms[r]->ras.arrivals = board;
        comms[r]->ras.arrivalSlot = r;
        comms[r]->ras.watch = &words[r];
        comms[r]->ras.collsEntered = r == 0 ? 3 : 2;
        watchStart(comms[r]);
    }
    words[0].started = 3, words[0].done = 2, words[0].stalled = 3; // rank 0 waits in call 3
    words[1].started = 2, words[1].done = 2;
    usleep(800 * 1000);
    ck_assert_int_eq(words[0].cancel, 0); // rank 1 is only late so far
    ck_assert_uint_eq(board->read(1).failedIn, 0);
    comms[1]->ras.failed = true;
    for (int k = 0; k < 30 && !words[0].cancel; ++k) usleep(100 * 1000);
    ck_assert_uint_eq(board->read(1).failedIn, 2);
    ck_assert_int_eq(words[0].cancel, 1);
    ck_assert_int_eq(words[1].cancel, 0); // the failed side waits for nothing
    int dead = 7;
    const std::string why = watchReason(comms[0], &dead);
    ck_assert_int_eq(dead, -1); // alive: MPI_ERR_OTHER, not MPI_ERR_PROC_FAILED
    ck_assert_msg(why.find("rank 1 (host ") == 0 && why.find("failed its side of this communicator earlier (after "
                                                             "it had entered 2 calls") != std::string::npos,
                  "%s", why.c_str());
    for (int r = 0; r < 2; ++r) {
        watchStop(comms[r]);
        comms[r]->ras.arrivals = nullptr;
        comms[r]->ras.watch = nullptr;
        delete comms[r];
    }
    delete board;
}
END_TEST

Suite *watchdog_suite(void) {
    Suite *s = suite_create("watchdog");
    TCase *t = tcase_create("watchdog");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, a_late_peer_is_waited_for_without_limit);
    tcase_add_test(t, stuck_counts_from_when_every_rank_started);
    tcase_add_test(t, cancel_and_hard_bound_end_a_wait);
    tcase_add_test(t, a_stall_mark_never_goes_back);
    tcase_add_test(t, rules_name_late_ranks_once_after_warn_after);
    tcase_add_test(t, rules_cancel_for_dead_and_lost_ranks_only);
    tcase_add_test(t, the_watchdog_cancels_a_communicator_whose_rank_died);
    tcase_add_test(t, the_watchdog_tells_kernels_every_rank_started);
    tcase_add_test(t, rules_cancel_for_a_peer_whose_side_failed);
    tcase_add_test(t, a_failed_side_cancels_the_peers_that_wait_for_it);
    suite_add_tcase(s, t);
    return s;
}
