// The allreduce time model (src/core/select/tuning.h) against the measurements it
// was fitted to (contrib/bench/results/2026-11-27_h200x4_model_*.csv: loom
// alone, each algorithm forced, 2-4 ranks, 8 B - 1 GiB): every prediction
// within 25% of the measured time, on the sizes' CTAs or a fixed number of
// them, and predictions that never shrink as the size grows.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/cuda_driver.h"
#include "core/comm/params.h"
#include "core/select/select.h"
#include "core/select/tuning.h"
#include "device/ring/ring_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

loomComm oneHost(int n) {
    loomComm c;
    c.nranks = n;
    c.maxChannels = 64; // the rings of 4x H200 (NV18), where the model was fitted
    c.ll.allPeersMapped = true;
    c.zc.ready = true;
    c.ll.maxBytes = 1 << 20;
    // The fitted constants are the launched kernels' (the model files were
    // measured before the resident kernel): predict as for ranks that share
    // a GPU, whose calls never go to it (non-blocking ones post there too
    // where the driver has stream memory operations, so that alone would
    // not keep a GPU host's run of these tests off it).
    c.order.hostWaitAllowed = false;
    c.gpuShared = true;
    return c;
}

// (bytes, loom's us) of a loom-bench CSV under contrib/bench/results.
std::vector<std::pair<size_t, double>> measured(const std::string &name) {
    const std::string path = std::string(LOOM_BENCH_RESULTS) + "/" + name;
    std::ifstream f(path);
    ck_assert_msg(f.good(), "cannot read %s", path.c_str());
    std::vector<std::pair<size_t, double>> points;
    std::string line;
    std::getline(f, line); // header: bytes,loom_us,...
    while (std::getline(f, line)) {
        std::istringstream row(line);
        std::string bytes, us;
        std::getline(row, bytes, ',');
        std::getline(row, us, ',');
        points.emplace_back(std::stoull(bytes), std::stod(us));
    }
    return points;
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
            const loomComm c = oneHost(n);
            for (const auto &[b, measuredUs] : measured("2026-11-27_h200x4_model_" + std::string(a.name) + "_np" +
                                                       std::to_string(n) + ".csv")) {
                if (b < 8) continue; // each run's first size: warm-up
                const double predicted = predictUs(&c, CallShape{loomCollAllReduce, b, b, 4, false}, a.algo);
                ck_assert(predicted > 0);
                const double err = std::fabs(predicted - measuredUs) / measuredUs;
                if (err > worst)
                    worst = err, worstAt = std::string(a.name) + " np" + std::to_string(n) + " " + std::to_string(b);
                ++points;
            }
        }
    ck_assert_int_ge(points, 200);
    ck_assert_msg(worst <= 0.25, "worst error %.0f%% at %s", worst * 100, worstAt.c_str());
}
END_TEST

// The same on a fixed number of CTAs (LOOM_NCHANNELS sweeps at 4 ranks,
// 64 KiB - 256 MiB: 2026-11-27_h200x4_channels_{zc,ring}_chN_np4.csv).
// The resident kernel's saving against the two paths measured in one device
// call (2x H200, 2 ranks; 4x H200, 4 ranks): every one-CTA size's difference
// within a quarter of it;
// TUNING's prediction applies it to one-shot calls up to
// LOOM_RESIDENT_MAX_BYTES only (non-blocking ones where they may post), on
// GPUs no two ranks share.
START_TEST(resident_saving_within_a_quarter_of_the_measurements) {
    for (const char *run : {"h200x2_%s_allreduce_np2", "h200x4_%s_allreduce_np4"}) {
        char l[64], r[64];
        snprintf(l, sizeof(l), run, "launch");
        snprintf(r, sizeof(r), run, "resident");
        const auto launched = measured("2026-11-27_" + std::string(l) + ".csv");
        const auto resident = measured("2026-11-27_" + std::string(r) + ".csv");
        ck_assert_int_eq(launched.size(), resident.size());
        ck_assert_int_ge(launched.size(), 4);
        for (size_t k = 1; k < launched.size() && launched[k].first <= kResidentSavedBytes; ++k) { // [0]: warm-up
            ck_assert(launched[k].first == resident[k].first);
            const double saved = launched[k].second - resident[k].second;
            ck_assert_msg(std::fabs(saved - kResidentSavedUs) <= 0.25 * kResidentSavedUs, "%s, %zu B: saved %.2f us",
                          l, launched[k].first, saved);
        }
    }
    loomComm c = oneHost(2);
    c.order.hostWaitAllowed = true; // a blocking call
    c.gpuShared = false;
    const CallShape small{loomCollAllReduce, 4096, 4096, 4, false}, big{loomCollAllReduce, 1 << 20, 1 << 20, 4, false};
    const CallShape mid{loomCollAllReduce, 8192, 8192, 4, false}; // resident, but several CTAs: no saving modelled
    ck_assert(residentFits(&c, mid) && predictCallUs(&c, mid, kAlgoOneShot) == predictUs(&c, mid, kAlgoOneShot));
    const double launchedUs = predictUs(&c, small, kAlgoOneShot);
    ck_assert(residentFits(&c, small) && !residentFits(&c, big)); // big: past LOOM_RESIDENT_MAX_BYTES
    ck_assert(std::fabs(launchedUs - predictCallUs(&c, small, kAlgoOneShot) - kResidentSavedUs) < 1e-9);
    ck_assert(predictCallUs(&c, big, kAlgoOneShot) == predictUs(&c, big, kAlgoOneShot));
    ck_assert(predictCallUs(&c, small, kAlgoRing) == predictUs(&c, small, kAlgoRing)); // other algorithms: none
    c.gpuShared = true; // ranks sharing a GPU never use it
    ck_assert(!residentFits(&c, small) && predictCallUs(&c, small, kAlgoOneShot) == launchedUs);
    c.gpuShared = false;
    // A non-blocking call posts only where loom's stream can wait for it on
    // the GPU (cuStreamWaitValue32), and LOOM_RESIDENT_NONBLOCKING allows it.
    c.order.hostWaitAllowed = false;
    const bool streamWaits = cudaDriver() && cudaDriver()->cuStreamWaitValue32;
    ck_assert(residentFits(&c, small) == (streamWaits && params().residentNonblocking > 0));
    if (!getenv("LOOM_RESIDENT_NONBLOCKING")) ck_assert_int_eq(params().residentNonblocking, 2); // posting by default
}
END_TEST

