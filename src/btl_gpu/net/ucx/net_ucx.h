/* The `ucx` net plugin (UCP tag matching). Built where UCX's headers exist. */
#pragma once

#include "btl_gpu/net/net.h"

namespace loom {
namespace net {

const NetPlugin *ucxPlugin();

} // namespace net
} // namespace loom
