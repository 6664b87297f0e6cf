// The scan / exscan chain (src/device/scan/scan_schedule.h) on the one simulator
// (sched_sim.h): 1..64 ranks, counts 0..37 in chunks of 4 and 12, 1 and 3
// channels, FIFOs of depth 1 and 2, in place or not, against the left fold
// in rank order of a non-commutative op (so order mistakes show), the host's
// step counts against the walk, and mutated schedules that must fail.
#include <functional>
#include <string>
#include <vector>

#include "device/scan/scan_schedule.h"
#include "sched_sim.h"
#include "sim_ranks.h"
#include "unit_suites.h"

using namespace loom;
using namespace loom::sim;

namespace {

// Not commutative, not associative-free of order: op(a, b) != op(b, a).
Value chainOp(Value a, Value b) { return (a * 3 + b) % 1000000007; }

using OpFn = std::function<EdgeOp(const ScanSched &, int lane, size_t j)>;
EdgeOp plainOp(const ScanSched &s, int lane, size_t j) { return scanOp(s, lane, j); }

std::string simulate(int n, bool exclusive, size_t count, size_t chunk, int channels, int depth, bool inPlace,
                     const OpFn &opFn = plainOp) {
    std::vector<ScanSched> sched;
    for (int r = 0; r < n; ++r) sched.push_back(ScanSched{r, n, exclusive, count, chunk, channels});
    std::vector<Rank> ranks(n);
    for (int r = 0; r < n; ++r) {
        Rank &k = ranks[r];
        for (size_t i = 0; i < count; ++i) k.in.push_back(input(r, i));
        k.out.assign(count, kUntouched);
        if (inPlace) {
            k.out = k.in;
            k.inPlace = true;
        }
        k.lanes = channels;
        for (int c = 0; c < channels; ++c) {
            if (r + 1 < n) k.sendTo[(r + 1) * channels + c] = {r + 1, r * channels + c};
        }
        const ScanSched *s = &sched[r];
        k.count = [s](int lane) { return scanOpCount(*s, lane); };
        k.op = [s, opFn](int lane, size_t j) { return opFn(*s, lane, j); };
    }
    Run run = execute(ranks, depth, chunk, chainOp);
    if (!run.error.empty()) return run.error;
    for (int r = 0; r < n; ++r) {
        std::vector<unsigned long long> sends((size_t)n * channels, 0), recvs((size_t)n * channels, 0);
        scanStepCounts(sched[r], sends.data(), recvs.data());
        for (int k = 0; k < n * channels; ++k) {
            auto a = run.sent[r].find(k), b = run.recvd[r].find(k);
            if (sends[k] != (a == run.sent[r].end() ? 0 : a->second) ||
                recvs[k] != (b == run.recvd[r].end() ? 0 : b->second))
                return "rank " + std::to_string(r) + ": the host's step count differs from the walk";
        }
    }
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
            // Rank 0's exscan output is left alone: untouched, or its input in place.
            Value want = inPlace ? input(0, i) : kUntouched;
            const int upto = exclusive ? r - 1 : r;
            if (upto >= 0) {
                want = input(0, i);
                for (int q = 1; q <= upto; ++q) want = chainOp(want, input(q, i));
            }
            if (ranks[r].out[i] != want)
                return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
        }
    return "";
}

void runMatrix(bool exclusive) {
    for (int n = 1; n <= simRanks(64); n += n < 9 ? 1 : 11)
        for (size_t count : {0, 1, 5, 37})
            for (size_t chunk : {4, 12})
                for (int channels : {1, 3})
                    for (int depth : {1, 2})
                        for (int inPlace = 0; inPlace < 2; ++inPlace) {
                            std::string err = simulate(n, exclusive, count, chunk, channels, depth, inPlace);
                            if (!err.empty())
                                ck_abort_msg("%s: nranks %d count %zu chunk %zu channels %d depth %d in place %d: %s",
                                             exclusive ? "exscan" : "scan", n, count, chunk, channels, depth, inPlace,
                                             err.c_str());
                        }
}

bool someCaseFails(const OpFn &fn, bool exclusive) {
    for (int n = 2; n <= 6; ++n)
        for (int channels : {1, 3})
            if (!simulate(n, exclusive, 37, 4, channels, 2, false, fn).empty()) return true;
    return false;
}

EdgeOp wrongOrder(const ScanSched &s, int lane, size_t j) {
    EdgeOp o = scanOp(s, lane, j);
    o.inFirst = true; // op(mine, prefix)
    return o;
}
EdgeOp reducedToOutput(const ScanSched &s, int lane, size_t j) {
    EdgeOp o = scanOp(s, lane, j);
    o.rawDst = false; // exscan's output gets the prefix through this rank
    return o;
}
EdgeOp chunkOffByOne(const ScanSched &s, int lane, size_t j) {
    EdgeOp o = scanOp(s, lane, j);
    if (j > 0 && o.dst == kBufOut) o.dstAt -= 1;
    return o;
}
EdgeOp wrongLane(const ScanSched &s, int lane, size_t j) {
    EdgeOp o = scanOp(s, lane, j);
    if (o.send >= 0) o.send = (s.rank + 1) * s.channels + (lane + 1) % s.channels;
    return o;
}

} // namespace

START_TEST(scan_matches_left_fold) { runMatrix(false); }
END_TEST
START_TEST(exscan_matches_left_fold) { runMatrix(true); }
END_TEST

START_TEST(scan_mutations_fail) {
    ck_assert_msg(someCaseFails(wrongOrder, false), "scan: op(mine, prefix) was not caught");
    ck_assert_msg(someCaseFails(wrongOrder, true), "exscan: op(mine, prefix) was not caught");
    ck_assert_msg(someCaseFails(reducedToOutput, true), "exscan: the reduced value in the output was not caught");
    ck_assert_msg(someCaseFails(chunkOffByOne, false), "scan: a chunk written one element early was not caught");
    ck_assert_msg(someCaseFails(wrongLane, false), "scan: a send on another channel was not caught");
}
END_TEST

Suite *scan_schedule_suite(void) {
    Suite *s = suite_create("scan_schedule");
    TCase *tc = tcase_create("scan_schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, scan_matches_left_fold);
    tcase_add_test(tc, exscan_matches_left_fold);
    tcase_add_test(tc, scan_mutations_fail);
    suite_add_tcase(s, tc);
    return s;
}
