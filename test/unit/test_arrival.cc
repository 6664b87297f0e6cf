// The arrival board (src/core/ras/arrival.h) between two processes: created
// 0600, opened by another process, unlinked with both still mapped; the
// slots say who entered how many calls, a rank behind is named, and so is
// one whose process is gone.
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ras/arrival.h"
#include "unit_suites.h"

using namespace loom;

namespace {

std::string boardName() { return "/loom-arrive-test-" + std::to_string(getpid()); }

bool inDevShm(const std::string &name, mode_t *mode) {
    struct stat st;
    if (stat(("/dev/shm" + name).c_str(), &st) != 0) return false;
    *mode = st.st_mode & 0777;
    return true;
}

} // namespace

START_TEST(a_rank_behind_is_named) {
    const std::string name = boardName();
    ArrivalBoard *b = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 3, 0, &b), loomSuccess);
    mode_t mode = 0;
    ck_assert(inDevShm(name, &mode));
    ck_assert_int_eq(mode, 0600);
    int go[2], done[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid = fork();
    if (pid == 0) { // another rank of this host: slot 1, rank 7, two calls
        ArrivalBoard *mine = nullptr;
        if (ArrivalBoard::open(name, 3, 0, &mine) != loomSuccess) _exit(2);
        mine->publish(1, 7, 3, "0000:1b:00.0");
        mine->enter(1, 1);
        mine->enter(1, 2);
        char c = 1;
        if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(3); // the parent unlinks meanwhile
        mine->enter(1, 3); // still shared after the unlink
        if (write(done[1], &c, 1) != 1) _exit(4);
        delete mine;
        _exit(0);
    }
    b->publish(0, 2, 0, "0000:19:00.0");
    b->enter(0, 3);
    char c;
    ck_assert_int_eq(read(done[0], &c, 1), 1);
    b->unlink(); // both have it mapped: the name can go
    ck_assert(!inDevShm(name, &mode));
    // Slot 2 was never filled (pid 0): not a rank, never reported as
    // absent; counted as unknown.
    ck_assert_int_eq(unfilledSlots(*b), 1);
    std::vector<Arrival> absent = absentRanks(*b, 3);
    ck_assert_int_eq((int)absent.size(), 1);
    ck_assert_int_eq(absent[0].rank, 7);
    ck_assert_int_eq(absent[0].pid, (int)pid);
    ck_assert_int_eq(absent[0].cudaDev, 3);
    ck_assert_uint_eq(absent[0].entered, 2);
    const std::string text = describeAbsent(absent, 3);
    printf("%s\n", text.c_str());
    ck_assert_msg(text.find("rank 7 (host ") == 0, "%s", text.c_str());
    ck_assert_msg(text.find(", pid " + std::to_string(pid) + ", GPU 3, 0000:1b:00.0) entered 2 of 3 calls") !=
                      std::string::npos, "%s", text.c_str());
    ck_assert_int_eq(write(go[1], &c, 1), 1);
    ck_assert_int_eq(read(done[0], &c, 1), 1);
    ck_assert(absentRanks(*b, 3).empty()); // it caught up
    ck_assert(deadRanks(*b).empty());
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    // Its process is gone now (reaped): named as dead, the live one is not.
    std::vector<Arrival> dead = deadRanks(*b);
    ck_assert_int_eq((int)dead.size(), 1);
    ck_assert_int_eq(dead[0].rank, 7);
    ck_assert_msg(describeRanks(dead).find("rank 7 (host ") == 0, "%s", describeRanks(dead).c_str());
    delete b;
}
END_TEST

START_TEST(names_are_never_reused_or_left_behind) {
    const std::string name = boardName();
    ArrivalBoard *a = nullptr, *b = nullptr;
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &a), loomSuccess);
    ck_assert_int_eq(ArrivalBoard::create(name, 2, 0, &b), loomSystemError); // taken: a clear error
    ck_assert_ptr_null(b);
    delete a; // the creator's end unlinks what it did not unlink yet
    mode_t mode;
    ck_assert(!inDevShm(name, &mode));
    ck_assert_int_eq(ArrivalBoard::open(name, 2, 0, &b), loomSystemError);
    ck_assert_ptr_null(b);
}
END_TEST

Suite *arrival_suite(void) {
    Suite *s = suite_create("arrival");
    TCase *tc = tcase_create("arrival");
    tcase_add_test(tc, a_rank_behind_is_named);
    tcase_add_test(tc, names_are_never_reused_or_left_behind);
    suite_add_tcase(s, tc);
    return s;
}
