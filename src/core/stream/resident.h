/*
 * The resident kernel's host side (device/resident/resident_args.h): small one-shot
 * calls inside a host without a launch per call. The first such call
 * launches the kernel on a stream of its own (non-blocking: the legacy
 * default stream never waits for it); later calls post to its mailbox and
 * spin on its `done` word, inside the call. It leaves after LOOM_RESIDENT_IDLE_US without a
 * call (so cudaDeviceSynchronize and cudaFree wait at most that long), when a
 * reduction of another (type, op) comes, or with the communicator.
 *
 * A call goes there only when nothing may still write its buffers: the
 * caller did not pass a stream of its own, no call is pending (below),
 * loom's stream and the legacy default stream are idle, and no other rank's
 * process shares this GPU without CUDA's MPS as far as this process has seen
 * (its kernels would only run in time slices beside a kernel that stays).
 * Since a blocking call is finished when it returns, work the caller puts on
 * the legacy stream afterwards sees its results, as after a launched call.
 * Ranks choose alone: the resident kernel runs the launched kernel's body
 * with the same lines and flags (device/oneshot/oneshot_body.h).
 *
 * With LOOM_RESIDENT_NONBLOCKING=2 (the default; 1: only while this process
 * has no other communicator with a resident kernel), a caller that may not wait
 * (loomCommSetHostWait(0): MPI's non-blocking collectives) posts the call
 * and returns: the call is pending until a mark
 * (loomCommTest) or loomCommWait sees its `done`. Meanwhile the mailbox is
 * taken, so the next call launches, and every call's first step
 * (beginCall -> residentOrder) makes loom's stream wait on the GPU for the
 * pending call's `done` (cuStreamWaitValue32; without stream memory
 * operations, a wait on the host): a launched one-shot must not run beside
 * it on the same lines. Calls on a stream of the caller's own are not
 * ordered after a pending call (the component uses loom's stream throughout).
 */
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "device/oneshot/oneshot_args.h"
#include "loom_component.h"

struct loomComm;

namespace loom {

struct ResidentState; // resident.cc

// Whether a one-shot call of `bytes` may go to the resident kernel once the
// streams are idle: the settings, this process's GPU, and a call that may
// wait or, for one that may not, stream memory operations (residentOrder).
bool residentAllowed(const loomComm *comm, size_t bytes);

// Whether the one-shot call `a` (of `units` 8-byte units) may go to the resident kernel now.
bool residentEligible(loomComm *comm, size_t units, cudaStream_t stream);

// Runs the call there and waits for it (the call is finished when it
// returns, so nothing the caller does next needs ordering after it), or,
// for a caller that may not wait, posts it (pending, above); *ran
// false where the kernel could not be had (set-up, launch: said at WARN),
// and then the caller launches the call, and every later one.
loomResult_t residentRun(loomComm *comm, const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, bool moves,
                         bool *ran);

// The pending call's sequence number (0: none; one seen done is cleared).
uint32_t residentPending(loomComm *comm);
// Whether the pending call s is done (*done; true as well once it failed,
// and then its error, or success with the abort words set for
// callsFinished to report).
loomResult_t residentTest(loomComm *comm, uint32_t s, bool *done);
// Waits on the host for the pending call, if any.
loomResult_t residentSettle(loomComm *comm);
// Every call's first step while a call is pending: loom's stream waits for it.
void residentOrder(loomComm *comm);

// Whether any communicator of this process found another process on its GPU,
// not both MPS clients (comm.cc; the resident kernel stays off then, on
// every communicator).
bool gpuSharedInProcess();

// callsFinished (core/comm/call_end.cc); where it reports a failure on a
// communicator with a resident kernel, also that kernel's state at INFO for
// a bug report: alive or not, the call pending, the done/taken words, loom's
// stream. Every wait that ends calls goes through here.
loomResult_t residentCallsFinished(loomComm *comm, cudaError_t err, bool all);

// Tells the kernel to leave and frees what it used (communicator teardown).
void residentRelease(loomComm *comm);

} // namespace loom
