/*
 * An authenticated TCP side channel for one connection's out-of-band
 * handshake (the ib plugin exchanges QP numbers, GIDs and its CTS ring over
 * it). The listener
 *  - binds to the one interface address its caller chose, never INADDR_ANY;
 *  - hands back the first connection whose hello carries the listener's
 *    random 128-bit secret, which travels only inside the listen handle (the
 *    communicator's bootstrap carries it to the one peer meant to connect);
 *  - then stops listening: it accepts one connection in its life, so a
 *    replayed hello afterwards finds no listener (a serving listener, made
 *    with once = false, keeps listening and hands back every proved one:
 *    for read-only queries, core/ras/arrival_query.h);
 *  - closes everything else that connects without acting on it: garbage, a
 *    wrong secret, magic, version or size, a hello truncated or stalled past
 *    its deadline. Up to kSidePending handshakes are read at once; beyond
 *    that the oldest one that has not yet proved the secret is dropped, so
 *    a flood of connections that stall cannot shut the legitimate one out.
 *    None is dropped for room before it had kSideGraceSeconds to speak:
 *    while every pending one is younger, newcomers wait in the kernel's
 *    accept queue (first in, first out). Without the grace a burst of 32
 *    connections could push out a peer whose thread had not yet been
 *    scheduled to send its header (seen on a loaded 2-core CI machine).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom.h"

namespace loom {
namespace net {

constexpr size_t kSideSecretBytes = 16;
constexpr int kSidePending = 32;          // handshakes read at once
constexpr double kSideHelloSeconds = 5.0; // to deliver a whole hello
constexpr double kSideGraceSeconds = 1.0; // never pushed out for room sooner
constexpr int kSideBacklog = 256;         // the kernel's accept queue

// Where a connector finds a listener, and what it must present there.
struct SideAddress {
    uint32_t ip;   // network order
    uint16_t port; // network order
    uint16_t pad;
    uint8_t secret[kSideSecretBytes];
};

// What a connector sends first; `payloadBytes` of payload follow it.
struct SideHello {
    uint32_t magic;
    uint16_t version;
    uint16_t payloadBytes;
    uint8_t secret[kSideSecretBytes];
};

// The IPv4 address (network order) side channels listen on: LOOM_SOCKET_IFADDR,
// else the first non-loopback IPv4 address, else loopback.
uint32_t sideLocalIp();

// A fresh random secret (getrandom), and a comparison whose time does not
// depend on where two secrets differ. The ucx plugin's hello uses them too.
void sideNewSecret(uint8_t *secret);
bool sideSameSecret(const uint8_t *a, const uint8_t *b);

// The bytes a connector sends to `addr`: the hello, then the payload.
std::vector<uint8_t> sideHello(const SideAddress &addr, const void *payload, size_t bytes);

class SideListener {
  public:
    // Listens on `ip` (network order; the kernel picks the port) for hellos
    // carrying `payloadBytes` bytes; fills `addr` with a fresh secret.
    // once = false: keeps listening after a connection is handed back.
    static loomResult_t open(uint32_t ip, size_t payloadBytes, SideAddress *addr, SideListener **out,
                             double helloSeconds = kSideHelloSeconds, bool once = true);
    ~SideListener();
    SideListener(const SideListener &) = delete;
    SideListener &operator=(const SideListener &) = delete;

    // Non-blocking step: accepts waiting connections and reads their hellos.
    // *fd >= 0 once one presented the secret: its payload is in `payload`,
    // the (non-blocking) socket belongs to the caller, and nothing listens
    // any more. *fd == -1: not yet, call again.
    loomResult_t poll(void *payload, int *fd);

    bool listening() const { return listenFd_ >= 0; }
    // The sockets poll() may wait on: the listening one, then the pending ones.
    std::vector<int> fds() const;
    uint64_t dropped() const { return dropped_; } // connections closed unheard

  private:
    struct Pending {
        int fd;
        double since;    // accepted at
        double deadline; // for the whole hello
        size_t got;
        bool proved; // its header carried the secret
        std::vector<uint8_t> buf;
        char peer[48];
    };
    SideListener() = default;
    bool makeRoom();
    void acceptNew();
    // 1: a valid hello is complete, 0: not yet, -1: dropped (closed).
    int readHello(Pending &p);
    void drop(Pending &p, const char *why);
    void stopListening();

    int listenFd_ = -1;
    size_t payloadBytes_ = 0;
    double helloSeconds_ = kSideHelloSeconds;
    bool once_ = true;
    uint8_t secret_[kSideSecretBytes] = {};
    std::vector<Pending> pending_;
    uint64_t dropped_ = 0;
};

} // namespace net
} // namespace loom
