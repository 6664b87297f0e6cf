// Communicator creation never leaves a rank waiting for a peer that failed:
// ranks are threads over an in-process bootstrap.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "btl_gpu/net/net_transport.h"
#include "base/bootstrap.h"
#include "loom.h"
#include "config.h"
#include "unit_suites.h"

namespace {

// Allgather among `n` threads: each writes its slot, all wait, all read.
struct ThreadGroup {
    explicit ThreadGroup(int ranks) : n(ranks) {}
    int n;
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    unsigned generation = 0;
    std::vector<char> buf;

    void barrier() {
        std::unique_lock<std::mutex> l(mu);
        unsigned g = generation;
        if (++arrived == n) {
            arrived = 0;
            ++generation;
            cv.notify_all();
        } else {
            cv.wait(l, [&] { return generation != g; });
        }
    }
};

struct Rank {
    ThreadGroup *group;
    int rank;
};

int threadAllgather(void *ctx, const void *send, void *recv, size_t bytes) {
    Rank *r = static_cast<Rank *>(ctx);
    ThreadGroup *g = r->group;
    {
        std::lock_guard<std::mutex> l(g->mu);
        if (g->buf.size() < bytes * g->n) g->buf.resize(bytes * g->n);
    }
    g->barrier();
    memcpy(g->buf.data() + bytes * r->rank, send, bytes);
    g->barrier();
    memcpy(recv, g->buf.data(), bytes * g->n);
    g->barrier();
    return 0;
}

// Runs body(rank, bootstrap) on n threads over one in-process bootstrap.
template <typename Body>
void runRanks(int n, Body body) {
    ThreadGroup g(n);
    std::vector<Rank> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(Rank{&g, r});
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r)
        t.emplace_back([&, r] {
            loomBootstrap_t bs = {&ranks[r], threadAllgather, nullptr};
            body(r, &bs);
        });
    for (auto &x : t) x.join();
}

} // namespace

START_TEST(agree_all_reports_who_failed) {
    std::vector<loomResult_t> out(3);
    const loomResult_t local[3] = {loomSuccess, loomSuccess, loomSystemError};
    runRanks(3, [&](int r, const loomBootstrap_t *bs) { out[r] = loom::agreeAll(bs, r, 3, local[r], "a test stage"); });
    ck_assert_int_eq(out[0], loomRemoteError);
    ck_assert_int_eq(out[1], loomRemoteError);
    ck_assert_int_eq(out[2], loomSystemError); // its own error, not a remote one
}
END_TEST

START_TEST(all_ranks_fail_together_without_gpu) {
    // Here (CI: no driver) every rank fails at GPU setup; on a GPU machine the
    // ranks share one process, so mapping each other's memory fails instead.
    // Either way all must return an error; a hang trips the test timeout.
    const int n = 3;
    std::vector<loomResult_t> out(n, loomSuccess);
    std::vector<loomComm_t> comms(n, nullptr);
    loomUniqueId id;
    ck_assert_int_eq(loomGetUniqueId(&id), loomSuccess);
    runRanks(n, [&](int r, const loomBootstrap_t *bs) { out[r] = loomCommInitRank(&comms[r], n, id, r, 0, bs); });
    for (int r = 0; r < n; ++r) {
        ck_assert_int_ne(out[r], loomSuccess);
        ck_assert_ptr_null(comms[r]);
    }
    ck_assert_int_eq(loomCommInitRank(nullptr, n, id, 0, 0, nullptr), loomInvalidArgument);
    ThreadGroup g(1);
    Rank only{&g, 0};
    loomBootstrap_t bs = {&only, threadAllgather, nullptr};
    loomComm_t c;
    ck_assert_int_eq(loomCommInitRank(&c, 2, id, 5, 0, &bs), loomInvalidArgument);
}
END_TEST

START_TEST(net_setup_fails_together) {
    // The net transport's set-up is collective too. Here (no GPU driver) the
    // FIFOs cannot be allocated in mapped host memory on the ranks that have
    // net connections; rank 1 has none, but must join every exchange and
    // return the others' error. A hang trips the test timeout.
    const int n = 3;
    std::vector<loomResult_t> out(n, loomSuccess);
    std::vector<loom::NetLinks> links(n);
    runRanks(n, [&](int r, const loomBootstrap_t *bs) {
        const bool net = r != 1;
        const loom::NetCommon common{"", r, n, 5.0, 2};
        const loom::NetSetup s{net, net, (r + 1) % n, (r + n - 1) % n, 2, 4, 4096, 0, 0, 0};
        out[r] = loom::netConnect(common, {s}, bs, {&links[r]});
        loom::netClose(&links[r]);
    });
    for (int r = 0; r < n; ++r) ck_assert_int_ne(out[r], loomSuccess);
#ifdef LOOM_HAVE_UCX
    ck_assert_int_eq(out[1], loomRemoteError); // not its own failure
#else
    ck_assert_int_eq(out[1], loomNotSupported); // no net plugin in this build: every rank knows it alike
#endif
}
END_TEST

Suite *bootstrap_suite(void) {
    Suite *s = suite_create("bootstrap");
    TCase *tc = tcase_create("bootstrap");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, agree_all_reports_who_failed);
    tcase_add_test(tc, all_ranks_fail_together_without_gpu);
    tcase_add_test(tc, net_setup_fails_together);
    suite_add_tcase(s, tc);
    return s;
}
