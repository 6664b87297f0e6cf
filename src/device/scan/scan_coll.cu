/*
 * The scan kernel (MPI_Scan, MPI_Exscan): one CTA per channel walks its
 * chunks of scan_schedule.h as Prims over one pair made of two halves of the
 * all-peer connections: the receive half from rank - 1 and the send half to
 * rank + 1 on the lane's channel. Compiled per (type, op), on the Simple
 * protocol (an interior rank of an exclusive scan stores the prefix it
 * received while it sends the reduced value: Prims' rawDst).
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/kernel_load.h"
#include "device/prims.h"
#include "device/prims_simple.h"

namespace loom {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) scanKernel(const __grid_constant__ ScanArgs a) {
    if (!callStarted(a.wait)) return;
    const ScanSched &s = a.s;
    const int lane = blockIdx.x, C = s.channels;
    ConnPair pair = {};
    ConnSteps steps = {0, 0};
    if (s.rank > 0) {
        pair.recv = a.conns[(s.rank - 1) * C + lane].recv;
        steps.recv = a.recvSteps[lane];
    }
    if (s.rank + 1 < s.nranks) {
        pair.send = a.conns[(s.rank + 1) * C + lane].send;
        steps.send = a.sendSteps[lane];
    }
    Prims<ProtoSimple, T, Op, 1> prims(&pair, &steps, a.nslots, a.slotBytes, a.wait, a.abortFlag);
    const T *in = (const T *)a.in;
    T *out = (T *)a.out;
    for (size_t j = 0, n = scanOpCount(s, lane); j < n; ++j) {
        EdgeOp o = scanOp(s, lane, j);
        o.send = o.send >= 0 ? 0 : -1;
        o.recv = o.recv >= 0 ? 0 : -1;
        if (!prims.run(o, in, out, nullptr)) {
            if (threadIdx.x == 0) { // the chain neighbours, for the host's message
                a.abortFlag[kAbortSendPeer] = s.rank + 1 < s.nranks ? s.rank + 2 : 0;
                a.abortFlag[kAbortRecvPeer] = s.rank > 0 ? s.rank : 0;
            }
            return;
        }
    }
}

template <typename T, typename Op> struct ScanKernel {
    static cudaError_t launch(const ScanArgs &a, cudaStream_t stream) {
        scanKernel<T, Op><<<a.s.channels, a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
    static cudaError_t load(KernelLoad *l) { return loadKernels(l, scanKernel<T, Op>); }
};

} // namespace

cudaError_t launchScan(const ScanArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<ScanKernel>(dtype, op, a, stream);
}

cudaError_t loadScanKernels(KernelLoad *l) { return loadTypeOps<ScanKernel>(l); }

} // namespace loom
