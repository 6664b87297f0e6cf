#include "core/ras/watchdog.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>

#include "core/ras/arrival_query.h"
#include "core/comm/comm.h"
#include "base/debug.h"
#include "core/comm/params.h"

namespace loom {

namespace {

double nowSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One communicator as the thread keeps it.
struct Watched {
    loomComm *comm;
    uint64_t call = 0;      // the stalled call it looks after (0: none)
    double stallSeen = 0;   // when it saw that stall
    bool warned = false;
    double lastAsk = -1e30; // when other hosts were last asked
    std::vector<WatchPeer> peers;
    std::vector<std::string> who; // per rank: "host h, pid p, GPU g" once seen
    bool cancelled = false;
    bool failedSaid = false; // this rank's own failure is on its board slot
    std::string reason;
    int deadRank = -1;
};

// The registry; held while the thread looks at a communicator, so that
// watchStop (before the communicator goes) waits for that look to end.
// Never destroyed: a process that exits with a communicator still watched
// (no MPI_Finalize) must not pull them from under the running thread.
std::mutex &mu = *new std::mutex;
std::condition_variable &wake = *new std::condition_variable;
std::vector<Watched *> &watched = *new std::vector<Watched *>;
std::thread *thread = nullptr;
bool stopping = false;
pid_t owner = 0; // the process whose thread it is (a forked child has none)

// A child forked while the thread runs gets the registry but not the
// thread: it forgets both (the communicators belong to the parent).
struct ForkGuard {
    ForkGuard() {
        // Left behind on purpose in the child: the thread object and the
        // entries (the parent's thread, the parent's communicators).
        pthread_atfork([] { mu.lock(); }, [] { mu.unlock(); },
                       [] {
                           thread = nullptr;
                           watched.clear();
                           owner = 0;
                           mu.unlock();
                       });
    }
} forkGuard;

std::string describe(const Arrival &a) {
    char s[128];
    snprintf(s, sizeof(s), "host %s, pid %d, GPU %d", a.host.c_str(), a.pid, a.cudaDev);
    return s;
}

// One rank's slot, read from this host's board or from its host's answer.
void take(Watched &w, const Arrival &a, bool dead) {
    if (a.pid == 0 || a.rank < 0 || a.rank >= (int)w.peers.size()) return; // never filled, or not a rank of it
    WatchPeer &p = w.peers[a.rank];
    p.known = true;
    p.entered = a.entered;
    p.started = a.started;
    p.failedIn = a.failedIn;
    p.dead = p.dead || dead;
    w.who[a.rank] = describe(a);
}

// What the boards say now: this host's directly, the others' when asked.
void readPeers(Watched &w, double now) {
    loomComm *comm = w.comm;
    const int n = comm->nranks;
    if ((int)w.peers.size() != n) {
        w.peers.assign(n, WatchPeer());
        w.who.assign(n, std::string());
        for (int q = 0; q < n; ++q) w.peers[q].rank = q;
    }
    if (comm->ras.arrivals) {
        const ArrivalBoard &board = *comm->ras.arrivals;
        std::vector<int> dead;
        for (const Arrival &a : deadRanks(board)) dead.push_back(a.rank);
        for (int k = 0; k < board.slots(); ++k) {
            const Arrival a = board.read(k);
            take(w, a, std::find(dead.begin(), dead.end(), a.rank) != dead.end());
        }
    }
    if (!comm->ras.arrivalPeers || now - w.lastAsk < kAskEverySeconds) return;
    w.lastAsk = now;
    const ArrivalPeers &ap = *comm->ras.arrivalPeers;
    const OtherHosts others = otherHosts(ap, ap.boardOf[comm->rank]);
    const std::vector<std::vector<int>> &ranks = others.ranks;
    const std::vector<HostArrivals> answers = arrivalAsk(comm->commTag, others.contacts, kAskSeconds, comm->rank);
    for (size_t h = 0; h < answers.size(); ++h) {
        for (int q : ranks[h]) {
            WatchPeer &p = w.peers[q];
            if (answers[h].answered) p.silentSince = -1;
            else if (answers[h].refused) p.dead = true;
            else if (p.silentSince < 0) p.silentSince = now;
        }
        if (!answers[h].answered) continue;
        for (size_t k = 0; k < answers[h].slots.size(); ++k) {
            take(w, answers[h].slots[k], !answers[h].alive[k]);
        }
    }
}

std::string rankList(const Watched &w, const std::vector<int> &ranks, const char *what) {
    std::string s;
    for (int q : ranks)
        s += (s.empty() ? "" : "; ") + ("rank " + std::to_string(q)) +
             (w.who[q].empty() ? std::string() : " (" + w.who[q] + ")") + what;
    return s;
}

// Cancels the communicator's calls for w.reason (set by the caller).
void cancel(Watched &w) {
    w.cancelled = true;
    w.comm->ras.watch->cancel = 1;
    LOOM_INFO(kColl, "rank %d: call %llu: %s: cancelling this communicator's calls", w.comm->rank,
              (unsigned long long)w.call, w.reason.c_str());
}

void look(Watched &w, double now) {
    loomComm *comm = w.comm;
    WatchWords *words = comm->ras.watch;
    if (comm->ras.arrivals) comm->ras.arrivals->started(comm->ras.arrivalSlot, words->started);
    // This rank's side failed (set by the thread that made the calls): the others' watchdogs read it here.
    if (comm->ras.arrivals && !w.failedSaid && __atomic_load_n(&comm->ras.failed, __ATOMIC_RELAXED)) {
        comm->ras.arrivals->failed(comm->ras.arrivalSlot, __atomic_load_n(&comm->ras.collsEntered, __ATOMIC_RELAXED));
        w.failedSaid = true;
    }
    if (w.cancelled) return;
    const uint64_t stalled = words->stalled, done = words->done;
    // That call is over: the host saw it finish, or this GPU started a later
    // one (a stream runs its calls in order).
    if (w.call && (done >= w.call || words->started > w.call)) w.call = 0;
    if (!w.call && stalled > done) {
        w.call = stalled;
        w.stallSeen = now;
        w.warned = false;
    }
    if (!w.call) return;
    readPeers(w, now);
    const WatchVerdict v = watchRules(w.peers, w.call, now, now - w.stallSeen, params().warnAfterSeconds, w.warned);
    if (!v.dead.empty()) {
        w.deadRank = v.dead[0];
        w.reason = rankList(w, v.dead, "") + (v.dead.size() > 1 ? " are" : " is") +
                   (v.hostsLost ? " gone (its process, or its host, stopped answering for " +
                                      std::to_string((int)kHostLostSeconds) + " s)"
                                : " gone (process dead)");
        return cancel(w);
    }
    if (!v.failed.empty()) {
        const int q = v.failed[0];
        w.reason = rankList(w, {q}, "") + " failed its side of this communicator earlier (after it had entered " +
                   std::to_string(w.peers[q].failedIn) + " calls; its own error says why) and takes part in no "
                   "call on it again";
        return cancel(w);
    }
    if (v.allStarted && words->allStarted < w.call) words->allStarted = w.call;
    if (!v.warn) return;
    w.warned = true;
    char head[160];
    snprintf(head, sizeof(head), "rank %d GPU %d (%s): %s (call %llu) has waited %.0f s", comm->rank, comm->cudaDev,
             comm->busId, comm->ras.lastColl, (unsigned long long)w.call, now - w.stallSeen + kStallReportSeconds);
    std::string late;
    for (int q : v.notEntered)
        late += (late.empty() ? "" : "; ") + rankList(w, {q}, "") + " has not entered it (it entered " +
                std::to_string(w.peers[q].entered) + " of " + std::to_string(w.call) + " calls)";
    const std::string busy = rankList(w, v.notStarted, " entered it, but its GPU has not started it (earlier work "
                                                          "on that GPU)");
    late += (late.empty() || busy.empty() ? "" : "; ") + busy;
    if (late.empty())
        LOOM_WARN(kColl, "%s: every rank has started it on its GPU and a peer has not moved since; it fails as "
                  "stuck after LOOM_STUCK_TIMEOUT=%.0f s", head, params().stuckSeconds);
    else
        LOOM_WARN(kColl, "%s for ranks that have not arrived: %s; waiting on (a late rank is not an error; "
                  "LOOM_TIMEOUT bounds the wait)", head, late.c_str());
}

void run() {
    std::unique_lock<std::mutex> g(mu);
    while (!stopping) {
        wake.wait_for(g, std::chrono::duration<double>(kWatchTickSeconds));
        if (stopping) break;
        const double now = nowSeconds();
        for (Watched *w : watched) look(*w, now);
    }
}

} // namespace

WatchVerdict watchRules(const std::vector<WatchPeer> &peers, uint64_t call, double now, double stalledFor,
                        double warnAfter, bool warned) {
    WatchVerdict v;
    v.allStarted = true;
    for (const WatchPeer &p : peers) {
        const bool lost = p.silentSince >= 0 && now - p.silentSince >= kHostLostSeconds;
        if (p.dead || lost) {
            v.dead.push_back(p.rank);
            v.hostsLost = v.hostsLost || (lost && !p.dead);
            continue;
        }
        if (!p.known || p.started < call) v.allStarted = false;
        if (!p.known) continue;
        if (p.failedIn) {
            v.failed.push_back(p.rank);
            continue;
        }
        if (p.entered < call) v.notEntered.push_back(p.rank);
        else if (p.started < call) v.notStarted.push_back(p.rank);
    }
    if (!v.dead.empty() || !v.failed.empty()) v.allStarted = false;
    v.warn = v.dead.empty() && v.failed.empty() && !warned && warnAfter > 0 && stalledFor + kStallReportSeconds >= warnAfter;
    return v;
}

void watchStart(loomComm *comm) {
    std::lock_guard<std::mutex> g(mu);
    Watched *w = new Watched;
    w->comm = comm;
    watched.push_back(w);
    if (owner == getpid()) return;
    stopping = false;
    try {
        thread = new std::thread(run);
        owner = getpid();
    } catch (const std::exception &e) {
        LOOM_WARN(kInit, "no watchdog thread (%s): a dead peer is found only by LOOM_TIMEOUT or LOOM_STUCK_TIMEOUT",
                  e.what());
    }
}

void watchStop(loomComm *comm) {
    std::unique_lock<std::mutex> g(mu);
    auto it = std::find_if(watched.begin(), watched.end(), [&](Watched *w) { return w->comm == comm; });
    if (it == watched.end()) return;
    delete *it;
    watched.erase(it);
    if (!watched.empty() || owner != getpid()) return;
    stopping = true;
    owner = 0;
    std::thread *t = thread;
    thread = nullptr;
    g.unlock();
    wake.notify_all();
    t->join();
    delete t;
}

std::string watchReason(const loomComm *comm, int *deadRank) {
    std::lock_guard<std::mutex> g(mu);
    *deadRank = -1;
    for (Watched *w : watched)
        if (w->comm == comm && w->cancelled) {
            *deadRank = w->deadRank;
            return w->reason;
        }
    return "";
}

uint64_t hostNowNs() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

WaitLimit hostWaitLimit(const loomComm *comm, uint64_t call) {
    WaitLimit l = {};
    l.hardCycles = (unsigned long long)(params().timeoutSeconds * 1e9);
    l.reportCycles = (unsigned long long)(kStallReportSeconds * 1e9);
    l.seq = call;
    l.words = comm->ras.watch;
    return l;
}

} // namespace loom
