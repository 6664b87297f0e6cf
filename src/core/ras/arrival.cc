#include "core/ras/arrival.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/debug.h"

namespace loom {

namespace {

// The inode of /proc/self/ns/pid: equal for processes that see the same pids.
uint64_t pidNamespace() {
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

} // namespace

loomResult_t ArrivalBoard::map(int fd, const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out) {
    const size_t bytes = (size_t)nslots * sizeof(ArrivalSlot) + extraBytes;
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return fail(loomSystemError, "arrival board %s: mmap: %s", name.c_str(), strerror(errno));
    ArrivalBoard *b = new ArrivalBoard;
    b->slots_ = static_cast<ArrivalSlot *>(p);
    b->nslots_ = nslots;
    b->extraBytes_ = extraBytes;
    b->name_ = name;
    *out = b;
    return loomSuccess;
}

loomResult_t ArrivalBoard::create(const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out) {
    *out = nullptr;
    if (nslots < 1) return fail(loomInternalError, "arrival board %s: %d slots", name.c_str(), nslots);
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return fail(loomSystemError, "arrival board: shm_open(%s): %s", name.c_str(), strerror(errno));
    if (ftruncate(fd, (off_t)((size_t)nslots * sizeof(ArrivalSlot) + extraBytes)) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(name.c_str());
        return fail(loomSystemError, "arrival board %s: %s", name.c_str(), strerror(e));
    }
    loomResult_t r = map(fd, name, nslots, extraBytes, out);
    if (r != loomSuccess) shm_unlink(name.c_str());
    else (*out)->owner_ = true;
    return r;
}

loomResult_t ArrivalBoard::open(const std::string &name, int nslots, size_t extraBytes, ArrivalBoard **out) {
    *out = nullptr;
    int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) return fail(loomSystemError, "arrival board: shm_open(%s): %s", name.c_str(), strerror(errno));
    return map(fd, name, nslots, extraBytes, out);
}

ArrivalBoard::~ArrivalBoard() {
    unlink();
    if (slots_) munmap(slots_, bytes());
}

void ArrivalBoard::unlink() {
    if (owner_) shm_unlink(name_.c_str());
    owner_ = false;
}

void ArrivalBoard::publish(int slot, int rank, int cudaDev, const char *busId) {
    ArrivalSlot &s = slots_[slot];
    s.rank = rank;
    s.cudaDev = cudaDev;
    snprintf(s.busId, sizeof(s.busId), "%s", busId);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(s.host, sizeof(s.host), "%s", host);
    s.pidNs = pidNamespace();
    __atomic_store_n(&s.pid, (int32_t)getpid(), __ATOMIC_RELEASE); // last: a filled slot
}

Arrival ArrivalBoard::read(int slot) const {
    const ArrivalSlot &s = slots_[slot];
    Arrival a;
    a.pid = __atomic_load_n(&s.pid, __ATOMIC_ACQUIRE);
    a.entered = s.entered.load(std::memory_order_relaxed);
    a.started = s.started.load(std::memory_order_relaxed);
    a.failedIn = s.failedIn.load(std::memory_order_relaxed);
    a.rank = s.rank;
    a.cudaDev = s.cudaDev;
    a.pidNs = s.pidNs;
    a.busId.assign(s.busId, strnlen(s.busId, sizeof(s.busId)));
    a.host.assign(s.host, strnlen(s.host, sizeof(s.host)));
    return a;
}

std::vector<Arrival> absentRanks(const ArrivalBoard &board, uint64_t entered) {
    std::vector<Arrival> out;
    for (int k = 0; k < board.slots(); ++k) {
        Arrival a = board.read(k);
        if (a.pid != 0 && a.entered < entered) out.push_back(a);
    }
    return out;
}

std::vector<Arrival> deadRanks(const ArrivalBoard &board) {
    std::vector<Arrival> out;
    const uint64_t ns = pidNamespace();
    for (int k = 0; k < board.slots(); ++k) {
        Arrival a = board.read(k);
        // A pid taken again by an unrelated process reads as alive, and a
        // pid of another namespace is not checked: the error then says
        // less, never something false about a live rank.
        if (a.pid > 0 && a.pidNs == ns && ns != 0 && kill(a.pid, 0) != 0 && errno == ESRCH) out.push_back(a);
    }
    return out;
}

int unfilledSlots(const ArrivalBoard &board) {
    int n = 0;
    for (int k = 0; k < board.slots(); ++k) n += board.read(k).pid == 0;
    return n;
}

namespace {

// "rank 3 (host h, pid 123, GPU 2, 0000:1b:00.0)"
std::string describeRank(const Arrival &a) {
    char line[160];
    snprintf(line, sizeof(line), "rank %d (host %s, pid %d, GPU %d, %s)", a.rank, a.host.c_str(), a.pid, a.cudaDev,
             a.busId.c_str());
    return line;
}

} // namespace

std::string describeRanks(const std::vector<Arrival> &ranks) {
    std::string s;
    for (const Arrival &a : ranks) s += (s.empty() ? "" : "; ") + describeRank(a);
    return s;
}

std::string describeAbsent(const std::vector<Arrival> &absent, uint64_t entered) {
    std::string s;
    for (const Arrival &a : absent)
        s += (s.empty() ? "" : "; ") + describeRank(a) + " entered " + std::to_string(a.entered) + " of " +
             std::to_string(entered) + " calls";
    return s;
}

} // namespace loom
