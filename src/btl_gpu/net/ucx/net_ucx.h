/* The `ucx` net plugin (UCP tag matching). Built where UCX's headers exist. */
#pragma once

#include <cstdint>

#include "btl_gpu/net/net.h"
#include "base/side_channel.h"

namespace loom {
namespace net {

const NetPlugin *ucxPlugin();

// The listen handle: the receiving worker's address and a secret the
// sender's hello must start with (a UCX peer that found the worker some other
// way cannot become the listener's connection), plus the connect state of
// the sender that uses it (NCCL-style: connect is re-entered with the handle).
struct UcxHandle {
    uint32_t magic;
    uint32_t addrLen;
    void *pending; // sender side: the comm being connected
    uint8_t secret[kSideSecretBytes];
    char addr[kHandleBytes - 16 - kSideSecretBytes];
};
static_assert(sizeof(UcxHandle) <= kHandleBytes, "handle too large");

} // namespace net
} // namespace loom
