// A bounded fuzzer for loom's side channel (src/base/side_channel.h),
// shared by the CPU test of the channel and the ib plugin's test: hostile
// connections to a listener over loopback, none of which may be accepted.
// It never sends a whole hello with the right secret: what it sends is
// garbage, hellos cut short (closed or left stalled), a wrong secret, magic,
// version or size. Stalled connections stay open until fuzz() returns.
#pragma once

#include <arpa/inet.h>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <dirent.h>
#include <netinet/in.h>
#include <random>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "base/side_channel.h"

namespace sidefuzz {

using loom::net::SideAddress;
using loom::net::SideHello;

// Open descriptors of this process (a leak check around a test).
inline int openFds() {
    int n = 0;
    if (DIR *d = opendir("/proc/self/fd")) {
        while (dirent *e = readdir(d))
            if (e->d_name[0] != '.') ++n;
        closedir(d);
    }
    return n - 1; // the directory's own
}

// A blocking TCP connection to addr's ip:port; -1 (errno set) if refused.
inline int dial(const SideAddress &addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr.ip;
    sa.sin_port = addr.port;
    if (fd >= 0 && connect(fd, (sockaddr *)&sa, sizeof(sa)) == 0) return fd;
    int e = errno;
    if (fd >= 0) close(fd);
    errno = e;
    return -1;
}

inline bool sendAll(int fd, const void *p, size_t n) {
    const char *c = static_cast<const char *>(p);
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

struct Stats {
    int connected = 0; // connections made (each one must be dropped)
    int refused = 0;   // connect() refused: nothing listened any more
};

inline Stats fuzz(const SideAddress &addr, size_t payloadBytes, uint32_t seed, int rounds) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> payload(payloadBytes);
    for (auto &b : payload) b = (uint8_t)rng();
    const std::vector<uint8_t> valid = loom::net::sideHello(addr, payload.data(), payload.size());
    std::vector<int> stalled;
    Stats st;
    for (int r = 0; r < rounds; ++r) {
        int fd = dial(addr);
        if (fd < 0) {
            ++st.refused;
            continue;
        }
        ++st.connected;
        std::vector<uint8_t> m = valid;
        bool stall = false;
        switch (rng() % 8) {
        case 0: m.clear(); break; // connect, say nothing, close
        case 1:                   // garbage
            m.resize(1 + rng() % 512);
            for (auto &b : m) b = (uint8_t)rng();
            break;
        case 2: m.resize(rng() % m.size()); break; // cut short, closed
        case 3:                                     // cut short, left open
            m.resize(rng() % m.size());
            stall = true;
            break;
        case 4: m[offsetof(SideHello, secret) + rng() % sizeof(SideHello::secret)] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 5: m[rng() % 4] ^= 0x20; break;                                // magic
        case 6: m[offsetof(SideHello, version)] += 1 + rng() % 200; break; // version
        case 7: m[offsetof(SideHello, payloadBytes)] ^= (uint8_t)(1 + rng() % 255); break;
        }
        // Some in pieces, as a slow network would deliver them.
        size_t cut = m.empty() ? 0 : rng() % m.size();
        if (!sendAll(fd, m.data(), cut) || !sendAll(fd, m.data() + cut, m.size() - cut)) { /* dropped early: fine */ }
        if (stall) stalled.push_back(fd);
        else close(fd);
    }
    for (int fd : stalled) close(fd);
    return st;
}

} // namespace sidefuzz
