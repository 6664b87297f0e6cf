// The closer of core/ipc/mapping_closer.h with a close of the test's own (no
// GPU): closes run once each, in posting order, off the posting thread; a
// close not started can be taken back and then never runs; waitClosed
// returns only once a running close is done; the newest `keep` closes wait
// until more come, drain() or waitClosed() of them; the destructor finishes
// what was posted.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/ipc/mapping_closer.h"
#include "unit_suites.h"

using namespace loom;

namespace {

void *slot(int i) { return reinterpret_cast<void *>(static_cast<uintptr_t>(0x1000 + 0x100 * i)); }

// A close that records what it closed, and can be held at a gate.
struct Recorder {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<void *> closed;
    std::vector<int> devices;
    std::thread::id thread;
    bool gateOpen = true, entered = false;
    void close(int device, void *at) {
        std::unique_lock<std::mutex> lock(mu);
        entered = true;
        cv.notify_all();
        cv.wait(lock, [&] { return gateOpen; });
        closed.push_back(at);
        devices.push_back(device);
        thread = std::this_thread::get_id();
    }
    void open() {
        std::lock_guard<std::mutex> lock(mu);
        gateOpen = true;
        cv.notify_all();
    }
    size_t count() {
        std::lock_guard<std::mutex> lock(mu);
        return closed.size();
    }
};

} // namespace

START_TEST(closes_in_order_off_the_caller) {
    Recorder rec;
    std::atomic<int> callbacks{0};
    MappingCloser closer([&](int d, void *at) { rec.close(d, at); });
    const int n = 200;
    for (int i = 0; i < n; ++i) ck_assert(closer.post(slot(i), i % 4, slot(i), [&] { ++callbacks; }));
    closer.drain();
    ck_assert_int_eq((int)rec.count(), n);
    ck_assert_int_eq(callbacks.load(), n);
    for (int i = 0; i < n; ++i) {
        ck_assert_ptr_eq(rec.closed[(size_t)i], slot(i));
        ck_assert_int_eq(rec.devices[(size_t)i], i % 4);
    }
    ck_assert(rec.thread != std::this_thread::get_id());
}
END_TEST

