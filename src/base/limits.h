/*
 * Bounds that the parameter table, the runtime and the kernels share (a
 * parameter's range, a kernel's fixed-size arrays), here so that the bottom
 * layer can state them without including the kernels' headers.
 */
#pragma once

namespace loom {

constexpr int kMaxChannels = 64;
constexpr int kMaxRingThreads = 1024;
constexpr int kMaxSlots = 64;       // LOOM_NSLOTS's bound
constexpr int kMaxNetChannels = 16; // channels of a communicator that spans hosts
constexpr int kMaxExchangeLanes = 48;

} // namespace loom
