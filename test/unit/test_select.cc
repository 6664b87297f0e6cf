// The registry (src/core/algo/registry.h) and selection over it
// (src/core/select/select.cc) on communicators of known shape:
// one host with every peer mapped, ranks spanning hosts at 3, 4, 8 and 16
// ranks, LL thresholds at their defaults. Each case is the algorithm the
// measurements behind the table call for.
#include <cstring>
#include <string>

#include "core/comm/params.h"
#include "core/algo/registry.h"
#include "core/select/select.h"
#include "core/select/tuning.h"
#include "device/oneshot/oneshot_args.h"
#include "device/ring/ring_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

loomComm oneHost(int n) {
    loomComm c;
    c.nranks = n;
    c.maxChannels = 64; // the rings of 4x H200 (NV18), where the model was fitted
    c.rank = 0;
    c.ll.allPeersMapped = n <= 8;
    c.ll.maxBytes = 1 << 20;
    return c;
}

loomComm acrossHosts(int n, int rank = 0) {
    loomComm c;
    c.nranks = n;
    c.rank = rank;
    c.spansHosts = true;
    c.edges.rdReady = c.edges.treeReady = true;
    c.edges.rdMaxBytes = 128 << 10;
    c.edges.treeMaxBytes = 64 << 10;
    return c;
}

int pick(const loomComm &c, int coll, size_t bytes, size_t piece, size_t esize, bool ragged = false) {
    return selectAlgorithm(&c, CallShape{coll, bytes, piece, esize, ragged}).algo;
}

} // namespace

// Every entry complete, numbered by its place in algo_list.h, its key and
// name its own; the ring, which must always fit, last.
START_TEST(registry_entries_are_whole_and_numbered_in_order) {
    ck_assert_int_eq(kRegistrySize, kNumAlgos);
    for (int i = 0; i < kRegistrySize; ++i) {
        const AlgoEntry *e = kRegistry[i];
        ck_assert_int_eq(e->algo, i);
        ck_assert_ptr_eq(algoEntry(i), e);
        ck_assert(e->key && e->name && e->why && e->fits && e->enqueue && e->loadKernels && e->colls);
        ck_assert(e->proto == kProtoSimple || e->proto == kProtoLL || e->proto == kProtoLL128);
        for (int j = 0; j < i; ++j) {
            ck_assert_str_ne(e->key, kRegistry[j]->key);
            ck_assert_str_ne(e->name, kRegistry[j]->name);
        }
        unsigned mask = 0;
        ck_assert(parseAlgoMask(e->key, &mask) && mask == 1u << e->algo);
    }
    ck_assert_ptr_null(algoEntry(-1));
    ck_assert_ptr_null(algoEntry(kNumAlgos));
    const AlgoEntry *last = kRegistry[kRegistrySize - 1];
    ck_assert_int_eq(last->algo, kAlgoRing);
    ck_assert_int_eq(last->colls, (1u << LOOM_TABLE_COLLS) - 1);
    loomComm c = oneHost(4);
    ck_assert(last->fits(&c, CallShape{loomCollAllGather, size_t(1) << 40, size_t(1) << 38, 16, true}));
}
END_TEST

START_TEST(inside_a_host_one_shot_up_to_the_crossovers) {
    const loomComm c = oneHost(4);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 1 << 20, 1 << 20, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, (1 << 20) + 4, (1 << 20) + 4, 4), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 64, 64, 16), kAlgoRing); // 16-byte elements never ride LL lines
    // broadcast: 768 KiB of link bytes, 3 peers
    ck_assert_int_eq(pick(c, loomCollBroadcast, 256 << 10, 256 << 10, 1), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollBroadcast, 512 << 10, 512 << 10, 1), kAlgoRing);
    // allgather: 1.5 MiB of link bytes (512 KiB a piece at 4 ranks)
    ck_assert_int_eq(pick(c, loomCollAllGather, 2 << 20, 512 << 10, 1), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllGather, 4 << 20, 1 << 20, 1), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollReduceScatter, 2 << 20, 512 << 10, 16), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollReduce, 64 << 10, 64 << 10, 8), kAlgoOneShot);
    // ragged: the largest block decides
    ck_assert_int_eq(pick(c, loomCollAllGather, 1 << 20, 900 << 10, 1, true), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollAllGather, 1 << 20, 100 << 10, 1, true), kAlgoOneShot);
    // not every peer mapped: the ring, whatever the size
    loomComm d = oneHost(4);
    d.ll.allPeersMapped = false;
    ck_assert_int_eq(pick(d, loomCollAllReduce, 8, 8, 4), kAlgoRing);
    ck_assert_int_eq(pick(d, loomCollBroadcast, 8, 8, 1), kAlgoRing);
}
END_TEST

