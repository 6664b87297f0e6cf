/* The `ib` net plugin (native verbs; libibverbs opened at run time). */
#pragma once

#include "btl_gpu/net/net.h"

namespace loom {
namespace net {

const NetPlugin *ibPlugin();

} // namespace net
} // namespace loom
