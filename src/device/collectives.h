/*
 * Host-callable launchers of loom's device collectives (the only door from
 * core into src/device).
 */
#pragma once

#include <cuda_runtime.h>

#include "device/oneshot/oneshot_args.h"
#include "device/resident/resident_args.h"
#include "device/ring/ring_args.h"
#include "device/edges/edge_args.h"
#include "device/exchange/exchange_args.h"
#include "device/scan/scan_args.h"
#include "device/zerocopy/zerocopy_args.h"
#include "loom.h"

namespace loom {

// What loading kernels found (device/kernel_load.h).
struct KernelLoad {
    int kernels = 0;          // instances loaded (one counted once per (type, op) that reaches it)
    size_t maxLocalBytes = 0; // the largest per-thread local memory among them
};

// Enqueues one ring collective (a.coll; a.nchannels CTAs) on stream:
// reductions per (dtype, op); allgather and broadcast over bytes (count in bytes).
cudaError_t launchRingColl(const RingArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);
cudaError_t launchRingBytes(const RingArgs &a, cudaStream_t stream);

// Enqueues one collective over the edges (a.s: tree or recursive-doubling
// allreduce, the doubling family; one CTA per lane) on stream: reductions per
// (dtype, op); broadcast and allgather over bytes (count in bytes).
cudaError_t launchEdgeColl(const EdgeArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);
cudaError_t launchEdgeBytes(const EdgeArgs &a, cudaStream_t stream);

// Enqueues one exchange (alltoall(v), gather(v), scatter(v) over bytes;
// a.s.lanes CTAs) on stream.
cudaError_t launchExchange(const ExchangeArgs &a, cudaStream_t stream);

// After an exchange whose direct copies are deferred (a.s.deferCopies) and
// those copies: the signals that follow them (exchange_schedule.h).
cudaError_t launchExchangeAfterCopies(const ExchangeArgs &a, cudaStream_t stream);

// Enqueues one scan or exclusive scan (a.s; a.s.channels CTAs) on stream,
// per (dtype, op).
cudaError_t launchScan(const ScanArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);

// Enqueues one one-shot LL collective (a.coll; a.nblocks CTAs) on stream:
// reductions per (dtype, op); allgather and broadcast over bytes.
cudaError_t launchOneShotColl(const OneShotArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);
cudaError_t launchOneShotBytes(const OneShotArgs &a, cudaStream_t stream);

// Launches the resident kernel (resident_args.h; `ctas` CTAs) on stream:
// its one-shot reductions per (dtype, op), moves with any instance.
struct ResidentLaunchArgs {
    ResidentLaunch r;
    int ctas;
};
cudaError_t launchResident(const ResidentLaunchArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);
cudaError_t launchResidentBytes(const ResidentLaunchArgs &a, cudaStream_t stream);

// Enqueues one zero-copy allreduce (a.ctas CTAs) on stream, per (dtype, op).
cudaError_t launchZeroCopyAllReduce(const ZeroCopyArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);

// MPI_Reduce_local on device memory: inout[i] = in[i] op inout[i] (local_reduce.cu).
struct LocalReduceArgs {
    const void *in;
    void *inout;
    size_t count;
};
cudaError_t launchLocalReduce(const LocalReduceArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream);

// Load every instance of each file's kernels without running them
// (device/kernel_load.h says why; core/comm/kernel_load.cc calls them).
cudaError_t loadRingKernels(KernelLoad *l);
cudaError_t loadEdgeKernels(KernelLoad *l);
cudaError_t loadExchangeKernels(KernelLoad *l);
cudaError_t loadScanKernels(KernelLoad *l);
cudaError_t loadOneShotKernels(KernelLoad *l);
cudaError_t loadResidentKernels(KernelLoad *l);
cudaError_t loadZeroCopyKernels(KernelLoad *l);
cudaError_t loadLocalReduceKernels(KernelLoad *l);

} // namespace loom