START_TEST(across_hosts_doubling_where_it_takes_fewer_hops) {
    // allreduce: recursive doubling up to 128 KiB, then the ring
    ck_assert_int_eq(pick(acrossHosts(4), loomCollAllReduce, 64 << 10, 64 << 10, 4), kAlgoRecursiveDoubling);
    ck_assert_int_eq(pick(acrossHosts(4), loomCollAllReduce, 256 << 10, 256 << 10, 4), kAlgoRing);
    loomComm noRd = acrossHosts(4);
    noRd.edges.rdReady = false;
    ck_assert_int_eq(pick(noRd, loomCollAllReduce, 32 << 10, 32 << 10, 4), kAlgoTrees);
    // the doubling family: not at 3 or 4 ranks (the ring's hops are fewer than
    // twice its own), yes at 8 and 16, not for ragged blocks, not above 128 KiB
    for (int coll : {loomCollBroadcast, loomCollReduce, loomCollAllGather, loomCollReduceScatter}) {
        ck_assert_int_eq(pick(acrossHosts(3), coll, 1024, 512, 4), kAlgoRing);
        ck_assert_int_eq(pick(acrossHosts(4), coll, 1024, 256, 4), kAlgoRing);
        for (int r = 0; r < 8; ++r) ck_assert_int_eq(pick(acrossHosts(8, r), coll, 1024, 128, 4), kAlgoDoubling);
        ck_assert_int_eq(pick(acrossHosts(16, 5), coll, 1024, 64, 4), kAlgoDoubling);
        ck_assert_int_eq(pick(acrossHosts(16), coll, 256 << 10, 16 << 10, 4), kAlgoRing);
    }
    ck_assert_int_eq(pick(acrossHosts(16), loomCollAllGather, 1024, 64, 1, true), kAlgoRing);
    // 9 ranks: 3 steps + the extra's two hops for allgather (10 >= 8), one for bcast (8 >= 8)
    ck_assert_int_eq(pick(acrossHosts(9), loomCollAllGather, 1024, 64, 1), kAlgoRing);
    ck_assert_int_eq(pick(acrossHosts(9), loomCollBroadcast, 1024, 1024, 1), kAlgoRing);
    ck_assert_int_eq(pick(acrossHosts(12), loomCollBroadcast, 1024, 1024, 1), kAlgoDoubling);
}
END_TEST

START_TEST(loom_algo_syntax) {
    unsigned m = 0;
    ck_assert(parseAlgoMask(nullptr, &m) && m == kAllAlgos);
    ck_assert(parseAlgoMask("", &m) && m == kAllAlgos);
    ck_assert(parseAlgoMask("ring", &m) && m == 1u << kAlgoRing);
    ck_assert(parseAlgoMask("OneShot,ring", &m) && m == ((1u << kAlgoOneShot) | (1u << kAlgoRing)));
    ck_assert(parseAlgoMask("^oneshot,ll_ring", &m) && m == (kAllAlgos & ~((1u << kAlgoOneShot) | (1u << kAlgoRingLL))));
    ck_assert(parseAlgoMask("trees,rd,doubling", &m) &&
              m == ((1u << kAlgoTrees) | (1u << kAlgoRecursiveDoubling) | (1u << kAlgoDoubling)));
    m = 7;
    ck_assert(!parseAlgoMask("tree", &m) && m == 7);  // unknown name: refused, mask untouched
    ck_assert(!parseAlgoMask("ring,", &m) && m == 7); // an empty name
    std::string all = "^"; // every key excluded: nothing left
    for (int i = 0; i < kRegistrySize; ++i) all += std::string(i ? "," : "") + kRegistry[i]->key;
    ck_assert(!parseAlgoMask(all.c_str(), &m) && m == 7);
    ck_assert(parseAlgoMask("ll128_ring", &m) && m == 1u << kAlgoRingLL128);
    ck_assert(parseAlgoMask("zerocopy", &m) && m == 1u << kAlgoZeroCopy);
}
END_TEST

