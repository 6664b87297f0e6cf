/*
 * What the two ways of staging a rank's buffers share (core/stage/stage_bounce.cc:
 * calls that finish inside the call; core/stage/stage_async.cc: non-blocking ones).
 */
#pragma once

#include <cuda_runtime.h>

#include "core/comm/comm.h"

namespace loom {

// The communicator's pinned bounce buffer for `bytes` of the host-side
// buffer `host`, or null where the copy goes straight from or to it (larger
// than the bounce buffer, another GPU's memory, or no pinned memory to be
// had). One copy at a time uses it.
void *stageBounceFor(loomComm *comm, const void *host, size_t bytes);

// Whether a staged call's source is device (or managed) memory, which the
// application's legacy-stream work may still be writing (core/stream/app_order.cc).
bool stagedSourceOnDevice(const void *src);
// A staging copy that could not be enqueued or failed: the communicator is
// marked failed (the next call would meet a broken context); the error says
// which direction (`what`: "in" or "out").
loomResult_t stageCopyFail(loomComm *comm, const char *what, cudaError_t e);

} // namespace loom
