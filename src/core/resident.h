/*
 * The resident kernel's host side (device/resident_args.h): blocking one-shot
 * calls inside a host without a launch per call. The first such call
 * launches the kernel on a stream of its own (non-blocking: the legacy
 * default stream never waits for it); later calls post to its mailbox and
 * spin on its `done` word. It leaves after LOOM_RESIDENT_IDLE_US without a
 * call (so cudaDeviceSynchronize and cudaFree wait at most that long), when a
 * reduction of another (type, op) comes, or with the communicator.
 *
 * A call goes there only when nothing may still write its buffers: the
 * caller did not pass a stream of its own, the call is blocking (the caller
 * waits with loomCommWait before its next step), loom's stream and the legacy
 * default stream are idle, and no other rank's process shares this GPU (its
 * kernels would only run in time slices beside a kernel that never ends).
 * Ranks choose alone: the resident kernel runs the launched kernel's body
 * with the same lines and flags (device/oneshot_body.h).
 */
#pragma once

#include <cuda_runtime.h>

#include "device/oneshot_args.h"
#include "loom.h"

struct loomComm;

namespace loom {

struct ResidentState; // resident.cc

// Whether the one-shot call `a` (of `units` 8-byte units) may go to the resident kernel now.
bool residentEligible(loomComm *comm, size_t units, cudaStream_t stream);

// Posts the call (launching the kernel when none runs); the caller then
// waits with residentFinish (loomCommWait does).
loomResult_t residentRun(loomComm *comm, const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, bool moves);

// Waits for the posted call, if any, as loomCommWait reports it.
loomResult_t residentFinish(loomComm *comm);

// Tells the kernel to leave and frees what it used (communicator teardown).
void residentRelease(loomComm *comm);

} // namespace loom
