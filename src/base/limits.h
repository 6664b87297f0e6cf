/*
 * Bounds that the parameter table, the runtime and the kernels share (a
 * parameter's range, a kernel's fixed-size arrays), here so that the bottom
 * layer can state them without including the kernels' headers.
 */
#pragma once

namespace loom {

constexpr int kMaxChannels = 64;
// Threads of a ring, edge, exchange or scan CTA (LOOM_NTHREADS's bound): at
// 512 a kernel may take 128 registers, which the Simple loop's 8 vectors in
// flight need without spilling (NCCL's bound too).
constexpr int kMaxRingThreads = 512;
constexpr int kMaxSlots = 64;       // LOOM_NSLOTS's bound
constexpr int kMaxNetChannels = 16; // channels of a communicator that spans hosts
constexpr int kMaxExchangeLanes = 48;

} // namespace loom
