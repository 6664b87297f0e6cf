/* The `ib` net plugin (native verbs; libibverbs opened at run time). */
#pragma once

#include <cstddef>
#include <cstdint>

#include "btl_gpu/net/net.h"

namespace loom {
namespace net {

const NetPlugin *ibPlugin();

// Registrations currently held (the cache shares one among ranges inside it).
size_t ibLiveRegistrations();

// Async events the devices have reported so far.
uint64_t ibAsyncEvents();

} // namespace net
} // namespace loom
