// The descriptor board (src/core/ipc/desc_board.h) between processes: three
// forked ranks run thousands of exchanges over one shared mapping, with
// random pauses so that ranks run ahead of each other; every record read is
// the one its rank posted for that exchange. A rank that never posts is
// named within the timeout.
#include <cstdint>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/ipc/desc_board.h"
#include "core/ras/watchdog.h"
#include "unit_suites.h"

using namespace loom;

namespace {

struct Record {
    uint64_t rank, seq;
    uint64_t words[24]; // a BufferDesc pair's size, filled from (rank, seq)
};

Record recordOf(int rank, uint64_t seq) {
    Record r;
    r.rank = (uint64_t)rank;
    r.seq = seq;
    for (int i = 0; i < 24; ++i) r.words[i] = seq * 1000003u + (uint64_t)rank * 7919u + (uint64_t)i;
    return r;
}

// A host-side wait bounded to `seconds` (as LOOM_TIMEOUT would), no watchdog.
WaitLimit bounded(double seconds) {
    WaitLimit l = {};
    l.hardCycles = (unsigned long long)(seconds * 1e9);
    return l;
}

// One rank's part: `calls` exchanges; returns the number of wrong records.
int runRank(void *area, int n, int rank, uint64_t calls) {
    DescBoard board(area, n, rank, sizeof(Record));
    std::mt19937 rng((unsigned)rank * 31 + 5);
    std::vector<Record> all((size_t)n);
    int wrong = 0;
    for (uint64_t seq = 1; seq <= calls; ++seq) {
        if (rng() % 64 == 0) usleep(rng() % 200); // fall behind now and then
        const Record mine = recordOf(rank, seq);
        int absent = -1;
        WaitEnd why;
        if (board.exchange(seq, &mine, all.data(), bounded(10.0), &absent, &why) != loomSuccess) return 1000;
        for (int q = 0; q < n; ++q) {
            const Record want = recordOf(q, seq);
            wrong += memcmp(&all[(size_t)q], &want, sizeof(Record)) != 0;
        }
    }
    return wrong;
}

} // namespace

START_TEST(records_pass_between_processes) {
    const int n = 3;
    const size_t bytes = DescBoard::bytes(n, sizeof(Record));
    void *area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(area != MAP_FAILED);
    std::vector<pid_t> kids;
    for (int r = 1; r < n; ++r) {
        pid_t pid = fork();
        if (pid == 0) _exit(runRank(area, n, r, 5000) ? 1 : 0);
        kids.push_back(pid);
    }
    const int wrong = runRank(area, n, 0, 5000);
    int bad = 0;
    for (pid_t k : kids) {
        int status = 0;
        waitpid(k, &status, 0);
        bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    munmap(area, bytes);
    ck_assert_int_eq(wrong, 0);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(a_rank_that_never_posts_is_named) {
    const size_t bytes = DescBoard::bytes(3, sizeof(Record));
    std::vector<char> area(bytes, 0);
    DescBoard board(area.data(), 3, 0, sizeof(Record));
    // Rank 1 posted exchange 1 (as if from another process); rank 2 never did.
    DescBoard other(area.data(), 3, 1, sizeof(Record));
    const Record one = recordOf(1, 1);
    std::vector<Record> all(3);
    int absent = -1;
    // Rank 1 posts, then waits for rank 0, which has not posted yet.
    WaitEnd why = kWaitGoesOn;
    ck_assert_int_eq(other.exchange(1, &one, all.data(), bounded(0.2), &absent, &why), loomRemoteError);
    ck_assert_int_eq(absent, 0);
    ck_assert_int_eq(why, kWaitTimedOut);
    const Record zero = recordOf(0, 1);
    absent = -1;
    ck_assert_int_eq(board.exchange(1, &zero, all.data(), bounded(0.2), &absent, &why), loomRemoteError);
    ck_assert_int_eq(absent, 2);
    ck_assert(memcmp(&all[1], &one, sizeof(Record)) == 0); // rank 1's record was read before rank 2 was waited for
}
END_TEST

Suite *desc_board_suite(void) {
    Suite *s = suite_create("desc_board");
    TCase *t = tcase_create("desc_board");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, records_pass_between_processes);
    tcase_add_test(t, a_rank_that_never_posts_is_named);
    suite_add_tcase(s, t);
    return s;
}
