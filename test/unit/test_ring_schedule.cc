// Schedule simulation: the ring allreduce schedule of src/device/ring_schedule.h
// (the same functions the kernel runs) executed over host buffers, with FIFOs
// between neighbours, for 1..64 ranks, several channels and awkward counts.
// Each slot carries the chunk index and length its sender meant, so a rank
// that expects another chunk than it receives fails the test.
#include <cstdint>
#include <deque>
#include <vector>

#include "device/ring_schedule.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Slot {
    size_t round;
    int chunk;
    std::vector<int64_t> data;
};

int64_t input(int rank, size_t i) { return (int64_t)(rank + 1) * 1000003 + (int64_t)(i * 7 % 1009); }

// Runs one allreduce of `count` elements (element size 4 bytes, as the kernel's
// alignment rules for a 4-byte type) and returns the number of wrong outputs.
// *sends is set to the FIFO steps a channel used, summed over channels.
long simulate(int nranks, int nchannels, size_t count, size_t slotElems, uint64_t *sends) {
    const size_t align = 4; // 16 bytes of a 4-byte type
    std::vector<std::vector<int64_t>> in(nranks, std::vector<int64_t>(count)), out = in;
    for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < count; ++i) in[r][i] = input(r, i), out[r][i] = -1;
    *sends = 0;
    long bad = 0;
    for (int ch = 0; ch < nchannels; ++ch) {
        size_t b, e;
        channelRange(count, nchannels, ch, align * 4, &b, &e);
        size_t n = e - b;
        size_t chunkElems = ringChunkElems(n, nranks, slotElems, align);
        size_t rounds = nranks > 1 ? ringRounds(n, nranks, chunkElems) : 0;
        std::vector<std::deque<Slot>> fifo(nranks); // fifo[r]: slots sent to r
        for (size_t round = 0; round < rounds; ++round) {
            for (int s = 0; s < ringStepsPerRound(nranks); ++s) {
                std::vector<Slot> outgoing(nranks);
                std::vector<bool> sending(nranks, false);
                for (int r = 0; r < nranks; ++r) {
                    RingStep st = ringAllreduceStep(r, nranks, s);
                    size_t off, len;
                    ringChunk(n, nranks, chunkElems, round, st.chunk, &off, &len);
                    std::vector<int64_t> v(len);
                    if (st.recv) {
                        if (fifo[r].empty()) return -1000000; // deadlock: nothing was sent
                        Slot got = fifo[r].front();
                        fifo[r].pop_front();
                        if (got.round != round || got.chunk != st.chunk || got.data.size() != len) return -2000000;
                        v = got.data;
                    } else {
                        for (size_t i = 0; i < len; ++i) v[i] = in[r][b + off + i];
                    }
                    if (st.reduce)
                        for (size_t i = 0; i < len; ++i) v[i] += in[r][b + off + i];
                    if (st.toOutput)
                        for (size_t i = 0; i < len; ++i) out[r][b + off + i] = v[i];
                    if (st.send) {
                        outgoing[r] = Slot{round, st.chunk, v};
                        sending[r] = true;
                        ++*sends;
                    }
                }
                for (int r = 0; r < nranks; ++r)
                    if (sending[r]) fifo[(r + 1) % nranks].push_back(outgoing[r]);
            }
        }
        for (int r = 0; r < nranks; ++r)
            if (!fifo[r].empty()) return -3000000; // sent but never received
    }
    if (nranks == 1) out = in; // the kernel copies in to out
    for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < count; ++i) {
            int64_t want = 0;
            for (int q = 0; q < nranks; ++q) want += input(q, i);
            if (out[r][i] != want) ++bad;
        }
    return bad;
}

} // namespace

START_TEST(steps_are_well_formed) {
    for (int n = 2; n <= 64; ++n) {
        int sends = 0, recvs = 0, outputs[64] = {0};
        for (int s = 0; s < ringStepsPerRound(n); ++s) {
            RingStep st = ringAllreduceStep(0, n, s);
            sends += st.send;
            recvs += st.recv;
            if (st.toOutput) outputs[st.chunk]++;
        }
        ck_assert_int_eq(sends, ringSendsPerRound(n));
        ck_assert_int_eq(recvs, ringSendsPerRound(n));
        for (int c = 0; c < n; ++c) ck_assert_int_eq(outputs[c], 1); // every chunk written once
    }
}
END_TEST

START_TEST(ring_allreduce_matches_reference) {
    const size_t counts[] = {0, 1, 3, 7, 16, 63, 1000, 4099};
    const int channels[] = {1, 2, 3, 7};
    const size_t slots[] = {4, 8, 12};
    for (int n = 1; n <= 64; n += (n < 8 ? 1 : 7))
        for (size_t count : counts)
            for (int nch : channels)
                for (size_t slot : slots) {
                    uint64_t sends = 0;
                    long bad = simulate(n, nch, count, slot, &sends);
                    if (bad != 0)
                        ck_abort_msg("nranks %d channels %d count %zu slot %zu: %ld (negative: FIFO protocol broken)",
                                     n, nch, count, slot, bad);
                }
}
END_TEST

Suite *ring_schedule_suite(void) {
    Suite *s = suite_create("ring_schedule");
    TCase *tc = tcase_create("ring_schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, steps_are_well_formed);
    tcase_add_test(tc, ring_allreduce_matches_reference);
    suite_add_tcase(s, tc);
    return s;
}
