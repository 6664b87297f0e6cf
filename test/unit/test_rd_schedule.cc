// Schedule simulation for recursive doubling: the ops of
// src/device/rd_schedule.h run over host buffers for 1..70 ranks (powers of
// two and ranks with extras), with a FIFO of `depth` slots each way on every
// edge (the peers of rd_args.h). Ranks take turns and run their next op only
// when it can go (a receive needs a slot, a send a free one), as the
// kernel's flags allow; a sweep in which nobody moves is a deadlock. Slots
// carry the chunk their sender meant. With a sum every rank must end with
// the total; with an op that neither commutes nor associates every rank must
// still end with the same bits (both ends of an exchange reduce alike).
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "device/rd_args.h"
#include "device/rd_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Slot {
    size_t chunk;
    std::vector<uint64_t> data;
};

using Combine = std::function<uint64_t(uint64_t, uint64_t)>;

uint64_t input(int rank, size_t i) { return (uint64_t)(rank + 1) * 1000003u + i * 7919u; }

// The rank at the other end of `edge` (rd_args.h's peers).
int peerOf(int rank, int n, int edge) {
    const RdPlan q = rdPlan(rank, n);
    if (edge == kRdExtraEdge) return q.extra >= 0 ? q.extra : q.host;
    return rdPartner(rank, edge);
}

// Runs the schedule; returns every rank's output (empty on deadlock).
std::vector<std::vector<uint64_t>> simulate(int n, size_t count, size_t chunkElems, size_t depth, const Combine &op) {
    const size_t nchunks = (count + chunkElems - 1) / chunkElems;
    std::vector<std::vector<uint64_t>> in(n, std::vector<uint64_t>(count)), out(n, std::vector<uint64_t>(count, 0));
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) in[r][i] = input(r, i);
    std::map<std::pair<int, int>, std::deque<Slot>> fifo; // (from, to)
    std::vector<size_t> next(n, 0);
    std::vector<RdRole> role(n);
    for (int r = 0; r < n; ++r) role[r] = rdRoleOf(r, n);
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < n; ++r) {
            if (next[r] >= rdOpCount(role[r], nchunks)) continue;
            const RdOp o = rdOp(role[r], nchunks, next[r]);
            const size_t off = o.chunk * chunkElems, len = std::min(chunkElems, count - off);
            const std::vector<uint64_t> &value = o.fromIn ? in[r] : out[r];
            if (o.kind == kRdCopy) {
                for (size_t i = 0; i < len; ++i) out[r][off + i] = in[r][off + i];
            } else {
                const int peer = peerOf(r, n, o.edge);
                ck_assert(peer >= 0 && peer < n && peer != r);
                if (o.kind == kRdSend) {
                    std::deque<Slot> &f = fifo[{r, peer}];
                    if (f.size() >= depth) continue; // no credit yet
                    f.push_back(Slot{o.chunk, std::vector<uint64_t>(value.begin() + off, value.begin() + off + len)});
                } else {
                    std::deque<Slot> &f = fifo[{peer, r}];
                    if (f.empty()) continue; // nothing arrived yet
                    Slot s = f.front();
                    f.pop_front();
                    ck_assert_uint_eq(s.chunk, o.chunk);
                    ck_assert_uint_eq(s.data.size(), len);
                    for (size_t i = 0; i < len; ++i)
                        out[r][off + i] = !o.reduce    ? s.data[i]
                                          : o.inFirst ? op(value[off + i], s.data[i])
                                                      : op(s.data[i], value[off + i]);
                }
            }
            ++next[r];
            moved = true;
        }
    }
    for (int r = 0; r < n; ++r)
        if (next[r] < rdOpCount(role[r], nchunks)) return {};
    for (const auto &f : fifo) ck_assert(f.second.empty()); // nothing left in a FIFO
    return out;
}

} // namespace

START_TEST(recursive_doubling_sums_on_every_rank) {
    for (int n = 1; n <= 70; ++n)
        for (size_t count : {(size_t)1, (size_t)5, (size_t)64})
            for (size_t depth : {(size_t)1, (size_t)4}) {
                auto out = simulate(n, count, 8, depth, [](uint64_t a, uint64_t b) { return a + b; });
                ck_assert_msg(!out.empty(), "deadlock: %d ranks, %zu elements, depth %zu", n, count, depth);
                for (size_t i = 0; i < count; ++i) {
                    uint64_t want = 0;
                    for (int q = 0; q < n; ++q) want += input(q, i);
                    for (int r = 0; r < n; ++r) ck_assert_uint_eq(out[r][i], want);
                }
            }
}
END_TEST

START_TEST(every_rank_ends_with_the_same_bits) {
    // a*3 + b: neither commutes nor associates, like a float min of -0 and
    // +0 or a sum that rounds. Identical results need both ends of every
    // exchange (and a host and its extra) to reduce in the same order.
    auto op = [](uint64_t a, uint64_t b) { return a * 3 + b; };
    for (int n = 2; n <= 70; ++n) {
        auto out = simulate(n, 37, 8, 2, op);
        ck_assert(!out.empty());
        for (int r = 1; r < n; ++r) ck_assert_msg(out[r] == out[0], "%d ranks: rank %d differs from rank 0", n, r);
    }
}
END_TEST

Suite *rd_schedule_suite(void) {
    Suite *s = suite_create("rd_schedule");
    TCase *tc = tcase_create("rd_schedule");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, recursive_doubling_sums_on_every_rank);
    tcase_add_test(tc, every_rank_ends_with_the_same_bits);
    suite_add_tcase(s, tc);
    return s;
}