// LOOM_PROTO narrows the algorithms to those of the listed protocols.
START_TEST(loom_proto_syntax) {
    const unsigned ll = (1u << kAlgoOneShot) | (1u << kAlgoRingLL), ll128 = 1u << kAlgoRingLL128;
    const unsigned simple = kAllAlgos & ~ll & ~ll128;
    unsigned m = 0;
    ck_assert(parseProtoAlgos(nullptr, &m) && m == kAllAlgos);
    ck_assert(parseProtoAlgos("LL", &m) && m == ll);
    ck_assert(parseProtoAlgos("ll128", &m) && m == ll128);
    ck_assert(parseProtoAlgos("simple", &m) && m == simple);
    ck_assert(parseProtoAlgos("^LL", &m) && m == (kAllAlgos & ~ll));
    ck_assert(parseProtoAlgos("LL,LL128,Simple", &m) && m == kAllAlgos);
    m = 7;
    ck_assert(!parseProtoAlgos("LL256", &m) && m == 7); // unknown: refused, untouched
    ck_assert(!parseProtoAlgos("^LL,Simple,LL128", &m) && m == 7);
    for (int a = 0; a < kNumAlgos; ++a)
        ck_assert_str_eq(protoName(algoProto(a)), (ll >> a) & 1 ? "LL" : (ll128 >> a) & 1 ? "LL128" : "Simple");
    // LOOM_PROTO=Simple (the mask params() builds): allreduce never on LL.
    loomComm c = oneHost(4);
    c.zc.ready = true;
    c.algoMask = simple;
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoZeroCopy);
    ck_assert_int_eq(pick(c, loomCollBroadcast, 8, 8, 1), kAlgoRing);
    c.algoMask = ll; // LOOM_PROTO=LL: LL where it fits, the Simple ring where nothing does
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 64 << 20, 64 << 20, 4), kAlgoRing);
    // LL128 only where the rings are NVLink (ll128Ready) and within its bound.
    c.algoMask = ll128;
    c.ring.ll128MaxBytes = 16 << 20;
    ck_assert_int_eq(pick(c, loomCollAllReduce, 1 << 20, 1 << 20, 4), kAlgoRing); // not ready
    c.ring.ll128Ready = true;
    ck_assert_int_eq(pick(c, loomCollAllReduce, 1 << 20, 1 << 20, 4), kAlgoRingLL128);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 32 << 20, 32 << 20, 4), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 1 << 20, 1 << 20, 16), kAlgoRing); // 16-byte elements
    ck_assert_int_eq(pick(c, loomCollAllGather, 1 << 20, 1 << 18, 1), kAlgoRing);  // allreduce only
    // Allowed beside the modelled ones, the unmodelled LL128 ring is passed
    // over: enabling it changes no choice the model makes.
    c.algoMask = kAllAlgos;
    c.ring.ll128MaxBytes = size_t(1) << 30;
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 2 << 20, 2 << 20, 4), kAlgoZeroCopy);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 64 << 20, 64 << 20, 4), kAlgoRing);
    c.ring.llMaxBytes = size_t(1) << 30; // the LL ring likewise
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
}
END_TEST

