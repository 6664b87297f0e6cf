/*
 * The resident kernel's host side (device/resident_args.h): blocking one-shot
 * calls inside a host without a launch per call. The first such call
 * launches the kernel on a stream of its own (non-blocking: the legacy
 * default stream never waits for it); later calls post to its mailbox and
 * spin on its `done` word, inside the call. It leaves after LOOM_RESIDENT_IDLE_US without a
 * call (so cudaDeviceSynchronize and cudaFree wait at most that long), when a
 * reduction of another (type, op) comes, or with the communicator.
 *
 * A call goes there only when nothing may still write its buffers: the
 * caller did not pass a stream of its own, the call may wait on the host (not
 * MPI's non-blocking ones), loom's stream and the legacy default stream are
 * idle, and no other rank's process shares this GPU as far as this process
 * has seen (its kernels would only run in time slices beside a kernel that
 * stays). Since the call is finished when it returns, work the caller puts
 * on the legacy stream afterwards sees its results, as it would have after
 * a launch on loom's (blocking) stream.
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

// Whether a one-shot call of `bytes` may go to the resident kernel once the
// streams are idle: the settings, this process's GPU, a call that may wait.
bool residentAllowed(const loomComm *comm, size_t bytes);

// Whether the one-shot call `a` (of `units` 8-byte units) may go to the resident kernel now.
bool residentEligible(loomComm *comm, size_t units, cudaStream_t stream);

// Runs the call there and waits for it (the call is finished when it
// returns, so nothing the caller does next needs ordering after it); *ran
// false where the kernel could not be had (set-up, launch: said at WARN),
// and then the caller launches the call, and every later one.
loomResult_t residentRun(loomComm *comm, const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, bool moves,
                         bool *ran);

// Whether any communicator of this process found another process on its GPU
// (comm.cc; the resident kernel stays off then, on every communicator).
bool gpuSharedInProcess();

// Tells the kernel to leave and frees what it used (communicator teardown).
void residentRelease(loomComm *comm);

} // namespace loom
