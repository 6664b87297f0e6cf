#include "core/ras/arrival_query.h"

#include <algorithm>
#include <atomic>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "base/debug.h"

namespace loom {

namespace {

using net::SideListener;

constexpr uint32_t kAnswerMagic = 0x3372616c; // "lar3"
constexpr uint32_t kMaxSlots = 4096;          // more in an answer: not a loom answer
constexpr double kAnswerSeconds = 2.0;        // for a question to arrive, and the answer to leave

// The answer: a header, then one record per slot of the host's board.
struct AnswerHeader {
    uint32_t magic;
    uint32_t slots;
};
struct WireSlot {
    uint64_t entered, started, failedIn;
    int32_t rank, pid, cudaDev, alive;
    char busId[16];
    char host[24];
};
static_assert(sizeof(WireSlot) == 80, "fixed layout on the wire");

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Moves all of buf through the non-blocking fd before `deadline`.
bool sendWithin(int fd, const uint8_t *buf, size_t bytes, double deadline) {
    size_t done = 0;
    while (done < bytes) {
        ssize_t k = send(fd, buf + done, bytes - done, MSG_NOSIGNAL);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
        const double left = deadline - now();
        if (left <= 0) return false;
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, (int)(left * 1000) + 1);
    }
    return true;
}

// ------------------------------------------------------------------ server

struct Server {
    SideListener *listener = nullptr;
    ArrivalContact addr{};
    int wake[2] = {-1, -1};
    std::thread thread;
    std::mutex boardsMu; // the thread reads boards under it; unserve removes under it
    std::vector<std::pair<uint64_t, const ArrivalBoard *>> boards;
    bool stop = false; // under boardsMu
    std::atomic<bool> running{false}; // the thread is in serve(): its start-up (which allocates) is behind it
    pid_t pid = 0;     // the process that started it (a forked child has none of it)
};
std::mutex lifeMu; // starts and stops the server
// Held by the server thread whenever it is not asleep in poll(): while it
// accepts, reads, answers or allocates.
std::mutex workMu;
Server *server = nullptr;

// A fork while another thread holds lifeMu would leave the child's copy
// locked for good, and a fork while the server thread is at work would hand
// the child a listener (and, with allocators that do not lock themselves
// around fork, a heap lock) in the middle of a change, which the child's
// forgetForked then deletes: fork waits until no thread holds either, so
// the server thread is asleep in poll() at the fork. Order: lifeMu, then
// workMu (the server thread never takes lifeMu).
struct ForkGuard {
    ForkGuard() {
        pthread_atfork([] { lifeMu.lock(); workMu.lock(); }, [] { workMu.unlock(); lifeMu.unlock(); },
                       [] { workMu.unlock(); lifeMu.unlock(); });
    }
} forkGuard;

std::vector<uint8_t> answerFor(Server *s, uint64_t tag, bool *known) {
    std::lock_guard<std::mutex> g(s->boardsMu);
    *known = false;
    std::vector<uint8_t> out;
    for (auto &b : s->boards) {
        if (b.first != tag) continue;
        *known = true;
        const ArrivalBoard &board = *b.second;
        std::vector<int> dead;
        for (const Arrival &a : deadRanks(board)) dead.push_back(a.rank);
        AnswerHeader h{kAnswerMagic, (uint32_t)board.slots()};
        out.resize(sizeof(h) + (size_t)board.slots() * sizeof(WireSlot));
        memcpy(out.data(), &h, sizeof(h));
        for (int k = 0; k < board.slots(); ++k) {
            const Arrival a = board.read(k);
            WireSlot w;
            memset(&w, 0, sizeof(w));
            w.entered = a.entered;
            w.started = a.started;
            w.failedIn = a.failedIn;
            w.rank = a.rank, w.pid = a.pid, w.cudaDev = a.cudaDev;
            w.alive = std::find(dead.begin(), dead.end(), a.rank) == dead.end() || a.pid == 0;
            snprintf(w.busId, sizeof(w.busId), "%s", a.busId.c_str());
            snprintf(w.host, sizeof(w.host), "%s", a.host.c_str());
            memcpy(out.data() + sizeof(h) + (size_t)k * sizeof(w), &w, sizeof(w));
        }
        break;
    }
    return out;
}

bool stopping(Server *s) {
    std::lock_guard<std::mutex> g(s->boardsMu);
    return s->stop;
}

void serve(Server *s) {
    for (;;) {
        std::unique_lock<std::mutex> work(workMu); // before fds: released after fds goes
        s->running.store(true, std::memory_order_release);
        if (stopping(s)) return;
        std::vector<pollfd> fds{{s->wake[0], POLLIN, 0}};
        for (int fd : s->listener->fds()) fds.push_back({fd, POLLIN, 0});
        // Wakes at least every 0.5 s: a stalled hello's deadline is checked.
        work.unlock(); // asleep: a fork may come
        ::poll(fds.data(), fds.size(), 500);
        work.lock();
        if (fds[0].revents) { // the wake-up: drained, so that poll sleeps again
            char c[16];
            if (read(s->wake[0], c, sizeof(c)) < 0) { /* nothing to drain */ }
        }
        while (!stopping(s)) {
            uint64_t tag = 0;
            int fd = -1;
            s->listener->poll(&tag, &fd);
            if (fd < 0) break;
            bool known = false;
            const std::vector<uint8_t> answer = answerFor(s, tag, &known);
            // An unknown tag (the communicator is gone here) gets no answer:
            // the asker tries another rank of this host.
            if (known && !sendWithin(fd, answer.data(), answer.size(), now() + kAnswerSeconds))
                LOOM_INFO(kInit, "arrival query: an answer could not be sent: %s", strerror(errno));
            close(fd);
        }
    }
}

} // namespace

