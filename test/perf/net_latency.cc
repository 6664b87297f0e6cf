// Latency of one network hop on the CPU side of loom's net path, without a
// GPU: two processes ping-pong a small message over a net plugin (ucx by
// default, LOOM_NET=ib for verbs), first with the plugin alone (isend/irecv/
// test in a loop), then through two proxies with host FIFOs, the main thread
// playing the GPU (write the step and its size, bump the tail; wait for the
// peer's tail, return the credit). Prints the one-way time (round trip / 2)
// of each, so a slow hop can be split into network and proxy. Where GPUs
// exist, a third run puts a kernel in place of the CPU (FIFOs in mapped host
// memory, as the net transport has them; the two processes take different
// GPUs when there are two).
//   net_latency [BYTES] [ITERS]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <cuda_runtime.h>

#include "btl_gpu/net/plugins.h"
#include "proxy/proxy.h"
#include "fifo_pingpong.h"

using namespace loom;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void die(const char *what) {
    fprintf(stderr, "net_latency: %s\n", what);
    exit(1);
}

const net::NetPlugin *pickPlugin() {
    const uint32_t usable = netUsablePlugins();
    for (int i = 0; i < kNumNetPlugins; ++i)
        if ((usable >> i) & 1) return netPlugin(i);
    die("no usable net plugin");
}

struct Pair {
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
};

// Each side listens, hands its handle to the other through a pipe, then
// connects and accepts at once.
Pair connectPair(const net::NetPlugin *p, int toPeer, int fromPeer) {
    Pair c;
    net::Handle mine, theirs;
    if (p->listen(0, &mine, &c.listen) != loomSuccess) die("listen");
    if (write(toPeer, &mine, sizeof(mine)) != (ssize_t)sizeof(mine)) die("pipe write");
    if (read(fromPeer, &theirs, sizeof(theirs)) != (ssize_t)sizeof(theirs)) die("pipe read");
    for (double end = now() + 30; (!c.send || !c.recv) && now() < end;) {
        if (!c.send && p->connect(0, &theirs, &c.send) != loomSuccess) die("connect");
        if (!c.recv && p->accept(c.listen, &c.recv) != loomSuccess) die("accept");
    }
    if (!c.send || !c.recv) die("no connection in 30 s");
    return c;
}

// Tests both until both are done (each test progresses its own connection:
// a send may need it to leave at all).
void waitBoth(const net::NetPlugin *p, void *a, void *b) {
    int da = !a, db = !b;
    while (!da || !db) {
        if (!da && p->test(a, &da, nullptr) != loomSuccess) die("test");
        if (!db && p->test(b, &db, nullptr) != loomSuccess) die("test");
    }
}

// Plugin alone: one message each way per round.
double pluginPingPong(const net::NetPlugin *p, const Pair &c, bool first, size_t bytes, int iters) {
    std::vector<char> sbuf(bytes + 1), rbuf(bytes + 1);
    void *smr = nullptr, *rmr = nullptr;
    if (p->regMr(c.send, sbuf.data(), sbuf.size(), net::MemType::Host, &smr) != loomSuccess ||
        p->regMr(c.recv, rbuf.data(), rbuf.size(), net::MemType::Host, &rmr) != loomSuccess)
        die("regMr");
    double t0 = 0;
    for (int i = -100; i < iters; ++i) { // 100 warm-up rounds
        if (i == 0) t0 = now();
        void *rq = nullptr, *sq = nullptr;
        if (p->irecv(c.recv, rbuf.data(), bytes, 0, rmr, &rq) != loomSuccess || !rq) die("irecv");
        if (!first) waitBoth(p, rq, nullptr);
        if (p->isend(c.send, sbuf.data(), bytes, 0, smr, &sq) != loomSuccess || !sq) die("isend");
        waitBoth(p, first ? rq : nullptr, sq);
    }
    const double us = (now() - t0) / iters / 2 * 1e6;
    p->deregMr(c.send, smr);
    p->deregMr(c.recv, rmr);
    return us;
}

