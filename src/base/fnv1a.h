// FNV-1a, 64 bits: the one string hash of loom (host ids, communicator tags,
// string tunables that every rank must hold alike).
#pragma once

#include <cstdint>
#include <string>

namespace loom {

inline uint64_t fnv1a(const std::string &s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

} // namespace loom