// In a child forked after the server started: the thread is the parent's,
// and so are the boards; the child's copies of the sockets are closed, the
// rest left behind (never joined), and the child starts its own.
void forgetForked() {
    if (!server || server->pid == getpid()) return;
    delete server->listener;
    close(server->wake[0]);
    close(server->wake[1]);
    server = nullptr; // leaked on purpose: its thread is not in this process (never joined), its mutexes may be held
}

void arrivalServe(uint64_t tag, const ArrivalBoard *board, ArrivalContact *contact) {
    memset(contact, 0, sizeof(*contact));
    std::lock_guard<std::mutex> life(lifeMu);
    forgetForked();
    if (!server) {
        Server *s = new Server;
        if (net::SideListener::open(net::sideLocalIp(), sizeof(uint64_t), &s->addr, &s->listener, kAnswerSeconds,
                                    false) != loomSuccess ||
            pipe2(s->wake, O_CLOEXEC) != 0) {
            LOOM_WARN(kInit, "arrival query: cannot serve this host's arrival board (%s): a timeout on another "
                      "host will not learn who arrived here", loomGetLastError());
            delete s->listener;
            if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
            delete s;
            return;
        }
        s->pid = getpid();
        try {
            s->thread = std::thread(serve, s);
        } catch (const std::exception &e) {
            LOOM_WARN(kInit, "arrival query: no server thread (%s): a timeout on another host will not learn who "
                      "arrived here", e.what());
            delete s->listener;
            close(s->wake[0]);
            close(s->wake[1]);
            delete s;
            return;
        }
        // Until the thread is in serve() (under lifeMu, so no fork comes
        // meanwhile): its start-up allocates outside workMu, and a fork then
        // could hand the child a heap lock held for good where the allocator
        // does not lock itself around fork (AddressSanitizer's).
        while (!s->running.load(std::memory_order_acquire)) std::this_thread::yield();
        server = s;
    }
    std::lock_guard<std::mutex> g(server->boardsMu);
    server->boards.emplace_back(tag, board);
    *contact = server->addr;
}

void arrivalUnserve(const ArrivalBoard *board) {
    std::lock_guard<std::mutex> life(lifeMu);
    forgetForked();
    if (!server) return;
    bool empty;
    {
        std::lock_guard<std::mutex> g(server->boardsMu);
        auto &v = server->boards;
        v.erase(std::remove_if(v.begin(), v.end(), [&](const std::pair<uint64_t, const ArrivalBoard *> &b) {
                    return b.second == board;
                }), v.end());
        empty = v.empty();
        if (empty) server->stop = true;
    }
    if (!empty) return;
    const char c = 0;
    if (write(server->wake[1], &c, 1) < 0) { /* the thread wakes within 0.5 s anyway */ }
    server->thread.join();
    delete server->listener;
    close(server->wake[0]);
    close(server->wake[1]);
    delete server;
    server = nullptr;
}

// ------------------------------------------------------------------ asker

