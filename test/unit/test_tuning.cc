// The allreduce time model (src/core/tuning.h) against the measurements it
// was fitted to (contrib/bench/results/2026-11-27_h200x4_model_*.csv: loom
// alone, each algorithm forced, 2-4 ranks, 8 B - 1 GiB): every prediction
// within 25% of the measured time, and predictions that grow with the size.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/select.h"
#include "core/tuning.h"
#include "device/ring_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

loomComm oneHost(int n) {
    loomComm c;
    c.nranks = n;
    c.allPeersMapped = true;
    c.zeroCopyReady = true;
    c.llMaxBytes = 1 << 20;
    return c;
}

} // namespace

START_TEST(predictions_within_a_quarter_of_the_measurements) {
    const struct {
        const char *name;
        int algo;
    } algos[] = {{"ll", kAlgoOneShot}, {"zc", kAlgoZeroCopy}, {"ring", kAlgoRing}};
    int points = 0;
    double worst = 0;
    std::string worstAt;
    for (int n = 2; n <= 4; ++n)
        for (const auto &a : algos) {
            char path[512];
            snprintf(path, sizeof(path), "%s/2026-11-27_h200x4_model_%s_np%d.csv", LOOM_BENCH_RESULTS, a.name, n);
            std::ifstream f(path);
            ck_assert_msg(f.good(), "cannot read %s", path);
            std::string line;
            std::getline(f, line); // header: bytes,loom_us,...
            const loomComm c = oneHost(n);
            while (std::getline(f, line)) {
                std::istringstream row(line);
                std::string bytes, us;
                std::getline(row, bytes, ',');
                std::getline(row, us, ',');
                const size_t b = std::stoull(bytes);
                if (b < 8) continue; // each run's first size: warm-up
                const double measured = std::stod(us);
                const double predicted = predictUs(&c, CallShape{kRingAllReduce, b, b, 4, false}, a.algo);
                ck_assert(predicted > 0);
                const double err = std::fabs(predicted - measured) / measured;
                if (err > worst) worst = err, worstAt = std::string(a.name) + " np" + std::to_string(n) + " " + bytes;
                ++points;
            }
        }
    ck_assert_int_ge(points, 200);
    ck_assert_msg(worst <= 0.25, "worst error %.0f%% at %s", worst * 100, worstAt.c_str());
}
END_TEST

START_TEST(predictions_grow_with_size_and_only_where_modelled) {
    for (int n = 2; n <= 8; ++n) {
        const loomComm c = oneHost(n);
        for (int algo : {kAlgoOneShot, kAlgoZeroCopy, kAlgoRing}) {
            double last = 0;
            for (size_t b = 1; b <= (size_t(1) << 34); b *= 4) {
                const double us = predictUs(&c, CallShape{kRingAllReduce, b, b, 4, false}, algo);
                ck_assert(us > last);
                last = us;
            }
        }
        ck_assert(predictUs(&c, CallShape{kRingAllGather, 1024, 256, 1, false}, kAlgoRing) < 0); // allreduce only
        ck_assert(predictUs(&c, CallShape{kRingAllReduce, 1024, 1024, 4, false}, kAlgoTrees) < 0);
    }
    loomComm far = oneHost(4);
    far.spansHosts = true; // other links: no constants
    ck_assert(predictUs(&far, CallShape{kRingAllReduce, 1024, 1024, 4, false}, kAlgoRing) < 0);
    loomComm shm = oneHost(4);
    shm.allPeersMapped = false; // some pair through shared host memory
    ck_assert(predictUs(&shm, CallShape{kRingAllReduce, 1024, 1024, 4, false}, kAlgoRing) < 0);
}
END_TEST

Suite *tuning_suite(void) {
    Suite *s = suite_create("tuning");
    TCase *t = tcase_create("tuning");
    tcase_add_test(t, predictions_within_a_quarter_of_the_measurements);
    tcase_add_test(t, predictions_grow_with_size_and_only_where_modelled);
    suite_add_tcase(s, t);
    return s;
}
