// Pieces shared by the net plugin tests (ucx over TCP, ib on soft-RoCE): a
// message set of awkward sizes with a byte pattern, a bounded wait for
// requests, and host FIFOs for the proxy tests.
#pragma once

#include <atomic>
#include <check.h>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <random>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "btl_gpu/net/net.h"
#include "proxy/proxy.h"

namespace nettest {

inline double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline unsigned char pattern(size_t msg, size_t i) { return (unsigned char)(msg * 31 + i * 7 + 1); }

struct Msg {
    std::vector<unsigned char> buf;
    size_t size;
    void *mr = nullptr;
    void *req = nullptr;
    bool done = false;
};

// The big sizes 0 B .. maxBytes, then `small` messages of 1..small bytes.
inline std::vector<Msg> messages(size_t maxBytes, int small) {
    std::vector<Msg> m;
    for (size_t s : {(size_t)0, (size_t)1, (size_t)7, (size_t)4096, (size_t)65537, (size_t)(1u << 20) + 3, maxBytes})
        m.push_back(Msg{{}, s});
    for (int i = 0; i < small; ++i) m.push_back(Msg{{}, (size_t)i + 1});
    return m;
}

// Tests every request until all are done or `deadline`; returns the first error.
inline loomResult_t waitAll(const loom::net::NetPlugin *p, std::vector<Msg> &m, double deadline,
                            std::vector<size_t> *sizes) {
    size_t left = 0;
    for (auto &x : m) left += !x.done;
    while (left && now() < deadline)
        for (size_t i = 0; i < m.size(); ++i) {
            if (m[i].done) continue;
            int done = 0;
            size_t n = 0;
            loomResult_t r = p->test(m[i].req, &done, &n);
            if (r != loomSuccess) return r;
            if (done) {
                m[i].done = true;
                if (sizes) (*sizes)[i] = n;
                --left;
            }
        }
    return left ? loomInProgress : loomSuccess;
}

// Every message arrived whole, with its size, and the 16 guard bytes after
// it (0xee) are untouched.
inline void checkReceived(const std::vector<Msg> &m, const std::vector<size_t> &got) {
    for (size_t k = 0; k < m.size(); ++k) {
        ck_assert_uint_eq(got[k], m[k].size);
        for (size_t i = 0; i < m[k].size; ++i)
            if (m[k].buf[i] != pattern(k, i)) ck_abort_msg("message %zu byte %zu corrupted", k, i);
        for (size_t i = m[k].size; i < m[k].size + 16; ++i) ck_assert_uint_eq(m[k].buf[i], 0xee);
    }
}

inline int childStatus(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

// Forks the sending process — childMain(fd) reads the listen handle from fd
// and returns its exit status — listens, hands it the handle, accepts.
// The child starts before the parent initialises the plugin: neither verbs
// contexts nor UCX survive fork.
// Forks a child running childMain(read end of a pipe); returns its pid and
// the write end, through which the parent hands it the listen handle.
template <typename ChildMain> pid_t forkWithPipe(ChildMain childMain, int *writeFd) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        _exit(childMain(fds[0]));
    }
    close(fds[0]);
    *writeFd = fds[1];
    return pid;
}

// Hands the listen handle to the child at the pipe's write end (closed).
inline void giveHandle(int writeFd, const loom::net::Handle &h) {
    ck_assert_int_eq((int)write(writeFd, &h, sizeof(h)), (int)sizeof(h));
    close(writeFd);
}

template <typename ChildMain>
pid_t startPair(const loom::net::NetPlugin *p, void **listenComm, void **recvComm, ChildMain childMain) {
    int toChild;
    pid_t pid = forkWithPipe(childMain, &toChild);
    ck_assert_int_eq(p->init(), loomSuccess);
    loom::net::Handle h;
    ck_assert_int_eq(p->listen(0, &h, listenComm), loomSuccess);
    giveHandle(toChild, h);
    *recvComm = nullptr;
    for (double end = now() + 30; !*recvComm && now() < end;)
        ck_assert_int_eq(p->accept(*listenComm, recvComm), loomSuccess);
    ck_assert_msg(*recvComm, "accept did not complete in 30 s");
    return pid;
}