namespace {

// One host's question in flight: a non-blocking connect, the hello, the answer.
struct Asking {
    const std::vector<ArrivalContact> *contacts = nullptr;
    size_t next = 0, tried = 0; // the contact to try after this one (from a rotated start), how many tried
    size_t attempts = 0, refused = 0; // connections tried, and refused (nobody listens there)
    int fd = -1;
    bool connected = false;
    double deadline = 0; // of this attempt
    std::vector<uint8_t> hello, got;
    size_t sent = 0;
};

void giveUp(Asking &a) {
    if (a.fd >= 0) close(a.fd);
    a.fd = -1;
}

// Starts a connection to the next contact that has an address; false when none is left.
bool startNext(Asking &a, uint64_t tag, double attemptSeconds, double end) {
    while (a.tried < a.contacts->size()) {
        const ArrivalContact &c = (*a.contacts)[a.next];
        a.next = (a.next + 1) % a.contacts->size();
        ++a.tried;
        if (c.ip == 0) continue;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) return false;
        sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = c.ip;
        sa.sin_port = c.port;
        ++a.attempts;
        if (connect(fd, (sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
            a.refused += errno == ECONNREFUSED;
            close(fd); // refused: that process is gone; the next one
            continue;
        }
        a.fd = fd;
        a.connected = false;
        a.deadline = std::min(end, now() + attemptSeconds);
        a.hello = net::sideHello(c, &tag, sizeof(tag));
        a.sent = 0;
        a.got.clear();
        return true;
    }
    return false;
}

// One step on a readable or writable socket. 1: the whole answer is in,
// 0: not yet, -1: this attempt failed.
int step(Asking &a) {
    if (!a.connected) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            a.refused += err == ECONNREFUSED;
            return -1;
        }
        a.connected = true;
    }
    while (a.sent < a.hello.size()) {
        ssize_t k = send(a.fd, a.hello.data() + a.sent, a.hello.size() - a.sent, MSG_NOSIGNAL);
        if (k > 0) a.sent += (size_t)k;
        else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        else return -1;
    }
    uint8_t buf[4096];
    const size_t most = sizeof(AnswerHeader) + (size_t)kMaxSlots * sizeof(WireSlot);
    for (;;) {
        ssize_t k = recv(a.fd, buf, sizeof(buf), 0);
        if (k > 0) {
            a.got.insert(a.got.end(), buf, buf + k);
            // Not a loom answer (a stranger on the port): no more memory or time for it.
            if (a.got.size() > most || now() > a.deadline) return -1;
        } else if (k == 0) {
            break; // the server closed: the answer is whole, or there is none
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return 0;
        } else {
            return -1;
        }
    }
    if (a.got.size() < sizeof(AnswerHeader)) return -1;
    AnswerHeader h;
    memcpy(&h, a.got.data(), sizeof(h));
    if (h.magic != kAnswerMagic || h.slots > kMaxSlots || a.got.size() != sizeof(h) + h.slots * sizeof(WireSlot))
        return -1;
    return 1;
}

void decode(const std::vector<uint8_t> &got, HostArrivals *out) {
    AnswerHeader h;
    memcpy(&h, got.data(), sizeof(h));
    out->answered = true;
    for (uint32_t k = 0; k < h.slots; ++k) {
        WireSlot w;
        memcpy(&w, got.data() + sizeof(h) + k * sizeof(w), sizeof(w));
        Arrival a;
        a.entered = w.entered;
        a.started = w.started;
        a.failedIn = w.failedIn;
        a.rank = w.rank, a.pid = w.pid, a.cudaDev = w.cudaDev;
        a.pidNs = 0;
        a.busId.assign(w.busId, strnlen(w.busId, sizeof(w.busId)));
        a.host.assign(w.host, strnlen(w.host, sizeof(w.host)));
        out->slots.push_back(a);
        out->alive.push_back(w.alive != 0);
    }
}

} // namespace

std::vector<HostArrivals> arrivalAsk(uint64_t tag, const std::vector<std::vector<ArrivalContact>> &hosts,
                                     double seconds, unsigned start) {
    std::vector<HostArrivals> out(hosts.size());
    std::vector<Asking> asks(hosts.size());
    const double end = now() + seconds;
    // An unreachable address must not eat the whole budget: each attempt
    // gets a third of it, and the host's next rank is tried after that.
    const double attempt = seconds / 3;
    for (size_t h = 0; h < hosts.size(); ++h) {
        asks[h].contacts = &hosts[h];
        asks[h].next = hosts[h].empty() ? 0 : start % hosts[h].size(); // askers spread over a host's ranks
        startNext(asks[h], tag, attempt, end);
    }
    for (;;) {
        std::vector<pollfd> fds;
        std::vector<size_t> who;
        for (size_t h = 0; h < asks.size(); ++h) {
            Asking &a = asks[h];
            while (a.fd >= 0 && now() > a.deadline) { // this one is too slow: the next rank of that host
                giveUp(a);
                if (now() < end) startNext(a, tag, attempt, end);
            }
            if (a.fd < 0) continue;
            fds.push_back({a.fd, (short)(a.connected && a.sent == a.hello.size() ? POLLIN : POLLOUT), 0});
            who.push_back(h);
        }
        const double left = end - now();
        if (fds.empty() || left <= 0) break;
        ::poll(fds.data(), fds.size(), std::max(1, (int)(std::min(left, 0.1) * 1000)));
        for (size_t i = 0; i < fds.size(); ++i) {
            if (!fds[i].revents) continue;
            Asking &a = asks[who[i]];
            const int r = step(a);
            if (r == 0) continue;
            if (r == 1) decode(a.got, &out[who[i]]);
            giveUp(a);
            if (r < 0) startNext(a, tag, attempt, end);
        }
    }
    for (size_t h = 0; h < asks.size(); ++h) {
        giveUp(asks[h]);
        // Refused: every address of the host was tried and none listens.
        out[h].refused = !out[h].answered && asks[h].tried == hosts[h].size() && asks[h].attempts &&
                         asks[h].refused == asks[h].attempts;
    }
    return out;
}

