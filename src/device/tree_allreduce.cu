/*
 * Tree allreduce: CTA t walks tree t of the double binary tree over its half
 * of the data, op by op as tree_schedule.h lists them (the schedule the CPU
 * simulation checks): children's chunks are reduced into the output buffer
 * and sent up, the result comes down from the parent into the output and
 * goes on to the children. Each op moves one chunk through one slot of an
 * edge's FIFO (edge_step.h).
 * log2(hosts) hops each way instead of the ring's 2(n-1): for small messages
 * across hosts, where every hop is a network round through the proxy.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/edge_step.h"
#include "device/tree_args.h"

namespace loom {
namespace {

// The edge of `node` that leads to rank `peer` (-1: none, for kTreeCopy).
__device__ int edgeOf(const TreeNode &node, int peer) {
    if (peer < 0) return -1;
    if (peer == node.parent) return 0;
    for (int j = 0; j < node.nchildren; ++j)
        if (node.children[j] == peer) return 1 + j;
    return -1;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxRingThreads) treeAllreduceKernel(TreeArgs a) {
    __shared__ bool failed; // edgeStep's: thread 0 writes it before a barrier, all read it after
    const TreeSide &side = a.tree[blockIdx.x];
    const TreeNode &node = side.node;
    size_t begin, end;
    treeHalf(a.c.count, sizeof(T), blockIdx.x, &begin, &end);
    const size_t n = end - begin;
    const T *in = (const T *)a.c.in + begin;
    T *out = (T *)a.c.out + begin;
    const size_t chunkElems = treeChunkElems(a.c.slotBytes, sizeof(T));
    const size_t nchunks = treeChunks(n, chunkElems);
    const size_t ops = treeOpCount(node, nchunks);
    EdgeCounters k[kTreeEdges];
    for (int e = 0; e < kTreeEdges; ++e) k[e].sent = k[e].recvd = side.edge[e].step;
    const Waiter wait{a.c.timeoutCycles};
    if (threadIdx.x == 0) failed = false;
    __syncthreads();

    bool ok = true;
    for (size_t i = 0; i < ops && ok; ++i) {
        const TreeOp op = treeOp(node, nchunks, side.lag, i);
        const int e = edgeOf(node, op.peer);
        size_t off, len;
        treeChunk(n, chunkElems, op.chunk, &off, &len);
        auto step = [&](bool send, const T *src, T *dst, bool reduce) {
            return edgeStep<T, Op>(side.edge[e], k[e], send, src, dst, len, reduce, a.c.nslots, a.c.slotBytes, wait,
                                   &failed);
        };
        switch (op.kind) {
        case kTreeRecvReduce: // out = (first child ? in : out) + child's chunk
            ok = step(false, (op.first ? in : out) + off, out + off, true);
            break;
        case kTreeSendUp: // a leaf sends its input, others their partial sum
            ok = step(true, (treeSendsInput(node) ? in : out) + off, nullptr, false);
            break;
        case kTreeRecvDown:
            ok = step(false, out + off, out + off, false);
            break;
        case kTreeSendDown:
            ok = step(true, out + off, nullptr, false);
            break;
        default: // kTreeCopy: a tree of one rank
            ProtoSimple::move<T, Op>(0, nullptr, in + off, nullptr, out + off, len, false, 0, 0, 0);
        }
    }
    if (!ok && threadIdx.x == 0) *a.c.abortFlag = 1;
}

template <typename T, typename Op> struct TreeKernel {
    static cudaError_t launch(const TreeArgs &a, cudaStream_t stream) {
        treeAllreduceKernel<T, Op><<<2, a.c.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchTreeAllreduce(const TreeArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<TreeKernel>(dtype, op, a, stream);
}

} // namespace loom