// Proxy tests: steps of 0..slot bytes through 4-slot FIFOs in host memory.
constexpr int kSlots = 4;
constexpr size_t kSlotBytes = 64 * 1024;
inline size_t stepBytes(uint64_t s) { return (size_t)(s * 7919) % (kSlotBytes + 1); }

struct HostFifo {
    std::vector<char> slots = std::vector<char>(kSlots * kSlotBytes);
    volatile uint64_t tail = 0, head = 0, sizes[kSlots] = {};
    void *mr = nullptr;
    loom::ProxyFifo view() { return loom::ProxyFifo{slots.data(), kSlotBytes, kSlots, &tail, &head, sizes, mr}; }
};

// The sending "GPU": writes `steps` steps into the FIFO as the proxy frees
// slots (the ring kernels' credit wait), kicking it as the host would.
// 0 on success, else a code for the test's exit status.
inline int proxyProduce(loom::Proxy &proxy, HostFifo &f, uint64_t steps, double seconds) {
    double end = now() + seconds;
    for (uint64_t s = 0; s < steps; ++s) {
        while (s - f.head >= (uint64_t)kSlots)
            if (now() > end || proxy.error() != loomSuccess) return 7;
        char *slot = f.slots.data() + (s % kSlots) * kSlotBytes;
        for (size_t i = 0; i < stepBytes(s); ++i) slot[i] = (char)pattern(s, i);
        f.sizes[s % kSlots] = stepBytes(s);
        std::atomic_thread_fence(std::memory_order_release);
        f.tail = s + 1;
        if (s % 256 == 0) proxy.kick();
    }
    while (f.head < steps)
        if (now() > end || proxy.error() != loomSuccess) return 8;
    return 0;
}

// The receiving "GPU": checks every step as the proxy delivers it and frees
// the slot. Returns "" or what went wrong.
inline std::string proxyConsume(loom::Proxy &proxy, HostFifo &f, uint64_t steps, double seconds) {
    double end = now() + seconds;
    for (uint64_t s = 0; s < steps; ++s) {
        while (f.tail <= s)
            if (now() > end || proxy.error() != loomSuccess) return "step " + std::to_string(s) + " never arrived";
        std::atomic_thread_fence(std::memory_order_acquire);
        const char *slot = f.slots.data() + (s % kSlots) * kSlotBytes;
        if (f.sizes[s % kSlots] != stepBytes(s)) return "step " + std::to_string(s) + ": wrong size";
        for (size_t i = 0; i < stepBytes(s); ++i)
            if ((unsigned char)slot[i] != pattern(s, i))
                return "step " + std::to_string(s) + " byte " + std::to_string(i) + " corrupted";
        f.head = s + 1;
    }
    return "";
}

// Random traffic, the same pattern on both sides from one seed: message sizes
// log-uniform in 0 .. maxBytes, the sender and the receiver each keeping a
// window of 1..16 requests in flight that changes as they go, with pauses,
// and the receiver posting up to 64 bytes more than comes. The seed is
// LOOM_TEST_SEED or the time, printed so a failure can be replayed.
inline uint32_t trafficSeed() {
    const char *e = getenv("LOOM_TEST_SEED");
    uint32_t seed = e && *e ? (uint32_t)strtoul(e, nullptr, 0) : (uint32_t)time(nullptr);
    printf("random traffic: LOOM_TEST_SEED=%u\n", seed);
    fflush(stdout);
    return seed;
}

inline std::vector<size_t> trafficSizes(uint32_t seed, int n, size_t maxBytes) {
    std::mt19937 g(seed);
    std::vector<size_t> sizes(n);
    const double top = std::log2((double)maxBytes + 1);
    for (int k = 0; k < n; ++k)
        sizes[k] = g() % 8 == 0 ? 0 : (size_t)std::exp2(std::uniform_real_distribution<double>(0, top)(g)) - 1;
    return sizes;
}

