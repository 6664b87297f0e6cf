/*
 * Writes into device memory that loom just allocated (connection tables,
 * FIFO regions) during set-up, without the legacy default stream: work on
 * that stream waits for every blocking stream's work in flight, other
 * communicators' kernels included, which may wait for peer ranks whose
 * progress needs this thread (several communicators at once under
 * MPI_THREAD_MULTIPLE: a cudaMemcpy in one communicator's set-up hung on
 * another's collective). The write runs on a non-blocking stream of its own
 * and is complete on return.
 */
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>

namespace loom {

// Copies `bytes` from `src` (host or device), or zeroes them where src is
// null, into `dst` on the current device.
cudaError_t setupWrite(void *dst, const void *src, size_t bytes);

} // namespace loom