// Slots in pageable memory, or pinned and mapped (cudaHostAlloc) as the net
// transport has them.
struct Fifo {
    static constexpr int kSlots = 4;
    std::vector<char> pageable;
    char *slots = nullptr;
    size_t bytes;
    bool pinned;
    volatile uint64_t tail = 0, head = 0, sizes[kSlots] = {};
    Fifo(size_t slotBytes, bool pin) : bytes(kSlots * slotBytes), pinned(pin) {
        if (!pin) {
            pageable.resize(bytes);
            slots = pageable.data();
        } else if (cudaHostAlloc((void **)&slots, bytes, cudaHostAllocMapped) != cudaSuccess) {
            die("cudaHostAlloc");
        }
    }
    ~Fifo() {
        if (pinned) cudaFreeHost(slots);
    }
};

// Both FIFOs registered and handed to a proxy thread for `total` steps each
// way (posted as enqueue posts a collective: the thread stays awake); taken
// down again when it goes out of scope.
struct Proxied {
    const net::NetPlugin *p;
    const Pair &c;
    void *mr[2] = {};
    Proxy *proxy = nullptr;
    int sid = -1, rid = -1;
    Proxied(const net::NetPlugin *plugin, const Pair &pair, ProxyFifo out, ProxyFifo in, int tag, uint64_t total)
        : p(plugin), c(pair) {
        if (p->regMr(c.send, out.slots, (size_t)out.nslots * out.slotBytes, net::MemType::Host, &mr[0]) != loomSuccess ||
            p->regMr(c.recv, in.slots, (size_t)in.nslots * in.slotBytes, net::MemType::Host, &mr[1]) != loomSuccess)
            die("regMr");
        out.mhandle = mr[0];
        in.mhandle = mr[1];
        proxy = netAcquireProxy(p, 0);
        sid = proxy->addSend(c.send, out, tag);
        rid = proxy->addRecv(c.recv, in, tag);
        proxy->post(sid, total);
        proxy->post(rid, total);
    }
    ~Proxied() {
        if (!proxy->quiesce(sid, 10)) die("quiesce");
        proxy->remove(sid);
        proxy->remove(rid);
        netReleaseProxy(proxy);
        p->deregMr(c.send, mr[0]);
        p->deregMr(c.recv, mr[1]);
    }
};

// Through the proxies: the main thread is the GPU of each side.
double proxyPingPong(const net::NetPlugin *p, const Pair &c, bool first, size_t bytes, int iters, bool pinned) {
    const size_t slotBytes = bytes < 4096 ? 4096 : bytes;
    Fifo out(slotBytes, pinned), in(slotBytes, pinned);
    const uint64_t total = (uint64_t)iters + 100;
    // Each run its own tag: receives the proxy posted ahead in an earlier
    // run stay in the worker and would take this run's first messages.
    Proxied px(p, c, ProxyFifo{out.slots, slotBytes, Fifo::kSlots, &out.tail, &out.head, out.sizes, nullptr},
               ProxyFifo{in.slots, slotBytes, Fifo::kSlots, &in.tail, &in.head, in.sizes, nullptr}, pinned ? 2 : 0,
               total);
    auto sendStep = [&](uint64_t s) {
        while (s - out.head >= (uint64_t)Fifo::kSlots) sched_yield();
        memset(out.slots + (s % Fifo::kSlots) * slotBytes, (int)s, bytes);
        out.sizes[s % Fifo::kSlots] = bytes;
        std::atomic_thread_fence(std::memory_order_release);
        out.tail = s + 1;
    };
    auto recvStep = [&](uint64_t s) {
        // Yielding: the real GPU takes no core from the proxy thread.
        while (in.tail <= s)
            if (px.proxy->error() != loomSuccess) die("proxy error");
            else sched_yield();
        std::atomic_thread_fence(std::memory_order_acquire);
        in.head = s + 1;
    };
    double t0 = now();
    for (uint64_t s = 0; s < total; ++s) {
        if (s == 100) t0 = now();
        if (first) { sendStep(s); recvStep(s); }
        else { recvStep(s); sendStep(s); }
    }
    return (now() - t0) / iters / 2 * 1e6;
}