OtherHosts otherHosts(const ArrivalPeers &peers, uint64_t myBoard) {
    OtherHosts o;
    std::vector<uint64_t> hostIds;
    for (size_t q = 0; q < peers.boardOf.size(); ++q) {
        if (peers.boardOf[q] == myBoard) continue;
        size_t h = std::find(hostIds.begin(), hostIds.end(), peers.boardOf[q]) - hostIds.begin();
        if (h == hostIds.size()) {
            hostIds.push_back(peers.boardOf[q]);
            o.contacts.emplace_back();
            o.ranks.emplace_back();
        }
        o.contacts[h].push_back(peers.contacts[q]);
        o.ranks[h].push_back((int)q);
    }
    return o;
}

std::string describeOtherHosts(const ArrivalPeers &peers, uint64_t myBoard, uint64_t tag, uint64_t call,
                               double seconds, int me, bool *gone) {
    const OtherHosts others = otherHosts(peers, myBoard);
    const std::vector<std::vector<int>> &ranks = others.ranks;
    const std::vector<HostArrivals> answers = arrivalAsk(tag, others.contacts, seconds, me);
    std::vector<Arrival> absent, dead;
    std::string silent, refused, unknown;
    for (size_t h = 0; h < answers.size(); ++h) {
        if (!answers[h].answered) {
            std::string list;
            for (int q : ranks[h]) list += (list.empty() ? "" : ", ") + std::to_string(q);
            if (answers[h].refused) {
                // named as a dead rank is ("rank 2 ..."), one host at a time
                const bool many = ranks[h].size() > 1;
                refused += (refused.empty() ? "" : "; ") + std::string(many ? "ranks " : "rank ") + list +
                           (many ? " are gone (every address of their host" : " is gone (every address of its host") +
                           " refused the connection: no process left there)";
                continue;
            }
            char line[96];
            snprintf(line, sizeof(line), "no answer within %.0f s from the host of rank%s ", seconds,
                     ranks[h].size() > 1 ? "s" : "");
            silent += (silent.empty() ? "" : "; ") + std::string(line) + list;
            continue;
        }
        std::vector<int> seen;
        for (size_t k = 0; k < answers[h].slots.size(); ++k) {
            const Arrival &a = answers[h].slots[k];
            if (a.pid == 0) continue; // a slot never filled: that rank is reported unknown below
            seen.push_back(a.rank);
            if (!answers[h].alive[k]) dead.push_back(a);
            else if (a.entered < call) absent.push_back(a);
        }
        for (int q : ranks[h])
            if (std::find(seen.begin(), seen.end(), q) == seen.end())
                unknown += (unknown.empty() ? "" : ", ") + std::to_string(q);
    }
    std::string s;
    if (!dead.empty()) s = "dead (process gone): " + describeRanks(dead);
    if (!refused.empty()) s += (s.empty() ? "" : "; ") + refused;
    if (gone) *gone = !dead.empty() || !refused.empty();
    if (!absent.empty()) s += (s.empty() ? "" : "; ") + std::string("did not arrive: ") + describeAbsent(absent, call);
    if (!silent.empty())
        s += (s.empty() ? "" : "; ") + silent + " (its processes gone, or its network unreachable)";
    if (!unknown.empty())
        s += (s.empty() ? "" : "; ") + std::string("not on their host's board, arrival unknown: ranks ") + unknown;
    return s.empty() ? "every rank arrived, on every host (one is stuck inside the call, or its GPU is)" : s;
}

} // namespace loom