// One side of the random traffic. Returns "" or what went wrong.
inline std::string randomTraffic(const loom::net::NetPlugin *p, void *comm, bool send, uint32_t seed, int n,
                                 size_t maxBytes, double seconds) {
    const std::vector<size_t> sizes = trafficSizes(seed, n, maxBytes);
    std::mt19937 g(seed * 2654435761u + (send ? 1 : 2)); // each side its own timing
    std::vector<Msg> m(n);
    std::vector<size_t> extra(n, 0);
    const double end = now() + seconds;
    int posted = 0, done = 0, window = 1;
    while (done < n) {
        if (now() > end) return "timed out with " + std::to_string(n - done) + " messages left";
        if (g() % 64 == 0) window = 1 + (int)(g() % 16);
        while (posted < n && posted - done < window) {
            Msg &x = m[posted];
            if (!x.mr) {
                x.size = sizes[posted];
                extra[posted] = send ? 0 : g() % 65;
                x.buf.assign(x.size + extra[posted] + 16, 0xee);
                if (send)
                    for (size_t i = 0; i < x.size; ++i) x.buf[i] = pattern(posted, i);
                if (p->regMr(comm, x.buf.data(), x.buf.size(), loom::net::MemType::Host, &x.mr) != loomSuccess)
                    return "regMr of message " + std::to_string(posted);
            }
            loomResult_t r = send ? p->isend(comm, x.buf.data(), x.size, posted, x.mr, &x.req)
                                  : p->irecv(comm, x.buf.data(), x.size + extra[posted], posted, x.mr, &x.req);
            if (r != loomSuccess) return (send ? "isend " : "irecv ") + std::to_string(posted) + " failed";
            if (!x.req) break; // not now: later
            ++posted;
        }
        for (int k = done; k < posted; ++k) {
            Msg &x = m[k];
            if (x.done) continue;
            int fin = 0;
            size_t got = 0;
            if (p->test(x.req, &fin, &got) != loomSuccess) return "test of message " + std::to_string(k) + " failed";
            if (!fin) continue;
            x.done = true;
            if (!send) {
                if (got != x.size) return "message " + std::to_string(k) + ": " + std::to_string(got) + " bytes, not " +
                                          std::to_string(x.size);
                for (size_t i = 0; i < x.size; ++i)
                    if (x.buf[i] != pattern(k, i)) return "message " + std::to_string(k) + " corrupted";
                for (size_t i = x.size; i < x.buf.size(); ++i)
                    if (x.buf[i] != 0xee) return "message " + std::to_string(k) + ": bytes written past its size";
            }
        }
        while (done < posted && m[done].done) {
            p->deregMr(comm, m[done].mr);
            m[done].buf.clear();
            m[done].buf.shrink_to_fit();
            ++done;
        }
        if (g() % 32 == 0) usleep(g() % 500);
    }
    return "";
}

// The forked sender's start: reads the listen handle from fd, initialises
// the plugin, connects within `seconds`. 0 and *sc set, or an exit code.
inline int connectFromPipe(const loom::net::NetPlugin *p, int fd, double seconds, void **sc) {
    loom::net::Handle h;
    *sc = nullptr;
    if (read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || p->init() != loomSuccess) return 2;
    for (double end = now() + seconds; !*sc && now() < end;)
        if (p->connect(0, &h, sc) != loomSuccess) return 3;
    return *sc ? 0 : 4;
}

// The sending side of a random-traffic test (seed from LOOM_TEST_RANDOM);
// closes the connection. Returns the child's exit status.
inline int randomTrafficSender(const loom::net::NetPlugin *p, void *sc, int n, size_t maxBytes, double seconds) {
    const char *seed = getenv("LOOM_TEST_RANDOM");
    std::string err = seed ? randomTraffic(p, sc, true, (uint32_t)strtoul(seed, nullptr, 0), n, maxBytes, seconds)
                           : "LOOM_TEST_RANDOM not set";
    p->closeSend(sc);
    if (!err.empty()) fprintf(stderr, "random traffic, sender: %s\n", err.c_str());
    return err.empty() ? 0 : 11;
}

