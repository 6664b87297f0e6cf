/*
 * Internals of the `ib` net plugin, shared by its files: ib_device.cc (ports,
 * GIDs, async events), ib_connect.cc (side channel, QPs, handshake, teardown)
 * and net_ib.cc (registration, data path, the plugin table).
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "btl_gpu/net/ib/ibv_api.h"
#include "btl_gpu/net/net.h"
#include "base/side_channel.h"

namespace loom {
namespace net {
namespace ib {

constexpr uint32_t kMagic = 0x62696f6c; // "loib"
constexpr int kCtsSlots = 64;
constexpr int kQpDepth = 2 * kCtsSlots + 8;
constexpr int kMaxQps = 8; // per connection

struct Device {
    std::string name;
    ibv_context *ctx;
    ibv_pd *pd;
    int port;
    ibv_port_attr attr;
    int gidIndex;
    ibv_gid gid;
    bool roce;
    Properties props;
};
extern std::vector<Device> g_devs;

// The listen handle: where the receiver's side channel listens and the
// secret a connector must present there (see side_channel.h).
struct HandleData {
    uint32_t magic;
    uint32_t pad;
    SideAddress side;
    void *pending; // the sender's comm while connecting
};
static_assert(sizeof(HandleData) <= kHandleBytes, "handle too large");

// What each side tells the other about its QP.
struct ConnInfo {
    uint32_t qpn, psn, mtu; // qpn: the first data QP (or the loopback QP)
    uint32_t nqp;           // data QPs; the connector's count is used by both
    uint32_t qpns[kMaxQps];
    uint16_t lid;
    uint8_t gid[16];
    uint64_t ctsAddr; // sender: its CTS ring
    uint32_t ctsRkey;
};

// A CTS entry; valid when both sequence words carry the expected value.
struct Cts {
    uint32_t seq0;
    uint32_t rkey;
    uint64_t addr;
    uint32_t size;
    uint32_t tag;
    uint32_t pad;
    uint32_t seq1;
};

struct Comm {
    Device *dev = nullptr;
    int fd = -1;
    ibv_cq *cq = nullptr;
    std::vector<ibv_qp *> qps; // a message is split over all of them
    Cts *ring = nullptr; // sender: written by the receiver; receiver: entries it sends
    ibv_mr *ringMr = nullptr;
    uint64_t remoteRing = 0;
    uint32_t remoteRingRkey = 0;
    ibv_qp *loopQp = nullptr;   // receiver: connected to itself, for flush reads
    char *scratch = nullptr;    // ... their 8-byte destination
    ibv_mr *scratchMr = nullptr;
    uint64_t seq = 0;      // next isend / irecv
    uint64_t completed = 0; // receiver: irecvs finished
    bool failed = false;
    // handshake
    int state = 0;
    ConnInfo local{}, remote{};
    std::vector<uint8_t> hello; // sender: the side channel's hello, local as its payload
    size_t moved = 0;
};

struct ListenComm {
    Device *dev;
    SideListener *side;
    Comm *accepting = nullptr; // its hello arrived: sending the reply
};

// A registration: the MR and what memory it covers (flush policy), shared by
// every registration of a range inside it while any of them is live.
struct IbMr {
    ibv_mr *mr;
    MemType type;
    uintptr_t begin, end;
    Device *dev;
    int refs;
};

// Live comms, so that an async event about one of their QPs can fail them
// (and an event about a comm being destroyed finds nothing).
extern std::mutex g_commMu;
extern std::vector<Comm *> g_comms;
extern std::atomic<uint64_t> g_asyncEvents;

// Live registrations. Only live ones are reused, so memory freed (after its
// last deregistration) and allocated again is never served a stale MR.
extern std::mutex g_regMu;
extern std::vector<IbMr *> g_regs;

struct Request {
    Comm *comm;
    bool recv;
    int pending = 1; // completions still to come (one per QP used)
    bool done = false;
    loomResult_t err = loomSuccess;
    size_t size = 0;
};

// ib_device.cc
loomResult_t ibInit();
loomResult_t ibDevices(int *n);
loomResult_t ibGetProperties(int dev, Properties *p);

// ib_connect.cc
loomResult_t ibListen(int dev, Handle *handle, void **listenComm);
loomResult_t ibConnect(int dev, Handle *handle, void **sendComm);
loomResult_t ibAccept(void *listenComm, void **recvComm);
loomResult_t ibAbandonConnect(Handle *handle);
loomResult_t ibClose(void *comm);
loomResult_t ibCloseListen(void *listenComm);

} // namespace ib
} // namespace net
} // namespace loom