START_TEST(predictions_on_fixed_ctas_within_a_quarter) {
    const struct {
        const char *name;
        int algo, channels;
    } runs[] = {{"zc", kAlgoZeroCopy, 4},  {"zc", kAlgoZeroCopy, 8},  {"zc", kAlgoZeroCopy, 16},
                {"zc", kAlgoZeroCopy, 32}, {"zc", kAlgoZeroCopy, 64}, {"ring", kAlgoRing, 8},
                {"ring", kAlgoRing, 16},   {"ring", kAlgoRing, 32},   {"ring", kAlgoRing, 64}};
    const loomComm c = oneHost(4);
    int points = 0;
    double worst = 0;
    std::string worstAt;
    for (const auto &r : runs) {
        for (const auto &[b, measuredUs] : measured("2026-11-27_h200x4_channels_" + std::string(r.name) + "_ch" +
                                                   std::to_string(r.channels) + "_np4.csv")) {
            const double predicted = predictUs(&c, CallShape{loomCollAllReduce, b, b, 4, false}, r.algo, r.channels);
            const double err = std::fabs(predicted - measuredUs) / measuredUs;
            if (err > worst)
                worst = err, worstAt = std::string(r.name) + " on " + std::to_string(r.channels) + " CTAs, " + std::to_string(b);
            ++points;
        }
    }
    ck_assert_int_eq(points, 63);
    ck_assert_msg(worst <= 0.25, "worst error %.0f%% at %s", worst * 100, worstAt.c_str());
    // Few CTAs predict a slower call: at 256 MiB 4 zero-copy CTAs move less than 32.
    const CallShape big{loomCollAllReduce, 256u << 20, 256u << 20, 4, false};
    ck_assert(predictUs(&c, big, kAlgoZeroCopy, 4) > 1.4 * predictUs(&c, big, kAlgoZeroCopy, 32));
}
END_TEST

START_TEST(predictions_grow_with_size_and_only_where_modelled) {
    for (int n = 2; n <= 8; ++n) {
        const loomComm c = oneHost(n);
        for (int algo : {kAlgoOneShot, kAlgoZeroCopy, kAlgoRing}) {
            double last = 0;
            for (size_t b = 1; b <= (size_t(1) << 34); b *= 4) {
                // Never less for more bytes (equal where the ring adds a
                // channel per 64 KiB: its bandwidth grows with the size).
                const double us = predictUs(&c, CallShape{loomCollAllReduce, b, b, 4, false}, algo);
                ck_assert(us >= last - 1e-9 && us > 0);
                last = us;
            }
        }
        ck_assert(predictUs(&c, CallShape{loomCollAllGather, 1024, 256, 1, false}, kAlgoRing) < 0); // allreduce only
        ck_assert(predictUs(&c, CallShape{loomCollAllReduce, 1024, 1024, 4, false}, kAlgoTrees) < 0);
    }
    loomComm far = oneHost(4);
    far.spansHosts = true; // other links: no constants
    ck_assert(predictUs(&far, CallShape{loomCollAllReduce, 1024, 1024, 4, false}, kAlgoRing) < 0);
    loomComm shm = oneHost(4);
    shm.ll.allPeersMapped = false; // some pair through shared host memory
    ck_assert(predictUs(&shm, CallShape{loomCollAllReduce, 1024, 1024, 4, false}, kAlgoRing) < 0);
}
END_TEST

Suite *tuning_suite(void) {
    Suite *s = suite_create("tuning");
    TCase *t = tcase_create("tuning");
    tcase_add_test(t, predictions_within_a_quarter_of_the_measurements);
    tcase_add_test(t, predictions_on_fixed_ctas_within_a_quarter);
    tcase_add_test(t, resident_saving_within_a_quarter_of_the_measurements);
    tcase_add_test(t, predictions_grow_with_size_and_only_where_modelled);
    suite_add_tcase(s, t);
    return s;
}