// LOOM_NCHANNELS fixes the count, capped by what an algorithm has; unset,
// the count follows the size.
START_TEST(loom_nchannels_fixes_the_count) {
    ck_assert_int_eq(channelsOr(0, 64, 3), 3);
    ck_assert_int_eq(channelsOr(5, 64, 3), 5);
    ck_assert_int_eq(channelsOr(99, 32, 3), 32);
    loomComm c = oneHost(4);
    c.maxChannels = 16;
    if (params().nchannels == 0) { // LOOM_NCHANNELS unset where the suite runs
        ck_assert_int_eq(ringChannels(&c, 1), 1);
        ck_assert_int_eq(ringChannels(&c, 1 << 30), 16);
        ck_assert_int_eq(oneShotChannels(1), 1);
        ck_assert_int_eq(oneShotChannels(size_t(1) << 30), kMaxOneShotBlocks);
        ck_assert_int_eq(zeroCopyChannels(size_t(1) << 30, 4, false), 32); // LOOM_ZERO_COPY_CTAS
        ck_assert_int_eq(allReduceChannels(&c, CallShape{loomCollAllReduce, 1 << 30, 1 << 30, 4, false}, kAlgoRing), 16);
        ck_assert_int_eq(allReduceChannels(&c, CallShape{loomCollAllGather, 1 << 30, 1 << 30, 4, false}, kAlgoRing), -1);
    }
}
END_TEST

// Allreduce inside a host where every algorithm may run: the time model
// (core/select/tuning.h) picks one-shot LL, then zero-copy, then the ring, at the
// crossovers measured on 4x H200 (contrib/bench/results/2026-11-27_h200x4_
// model_*.csv: at 4 ranks one-shot still won at 128 KiB and zero-copy at 256
// KiB; zero-copy at 16 MiB and the ring at 64 MiB; at 2 ranks zero-copy at
// 8 MiB, the ring at 32 MiB). A call that finds an unshareable buffer asks
// again without zero-copy.
START_TEST(allreduce_in_a_host_takes_the_fastest_predicted) {
    loomComm c = oneHost(4);
    c.zc.ready = true;
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 128 << 10, 128 << 10, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 256 << 10, 256 << 10, 4), kAlgoZeroCopy);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 16 << 20, 16 << 20, 16), kAlgoZeroCopy); // any element size
    ck_assert_int_eq(pick(c, loomCollAllReduce, 64 << 20, 64 << 20, 4), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 64 << 10, 64 << 10, 16), kAlgoZeroCopy); // 16-byte elements: no LL
    ck_assert_int_eq(pick(c, loomCollAllGather, 1 << 20, 256 << 10, 1), kAlgoOneShot); // allreduce only
    const Choice mib = selectAlgorithm(&c, CallShape{loomCollAllReduce, 1 << 20, 1 << 20, 4, false});
    ck_assert_int_eq(mib.algo, kAlgoZeroCopy);
    ck_assert_int_eq(mib.runnerUp, kAlgoOneShot);
    ck_assert(mib.us > 0 && mib.runnerUpUs > mib.us);
    const CallShape shape{loomCollAllReduce, 1 << 20, 1 << 20, 4, false};
    ck_assert_int_eq(selectAlgorithm(&c, shape, kAllAlgos & ~(1u << kAlgoZeroCopy)).algo, kAlgoOneShot);
    c.algoMask = kAllAlgos & ~(1u << kAlgoZeroCopy); // LOOM_ALGO=^zerocopy
    ck_assert_int_eq(pick(c, loomCollAllReduce, 4 << 20, 4 << 20, 4), kAlgoRing);
    c.algoMask = 1u << kAlgoZeroCopy; // LOOM_ALGO=zerocopy: honoured where the model would not
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoZeroCopy);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 1 << 30, 1 << 30, 4), kAlgoZeroCopy);
    loomComm two = oneHost(2);
    two.zc.ready = true;
    ck_assert_int_eq(pick(two, loomCollAllReduce, 8 << 20, 8 << 20, 4), kAlgoZeroCopy);
    ck_assert_int_eq(pick(two, loomCollAllReduce, 32 << 20, 32 << 20, 4), kAlgoRing);
    loomComm d = oneHost(4); // not ready (ranks span hosts, a pair unmapped, no pairwise bootstrap)
    ck_assert_int_eq(pick(d, loomCollAllReduce, 4 << 20, 4 << 20, 4), kAlgoRing);
    loomComm far = acrossHosts(4); // not modelled: the table's order, no prediction
    const Choice f = selectAlgorithm(&far, CallShape{loomCollAllReduce, 8, 8, 4, false});
    ck_assert_int_eq(f.algo, kAlgoRecursiveDoubling);
    ck_assert(f.us < 0);
}
END_TEST