// Through the proxies with a GPU kernel on each side; < 0 without a GPU.
double gpuPingPong(const net::NetPlugin *p, const Pair &c, bool first, size_t bytes, int iters) {
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) return -1;
    cudaSetDevice(first ? 0 : ngpu - 1);
    const size_t slotBytes = bytes < 4096 ? 4096 : bytes;
    constexpr int kSlots = 4;
    char *slots[2];
    uint64_t *flags[2]; // tail, head, sizes[kSlots], each on its own 128-byte line
    for (int k = 0; k < 2; ++k)
        if (cudaHostAlloc((void **)&slots[k], kSlots * slotBytes, cudaHostAllocMapped) != cudaSuccess ||
            cudaHostAlloc((void **)&flags[k], 4096, cudaHostAllocMapped) != cudaSuccess)
            die("cudaHostAlloc");
    uint64_t *times = nullptr;
    if (cudaHostAlloc((void **)&times, 4096, cudaHostAllocMapped) != cudaSuccess) die("cudaHostAlloc");
    for (int k = 0; k < 2; ++k) memset(flags[k], 0, 4096);
    auto tail = [&](int k) { return (volatile uint64_t *)flags[k]; };
    auto head = [&](int k) { return (volatile uint64_t *)flags[k] + 16; };
    auto sizes = [&](int k) { return (volatile uint64_t *)flags[k] + 32; };
    const uint64_t warmup = 100, total = (uint64_t)iters + warmup;
    double us;
    {
        Proxied px(p, c, ProxyFifo{slots[0], slotBytes, kSlots, tail(0), head(0), sizes(0), nullptr},
                   ProxyFifo{slots[1], slotBytes, kSlots, tail(1), head(1), sizes(1), nullptr}, 1, total);
        FifoPingPongArgs a{slots[0], tail(0), head(0), sizes(0), slots[1], tail(1), head(1),
                           slotBytes, bytes, kSlots, first ? 1 : 0, total, warmup, times};
        if (launchFifoPingPong(a) != cudaSuccess) die("kernel launch");
        if (cudaDeviceSynchronize() != cudaSuccess) die("kernel failed");
        us = (double)(times[1] - times[0]) / iters / 2 / 1000;
    }
    for (int k = 0; k < 2; ++k) {
        cudaFreeHost(slots[k]);
        cudaFreeHost(flags[k]);
    }
    cudaFreeHost(times);
    return us;
}

int side(bool first, int toPeer, int fromPeer, size_t bytes, int iters) {
    const net::NetPlugin *p = pickPlugin();
    Pair c = connectPair(p, toPeer, fromPeer);
    const double plain = pluginPingPong(p, c, first, bytes, iters);
    const double proxied = proxyPingPong(p, c, first, bytes, iters, false);
    int ngpu = 0;
    const bool gpus = cudaGetDeviceCount(&ngpu) == cudaSuccess && ngpu > 0;
    const double pinned = gpus ? proxyPingPong(p, c, first, bytes, iters, true) : -1;
    const double gpu = gpus ? gpuPingPong(p, c, first, bytes, iters) : -1;
    if (first) {
        printf("net_latency: %s, %zu B, %d round trips: one way %.2f us with the plugin alone, %.2f us through "
               "the proxies (CPU in place of the GPU)", p->name, bytes, iters, plain, proxied);
        if (gpus) printf(", %.2f us with pinned FIFOs, %.2f us between GPU kernels", pinned, gpu);
        printf("\n");
    }
    // Both sides are done with the data before either closes.
    char b = 0;
    if (write(toPeer, &b, 1) != 1 || read(fromPeer, &b, 1) != 1) die("pipe");
    p->closeSend(c.send);
    p->closeRecv(c.recv);
    p->closeListen(c.listen);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    const size_t bytes = argc > 1 ? strtoull(argv[1], nullptr, 0) : 8;
    const int iters = argc > 2 ? atoi(argv[2]) : 10000;
    int ab[2], ba[2];
    if (pipe(ab) || pipe(ba)) die("pipe");
    fflush(stdout);
    pid_t pid = fork(); // before any plugin is initialised (neither UCX nor verbs survive fork)
    if (pid == 0) _exit(side(false, ba[1], ab[0], bytes, iters));
    int rc = side(true, ab[1], ba[0], bytes, iters);
    int st = 0;
    waitpid(pid, &st, 0);
    return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
