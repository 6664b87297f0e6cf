#include "base/side_channel.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <random>
#include <string>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param_read.h"

namespace loom {
namespace net {

namespace {

constexpr uint32_t kHelloMagic = 0x73686f6c; // "lohs"
constexpr uint16_t kHelloVersion = 1;

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string addressText(const sockaddr_in &sa) {
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

} // namespace

uint32_t sideLocalIp() {
    if (const char *e = paramString("LOOM_SOCKET_IFADDR")) return inet_addr(e);
    uint32_t ip = htonl(INADDR_LOOPBACK);
    ifaddrs *ifs = nullptr;
    if (getifaddrs(&ifs) != 0) return ip;
    for (ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            uint32_t a = ((sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            if (a != htonl(INADDR_LOOPBACK)) {
                ip = a;
                break;
            }
        }
    freeifaddrs(ifs);
    return ip;
}

void sideNewSecret(uint8_t *s) {
    size_t got = 0;
    while (got < kSideSecretBytes) {
        ssize_t n = getrandom(s + got, kSideSecretBytes - got, 0);
        if (n > 0) got += (size_t)n;
        else if (errno != EINTR) break;
    }
    if (got == kSideSecretBytes) return;
    std::random_device rd; // getrandom(2) missing: the C++ library's source
    for (size_t i = 0; i < kSideSecretBytes; ++i) s[i] = (uint8_t)rd();
}

bool sideSameSecret(const uint8_t *a, const uint8_t *b) {
    uint8_t diff = 0;
    for (size_t i = 0; i < kSideSecretBytes; ++i) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

std::vector<uint8_t> sideHello(const SideAddress &addr, const void *payload, size_t bytes) {
    SideHello h;
    memset(&h, 0, sizeof(h));
    h.magic = kHelloMagic;
    h.version = kHelloVersion;
    h.payloadBytes = (uint16_t)bytes;
    memcpy(h.secret, addr.secret, kSideSecretBytes);
    std::vector<uint8_t> out(sizeof(h) + bytes);
    memcpy(out.data(), &h, sizeof(h));
    if (bytes) memcpy(out.data() + sizeof(h), payload, bytes);
    return out;
}

loomResult_t SideListener::open(uint32_t ip, size_t payloadBytes, SideAddress *addr, SideListener **out,
                                double helloSeconds, bool once) {
    *out = nullptr;
    if (payloadBytes > UINT16_MAX) return fail(loomInternalError, "side channel: a %zu-byte payload", payloadBytes);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ip;
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, kSideBacklog) != 0 ||
        getsockname(fd, (sockaddr *)&sa, &len) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        char text[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &ip, text, sizeof(text));
        return fail(loomSystemError, "side channel: listening on %s: %s (is it an address of this host? "
                    "LOOM_SOCKET_IFADDR chooses it)", text, strerror(e));
    }
    SideListener *l = new SideListener;
    l->listenFd_ = fd;
    l->payloadBytes_ = payloadBytes;
    l->helloSeconds_ = helloSeconds;
    l->once_ = once;
    sideNewSecret(l->secret_);
    memset(addr, 0, sizeof(*addr));
    addr->ip = ip;
    addr->port = sa.sin_port;
    memcpy(addr->secret, l->secret_, kSideSecretBytes);
    *out = l;
    return loomSuccess;
}

SideListener::~SideListener() {
    for (Pending &p : pending_) close(p.fd);
    stopListening();
}

std::vector<int> SideListener::fds() const {
    std::vector<int> out;
    if (listenFd_ >= 0) out.push_back(listenFd_);
    for (const Pending &p : pending_) out.push_back(p.fd);
    return out;
}

void SideListener::stopListening() {
    if (listenFd_ >= 0) close(listenFd_);
    listenFd_ = -1;
}

void SideListener::drop(Pending &p, const char *why) {
    // A scanner or an attack is worth one warning per process, not a flood.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
        LOOM_WARN(kNet, "side channel: closed a connection from %s: %s (further ones are logged at INFO)", p.peer, why);
    else
        LOOM_INFO(kNet, "side channel: closed a connection from %s: %s", p.peer, why);
    close(p.fd);
    p.fd = -1;
    ++dropped_;
}

// Room for one more pending handshake: free, or made by dropping the oldest
// one that has not proved the secret (it had the longest to speak) once it
// had its grace. One whose header carried the secret is the peer, however
// slow its payload. False: everyone pending is still within the grace.
bool SideListener::makeRoom() {
    if ((int)pending_.size() < kSidePending) return true;
    const double grace = helloSeconds_ < kSideGraceSeconds ? helloSeconds_ : kSideGraceSeconds;
    const double t = now();
    for (size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].proved) continue;
        if (t - pending_[i].since < grace) return false; // the rest are younger still
        drop(pending_[i], "too many handshakes at once");
        pending_.erase(pending_.begin() + (long)i);
        return true;
    }
    return false;
}

void SideListener::acceptNew() {
    for (int k = 0; k < kSidePending && listenFd_ >= 0 && makeRoom(); ++k) {
        sockaddr_in from;
        socklen_t len = sizeof(from);
        int fd = accept4(listenFd_, (sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            // EAGAIN: nobody waiting; ECONNABORTED etc.: that one is gone;
            // EMFILE/ENFILE: try again at the next poll, after others closed.
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                LOOM_INFO(kNet, "side channel: accept: %s", strerror(errno));
            return;
        }
        Pending p;
        p.fd = fd;
        p.since = now();
        p.deadline = p.since + helloSeconds_;
        p.got = 0;
        p.proved = false;
        p.buf.assign(sizeof(SideHello) + payloadBytes_, 0);
        snprintf(p.peer, sizeof(p.peer), "%s", addressText(from).c_str());
        pending_.push_back(std::move(p));
    }
}

int SideListener::readHello(Pending &p) {
    while (p.got < p.buf.size()) {
        ssize_t n = recv(p.fd, p.buf.data() + p.got, p.buf.size() - p.got, 0);
        if (n > 0) {
            p.got += (size_t)n;
            continue;
        }
        if (n == 0) {
            drop(p, p.got ? "closed in the middle of its hello" : "closed without a hello");
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            drop(p, strerror(errno));
            return -1;
        }
        break;
    }
    if (p.got >= sizeof(SideHello)) { // judge the header as soon as it is whole
        SideHello h;
        memcpy(&h, p.buf.data(), sizeof(h));
        const char *bad = h.magic != kHelloMagic               ? "not a loom hello"
                          : h.version != kHelloVersion         ? "another hello version"
                          : h.payloadBytes != payloadBytes_    ? "a payload of the wrong size"
                          : !sideSameSecret(h.secret, secret_)  ? "a wrong secret"
                                                                : nullptr;
        if (bad) {
            drop(p, bad);
            return -1;
        }
        p.proved = true;
    }
    if (p.got == p.buf.size()) return 1;
    if (now() > p.deadline) {
        drop(p, "no whole hello in time");
        return -1;
    }
    return 0;
}

loomResult_t SideListener::poll(void *payload, int *fd) {
    *fd = -1;
    acceptNew();
    for (size_t i = 0; i < pending_.size(); ++i) {
        int r = readHello(pending_[i]);
        if (r != 1) continue;
        *fd = pending_[i].fd;
        memcpy(payload, pending_[i].buf.data() + sizeof(SideHello), payloadBytes_);
        pending_[i].fd = -1;
        break;
    }
    // Hellos that failed were closed by readHello; forget them.
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending &p) { return p.fd < 0; }),
                   pending_.end());
    if (*fd >= 0 && once_) { // one connection per listener: the rest were not meant for it
        stopListening();
        for (Pending &p : pending_) drop(p, "the listener's connection was already made");
        pending_.clear();
    }
    return loomSuccess;
}

} // namespace net
} // namespace loom