// The model's choice never goes back as the size grows: one-shot, then
// zero-copy, then the ring, at 2 to 8 ranks, every element size.
START_TEST(allreduce_choices_are_monotonic_in_size) {
    const int order[kNumAlgos] = {0, 0, 0, 0, 0, 2, 1, 0}; // place of each Algo in the expected sequence
    for (int n = 2; n <= 8; ++n)
        for (size_t esize : {1, 4, 8, 16}) {
            loomComm c = oneHost(n);
            c.zc.ready = true;
            int last = -1;
            for (size_t bytes = 16; bytes <= (size_t(1) << 32); bytes *= 2) {
                const int a = pick(c, loomCollAllReduce, bytes, bytes, esize);
                ck_assert_msg(a == kAlgoOneShot || a == kAlgoZeroCopy || a == kAlgoRing, "n %d: algorithm %d", n, a);
                ck_assert_msg(order[a] >= last, "n %d esize %zu: %s at %zu B after a later one", n, esize,
                              algoName(a), bytes);
                last = order[a];
            }
            ck_assert_int_eq(last, order[kAlgoRing]); // the ring at the largest sizes
        }
}
END_TEST

START_TEST(loom_algo_restricts_the_table) {
    loomComm c = oneHost(4);
    c.algoMask = 1u << kAlgoRing; // LOOM_ALGO=ring: never one-shot
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoRing);
    ck_assert_int_eq(pick(c, loomCollBroadcast, 8, 8, 1), kAlgoRing);
    c.algoMask = kAllAlgos & ~(1u << kAlgoOneShot); // ^oneshot
    ck_assert_int_eq(pick(c, loomCollAllGather, 64, 16, 1), kAlgoRing);
    c.algoMask = 1u << kAlgoOneShot; // oneshot alone: where it does not fit, the ring all the same
    ck_assert_int_eq(pick(c, loomCollAllReduce, 8, 8, 4), kAlgoOneShot);
    ck_assert_int_eq(pick(c, loomCollAllReduce, 4 << 20, 4 << 20, 4), kAlgoRing);
    loomComm h = acrossHosts(4);
    h.algoMask = (1u << kAlgoTrees) | (1u << kAlgoRing); // no recursive doubling: trees take the small sizes
    ck_assert_int_eq(pick(h, loomCollAllReduce, 1024, 1024, 4), kAlgoTrees);
    ck_assert_int_eq(pick(h, loomCollAllReduce, 1 << 20, 1 << 20, 4), kAlgoRing);
    h.algoMask = kAllAlgos;
    ck_assert_int_eq(pick(h, loomCollAllReduce, 1024, 1024, 4), kAlgoRecursiveDoubling);
}
END_TEST

