#include "btl_gpu/net/plugins.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "btl_gpu/net/ib/net_ib.h"
#include "config.h"
#include "base/debug.h"
#include "base/param_read.h"
#include "proxy/proxy.h"
#ifdef LOOM_HAVE_UCX
#include "btl_gpu/net/ucx/net_ucx.h"
#endif

namespace loom {

const net::NetPlugin *netPlugin(int index) {
    switch (index) {
    case 0: return net::ibPlugin();
#ifdef LOOM_HAVE_UCX
    case 1: return net::ucxPlugin();
#endif
    default: return nullptr;
    }
}

uint32_t netUsablePlugins() {
    static std::once_flag once;
    static uint32_t mask = 0;
    std::call_once(once, [] {
        const char *only = paramString("LOOM_NET");
        for (int i = 0; i < kNumNetPlugins; ++i) {
            const net::NetPlugin *p = netPlugin(i);
            if (!p) continue;
            if (only && *only && strcmp(only, p->name) != 0) continue;
            int ndev = 0;
            if (p->init() != loomSuccess || p->devices(&ndev) != loomSuccess || ndev < 1) {
                LOOM_INFO(kNet, "net plugin %s: not usable here", p->name);
                continue;
            }
            LOOM_INFO(kNet, "net plugin %s: %d device(s)", p->name, ndev);
            mask |= 1u << i;
        }
        if (only && *only && !mask) LOOM_WARN(kNet, "LOOM_NET=%s: no such usable net plugin", only);
    });
    return mask;
}

namespace {
std::mutex g_proxyMu;
constexpr int kMaxProxyThreads = 16;
struct ProxySlot {
    Proxy *proxy = nullptr;
    int refs = 0;
};
ProxySlot g_proxies[kNumNetPlugins][kMaxProxyThreads];

// One proxy thread per process moves everything where the NIC moves the
// bytes (ib). Over the ucx plugin the CPU may copy every byte (TCP), and
// bandwidth grew with threads up to 4 (docs/performance.md, "Measurements
// behind the code"), so ucx gets 4 by default. LOOM_PROXY_THREADS overrides.
int proxyThreads(const net::NetPlugin *plugin) {
    long v = paramLong("LOOM_PROXY_THREADS");
    if (v == 0) v = strcmp(plugin->name, "ucx") == 0 ? 4 : 1;
    return (int)(v < 1 ? 1 : v > kMaxProxyThreads ? kMaxProxyThreads : v);
}
} // namespace

Proxy *netAcquireProxy(const net::NetPlugin *plugin, int channel) {
    std::lock_guard<std::mutex> g(g_proxyMu);
    for (int i = 0; i < kNumNetPlugins; ++i) {
        if (netPlugin(i) != plugin) continue;
        const int t = channel % proxyThreads(plugin);
        ProxySlot &s = g_proxies[i][t];
        if (!s.proxy) {
            s.proxy = new Proxy(plugin, (int)paramLong("LOOM_PROXY_SPIN_US"));
            LOOM_INFO(kProxy, "proxy thread %d of %d started for %s", t, proxyThreads(plugin), plugin->name);
        }
        ++s.refs;
        return s.proxy;
    }
    return nullptr;
}

void netReleaseProxy(Proxy *proxy) {
    if (!proxy) return;
    std::lock_guard<std::mutex> g(g_proxyMu);
    for (auto &perPlugin : g_proxies)
        for (ProxySlot &s : perPlugin)
            if (s.proxy == proxy && --s.refs == 0) {
                delete s.proxy;
                s.proxy = nullptr;
                LOOM_INFO(kProxy, "proxy thread stopped");
            }
}

} // namespace loom