START_TEST(taken_back_never_closes_and_waits_follow_the_running_one) {
    Recorder rec;
    rec.gateOpen = false; // the first close blocks, as cudaIpcCloseMemHandle behind a kernel
    std::atomic<int> callbacks{0};
    MappingCloser closer([&](int d, void *at) { rec.close(d, at); });
    for (int i = 0; i < 3; ++i) closer.post(slot(i), 0, slot(i), [&] { ++callbacks; });
    // slot 0 is (or is about to be) running; slots 1 and 2 wait behind it.
    ck_assert(closer.takeBack(slot(1)));
    ck_assert(!closer.takeBack(slot(1))); // once
    ck_assert(!closer.takeBack(slot(7))); // never posted
    closer.waitClosed(slot(7));           // returns at once
    std::atomic<bool> waited{false};
    std::thread waiter([&] {
        closer.waitClosed(slot(2));
        waited = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ck_assert(!waited); // slot 2 is behind the held close
    ck_assert_int_eq((int)rec.count(), 0);
    rec.open();
    waiter.join();
    ck_assert(waited);
    closer.drain();
    ck_assert_int_eq((int)rec.count(), 2);
    ck_assert_ptr_eq(rec.closed[0], slot(0));
    ck_assert_ptr_eq(rec.closed[1], slot(2));
    ck_assert_int_eq(callbacks.load(), 2);
}
END_TEST

START_TEST(running_close_cannot_be_taken_back) {
    Recorder rec;
    rec.gateOpen = false;
    MappingCloser closer([&](int d, void *at) { rec.close(d, at); });
    closer.post(slot(0), 0, slot(0), nullptr);
    { // until the thread has taken it, it could still be taken back
        std::unique_lock<std::mutex> lock(rec.mu);
        ck_assert(rec.cv.wait_for(lock, std::chrono::seconds(10), [&] { return rec.entered; }));
    }
    ck_assert(!closer.takeBack(slot(0)));
    rec.open();
    closer.waitClosed(slot(0));
    ck_assert_int_eq((int)rec.count(), 1);
}
END_TEST

START_TEST(destructor_finishes_posted_closes) {
    Recorder rec;
    {
        MappingCloser closer([&](int d, void *at) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            rec.close(d, at);
        });
        for (int i = 0; i < 50; ++i) closer.post(slot(i), 1, slot(i), nullptr);
    }
    ck_assert_int_eq((int)rec.count(), 50);
}
END_TEST

START_TEST(posts_from_many_threads_all_close) {
    Recorder rec;
    std::atomic<int> callbacks{0};
    MappingCloser closer([&](int d, void *at) { rec.close(d, at); });
    std::vector<std::thread> posters;
    std::atomic<int> takenBack{0};
    for (int t = 0; t < 4; ++t)
        posters.emplace_back([&, t] {
            for (int i = 0; i < 250; ++i) {
                void *at = slot(t * 1000 + i);
                closer.post(at, t, at, [&] { ++callbacks; });
                if (i % 3 == 0 && closer.takeBack(at)) ++takenBack;
            }
        });
    for (std::thread &p : posters) p.join();
    closer.drain();
    ck_assert_int_eq((int)rec.count() + takenBack.load(), 1000);
    ck_assert_int_eq(callbacks.load(), (int)rec.count());
}
END_TEST

START_TEST(newest_kept_until_more_come) {
    Recorder rec;
    MappingCloser closer([&](int d, void *at) { rec.close(d, at); }, 2);
    closer.post(slot(0), 0, slot(0), nullptr);
    closer.post(slot(1), 0, slot(1), nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ck_assert_int_eq((int)rec.count(), 0); // both held back
    ck_assert(closer.takeBack(slot(1)));   // wanted again: never closed
    closer.post(slot(2), 0, slot(2), nullptr);
    closer.post(slot(3), 0, slot(3), nullptr); // three queued, keep 2: the oldest goes
    closer.waitClosed(slot(0));
    ck_assert_int_eq((int)rec.count(), 1);
    ck_assert_ptr_eq(rec.closed[0], slot(0));
    closer.waitClosed(slot(3)); // a held one: run now, with those before it
    ck_assert_int_eq((int)rec.count(), 3);
    closer.post(slot(4), 0, slot(4), nullptr);
    closer.drain();
    ck_assert_int_eq((int)rec.count(), 4);
    ck_assert_ptr_eq(rec.closed[1], slot(2));
    ck_assert_ptr_eq(rec.closed[2], slot(3));
    ck_assert_ptr_eq(rec.closed[3], slot(4));
}
END_TEST

START_TEST(destructor_closes_held_ones) {
    Recorder rec;
    {
        MappingCloser closer([&](int d, void *at) { rec.close(d, at); }, 16);
        for (int i = 0; i < 5; ++i) closer.post(slot(i), 0, slot(i), nullptr);
    }
    ck_assert_int_eq((int)rec.count(), 5);
}
END_TEST

Suite *mapping_closer_suite(void) {
    Suite *s = suite_create("mapping_closer");
    TCase *tc = tcase_create("closer");
    tcase_add_test(tc, closes_in_order_off_the_caller);
    tcase_add_test(tc, taken_back_never_closes_and_waits_follow_the_running_one);
    tcase_add_test(tc, running_close_cannot_be_taken_back);
    tcase_add_test(tc, destructor_finishes_posted_closes);
    tcase_add_test(tc, posts_from_many_threads_all_close);
    tcase_add_test(tc, newest_kept_until_more_come);
    tcase_add_test(tc, destructor_closes_held_ones);
    suite_add_tcase(s, tc);
    return s;
}
