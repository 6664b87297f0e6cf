/*
 * The proxy: one progress thread per process that moves the steps of net
 * connections. It meets the GPU at the same counters the ring kernels use for
 * p2p and shm, in host-mapped memory:
 *
 *   send side: the GPU writes a step into the send FIFO, stores its size in
 *     sizes[slot] and bumps `tail`; the proxy sends it (isend) and, once the
 *     network is done with the slot, bumps `head` (the GPU's credit).
 *   recv side: the proxy posts receives into free slots (while the GPU's
 *     `head` allows), and when a step has arrived stores its size and bumps
 *     `tail` for the GPU; with slots in GPU memory (fifo.flush), only after
 *     the plugin's flush of the step has completed.
 *
 * The host tells the proxy how many steps a collective will move on each
 * connection (post()); until they are done the thread spins, so it never
 * sleeps in the middle of a collective. Idle, it sleeps on a condition
 * variable; post() and kick() wake it within microseconds. After
 * `idleSpinUs` without progress it sleeps again, for 1 ms at first and up to
 * 16 ms while nothing happens.
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "btl_gpu/net/net.h"
#include "loom.h"

namespace loom {

struct ProxyFifo {
    char *slots;                 // nslots x slotBytes
    size_t slotBytes;
    int nslots;
    volatile uint64_t *tail;     // steps posted (send: by the GPU; recv: by the proxy)
    volatile uint64_t *head;     // steps freed (send: by the proxy; recv: by the GPU)
    volatile uint64_t *sizes;    // bytes of the step in each slot
    void *mhandle;               // the slots' registration with the plugin (null where none is needed)
    bool flush = false;          // recv into GPU memory (GPUDirect RDMA): iflush each step before the tail
};

class Proxy {
  public:
    explicit Proxy(const net::NetPlugin *plugin, int idleSpinUs = 200);
    ~Proxy(); // stops the thread; connections must be removed first

    // Connections; the comm belongs to the caller (close it after remove).
    // -1 when the proxy already has kMaxConns (removed ones are reused).
    static constexpr int kMaxConns = 1024;
    int addSend(void *sendComm, const ProxyFifo &fifo, int tag);
    int addRecv(void *recvComm, const ProxyFifo &fifo, int tag);
    void remove(int id);
    // Waits (up to `seconds`) until connection `id` has finished every step
    // post() promised and every send it started: the GPU finishes a
    // collective once its last step is in the FIFO, before the proxy has
    // sent it, so a connection must be quiet before it is closed.
    bool quiesce(int id, double seconds);

    // A collective enqueued on the GPU will move `steps` more steps on
    // connection `id`: stay awake until they are done. Lock-free while the
    // thread spins (it is on every collective's path: taking the mutex from
    // the spinning thread cost tens of microseconds a call on a 2-core
    // host); wakes it if it sleeps.
    void post(int id, uint64_t steps);
    // The collective was abandoned (the GPU gave up): forget the steps
    // post() promised on connection `id` and its sends in flight (a peer that
    // stopped may never take them), so the thread can idle again.
    void dropPosted(int id);
    // Work was enqueued: run now.
    void kick();

    // First error seen on any connection (loomSuccess if none).
    loomResult_t error() const { return error_.load(); }
    // The error that stopped connection `id` (loomSuccess while it works).
    loomResult_t error(int id);
    // Sleeps of the thread so far (for tests of idle behaviour).
    uint64_t sleeps() const { return sleeps_.load(); }

  private:
    struct Conn {
        bool send = false;
        void *comm = nullptr;
        ProxyFifo fifo{};
        int tag = 0;
        uint64_t posted = 0; // steps handed to the network
        uint64_t done = 0;   // steps completed
        std::vector<void *> requests; // per slot, in flight
        std::vector<char> flushing;   // per slot: requests[slot] is the step's flush (its data has arrived)
        bool active = true;
        bool removed = false;   // remove(): the slot may be reused
        bool abandoned = false; // dropPosted(): nothing more is waited for here
        loomResult_t err = loomSuccess;
    };
    int add(bool send, void *comm, const ProxyFifo &fifo, int tag); // with mu_ held
    void run();
    bool progress(Conn &c); // true if anything moved
    bool postedWork() const; // steps post() promised that are not done (with mu_ held)
    bool failConn(Conn &c, loomResult_t r); // records r, stops c; true

    const net::NetPlugin *plugin_;
    const int idleSpinUs_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Conn> conns_;
    // Per connection (by id): steps posted by the host with post(); 0
    // without post(): no promise. Atomic, outside conns_, so post() needs no lock.
    std::unique_ptr<std::atomic<uint64_t>[]> targets_{new std::atomic<uint64_t>[kMaxConns]()};
    std::atomic<bool> sleeping_{false}; // the thread is (about to be) waiting on cv_
    bool stop_ = false;
    bool kicked_ = false;
    std::atomic<loomResult_t> error_{loomSuccess};
    std::atomic<uint64_t> sleeps_{0};
    uint64_t passes_ = 0;
    std::atomic<int> waiters_{0}; // other threads waiting for mu_
    struct Update;
    std::thread thread_;
};

} // namespace loom
