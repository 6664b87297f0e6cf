/*
 * Which net plugins this process can use, and the process's proxy thread.
 *
 * Plugins in order of preference: `ib` (native verbs, when an RDMA port is
 * active), then `ucx` (where libucp loads; TCP when nothing else). LOOM_NET=ib
 * or LOOM_NET=ucx allows only that one. The ranks of a communicator agree on
 * one plugin from what each of them can use (both ends of a connection must
 * speak the same protocol).
 */
#pragma once

#include <cstdint>

#include "btl_gpu/net/net.h"
#include "loom.h"

namespace loom {

class Proxy;

constexpr int kNumNetPlugins = 2;

// Bit i set: plugin i (0 ib, 1 ucx) initialised here and has a device.
uint32_t netUsablePlugins();
const net::NetPlugin *netPlugin(int index);

// The proxy thread of `plugin` that moves channel `channel`, started on first
// use: one per process for ib, four for ucx (LOOM_PROXY_THREADS=N: N; channel
// c on thread c % N).
// Every acquire is matched by a release; the last one stops the thread.
Proxy *netAcquireProxy(const net::NetPlugin *plugin, int channel);
void netReleaseProxy(Proxy *proxy);

} // namespace loom