START_TEST(exchanges_one_shot_only_with_a_block_known_alike) {
    const char *why = nullptr;
    loomComm c = oneHost(4);
    ck_assert(exchangeOneShot(&c, 16 << 10, &why));                // alltoall, 16 KiB blocks
    ck_assert(exchangeOneShot(&c, 512 << 10, &why));               // 1.5 MiB of link bytes at 4 ranks
    ck_assert(!exchangeOneShot(&c, (512 << 10) + 8, &why));        // past the crossover
    ck_assert(!exchangeOneShot(&c, 0, &why));                      // a v-form: no bound known alike
    ck_assert_ptr_nonnull(strstr(why, "v-form"));
    loomComm two = oneHost(2);
    ck_assert(exchangeOneShot(&two, 1 << 20, &why));               // a whole slot at 2 ranks
    ck_assert(!exchangeOneShot(&two, (1 << 20) + 8, &why));        // past the slot
    loomComm d = oneHost(4);
    d.ll.allPeersMapped = false;                                      // a pair without p2p: the exchange kernel
    ck_assert(!exchangeOneShot(&d, 64, &why));
    loomComm big = oneHost(16);                                    // over 8 ranks: no one-shot slots
    big.ll.maxBytes = 0;
    ck_assert(!exchangeOneShot(&big, 64, &why));
    c.algoMask = kAllAlgos & ~(1u << kAlgoOneShot);                // LOOM_ALGO=^oneshot
    ck_assert(!exchangeOneShot(&c, 64, &why));
}
END_TEST

START_TEST(exchanges_choose_in_place_push_and_copy_engines_alike) {
    const size_t MiB = 1 << 20;
    const ExchangeKnobs k{256 << 10, 8 * MiB, 0, 64 * MiB}; // the defaults
    // In place: alltoall and scatter from 256 KiB; gathers through the
    // root's FIFOs up to 8 MiB.
    ck_assert_uint_eq(exchangeDirectLeast(k, false), 256 << 10);
    ck_assert_uint_eq(exchangeDirectLeast(k, true), 8 * MiB);
    // Pushed: only gathers whose agreed block reaches the copy engines'
    // threshold; never a v-form (no agreed block) nor an alltoall.
    ck_assert(!exchangePushes(k, true, 16 * MiB));
    ck_assert(exchangePushes(k, true, 64 * MiB));
    ck_assert(!exchangePushes(k, true, 0));
    ck_assert(!exchangePushes(k, false, 256 * MiB));
    ck_assert(!exchangeBlockOnEngines(k, 64 * MiB - 1));
    ck_assert(exchangeBlockOnEngines(k, 64 * MiB));
    // LOOM_EXCHANGE_DIRECT_PUSH: 1 pushes every gather (v-forms too) and no
    // alltoall, 2 every call.
    ExchangeKnobs one = k, two = k;
    one.push = 1;
    two.push = 2;
    ck_assert(exchangePushes(one, true, 0) && exchangePushes(one, true, 4096) && !exchangePushes(one, false, 4096));
    ck_assert(exchangePushes(two, false, 4096) && exchangePushes(two, true, 0));
    // LOOM_EXCHANGE_COPY_ENGINE_BYTES=0: no copy engines, gathers pulled.
    ExchangeKnobs off = k;
    off.copyEngineBytes = 0;
    ck_assert(!exchangePushes(off, true, 1024 * MiB));
    ck_assert(!exchangeBlockOnEngines(off, 1024 * MiB));
}
END_TEST

Suite *select_suite(void) {
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("select");
    tcase_add_test(tc, registry_entries_are_whole_and_numbered_in_order);
    tcase_add_test(tc, inside_a_host_one_shot_up_to_the_crossovers);
    tcase_add_test(tc, across_hosts_doubling_where_it_takes_fewer_hops);
    tcase_add_test(tc, loom_algo_syntax);
    tcase_add_test(tc, loom_proto_syntax);
    tcase_add_test(tc, loom_nchannels_fixes_the_count);
    tcase_add_test(tc, loom_algo_restricts_the_table);
    tcase_add_test(tc, allreduce_in_a_host_takes_the_fastest_predicted);
    tcase_add_test(tc, allreduce_choices_are_monotonic_in_size);
    tcase_add_test(tc, exchanges_one_shot_only_with_a_block_known_alike);
    tcase_add_test(tc, exchanges_choose_in_place_push_and_copy_engines_alike);
    suite_add_tcase(s, tc);
    return s;
}