// The receiving side of a random-traffic test: `start(&lc, &rc)` forks a
// sender that runs randomTraffic(send) with the seed in LOOM_TEST_RANDOM.
template <typename StartPair>
void randomTrafficReceiver(const loom::net::NetPlugin *p, StartPair start, int n, size_t maxBytes, double seconds) {
    const uint32_t seed = trafficSeed();
    setenv("LOOM_TEST_RANDOM", std::to_string(seed).c_str(), 1); // the forked sender's pattern
    void *lc, *rc;
    pid_t pid = start(&lc, &rc);
    std::string err = randomTraffic(p, rc, false, seed, n, maxBytes, seconds);
    ck_assert_msg(err.empty(), "seed %u, receiver: %s", seed, err.c_str());
    ck_assert_int_eq(childStatus(pid), 0);
    p->closeRecv(rc);
    p->closeListen(lc);
}

// Traffic both ways over `k` connections each way between two processes,
// every connection driven by its own thread (as several proxy threads do):
// this process and a forked peer each listen k times, swap handles through
// pipes, connect to the other's listens while accepting on their own, then
// run randomTraffic on all 2k connections at once. Returns "" or what went
// wrong (on either side).
inline std::string twoWayTraffic(const loom::net::NetPlugin *p, int k, uint32_t seed, int n, size_t maxBytes,
                                 double seconds) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) return "pipe";
    // One side of it: listen, swap handles, connect + accept, traffic.
    auto side = [&](bool parent, int rfd, int wfd) -> std::string {
        if (p->init() != loomSuccess) return "init";
        std::vector<loom::net::Handle> mine(k), theirs(k);
        std::vector<void *> lc(k, nullptr), sc(k, nullptr), rc(k, nullptr);
        for (int i = 0; i < k; ++i)
            if (p->listen(0, &mine[i], &lc[i]) != loomSuccess) return "listen";
        if (write(wfd, mine.data(), k * sizeof(mine[0])) != (ssize_t)(k * sizeof(mine[0]))) return "write handles";
        for (size_t got = 0; got < k * sizeof(theirs[0]);) {
            ssize_t r = read(rfd, (char *)theirs.data() + got, k * sizeof(theirs[0]) - got);
            if (r <= 0) return "read handles";
            got += (size_t)r;
        }
        for (double end = now() + 30;;) {
            bool pending = false;
            for (int i = 0; i < k; ++i) {
                if (!sc[i] && p->connect(0, &theirs[i], &sc[i]) != loomSuccess) return "connect";
                if (!rc[i] && p->accept(lc[i], &rc[i]) != loomSuccess) return "accept";
                pending |= !sc[i] || !rc[i];
            }
            if (!pending) break;
            if (now() > end) return "connections not up in 30 s";
        }
        // Connection i from the parent to the child carries pattern seed + i,
        // from the child to the parent seed + 1000 + i.
        std::vector<std::string> errs(2 * k);
        std::vector<std::thread> t;
        for (int i = 0; i < k; ++i) {
            const uint32_t sendSeed = seed + (parent ? 0 : 1000) + i, recvSeed = seed + (parent ? 1000 : 0) + i;
            t.emplace_back([&, i, sendSeed] { errs[i] = randomTraffic(p, sc[i], true, sendSeed, n, maxBytes, seconds); });
            t.emplace_back([&, i, recvSeed] { errs[k + i] = randomTraffic(p, rc[i], false, recvSeed, n, maxBytes, seconds); });
        }
        for (auto &x : t) x.join();
        for (int i = 0; i < k; ++i) {
            p->closeRecv(rc[i]); // receives first (see net_transport.cc)
            p->closeListen(lc[i]);
        }
        for (int i = 0; i < k; ++i) p->closeSend(sc[i]);
        for (int i = 0; i < 2 * k; ++i)
            if (!errs[i].empty()) return (i < k ? "sender " : "receiver ") + std::to_string(i % k) + ": " + errs[i];
        return "";
    };
    pid_t pid = fork();
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        std::string err = side(false, down[0], up[1]);
        if (!err.empty()) fprintf(stderr, "two-way traffic, peer: %s\n", err.c_str());
        _exit(err.empty() ? 0 : 1);
    }
    close(down[0]);
    close(up[1]);
    std::string err = side(true, up[0], down[1]);
    close(up[0]);
    close(down[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (err.empty() && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) err = "the peer process failed (see its message)";
    return err;
}

} // namespace nettest
