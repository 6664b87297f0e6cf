/*
 * Tree allreduce: CTA t walks tree t of the double binary tree over its half
 * of the data, op by op as tree_schedule.h lists them (the schedule the CPU
 * simulation checks): children's chunks are reduced into the output buffer
 * and sent up, the result comes down from the parent into the output and
 * goes on to the children. Each op moves one chunk through one slot of an
 * edge's FIFO (ProtoSimple's bulk move, fence, tail flag; head credits).
 * log2(hosts) hops each way instead of the ring's 2(n-1): for small messages
 * across hosts, where every hop is a network round through the proxy.
 */
#include <cuda_runtime.h>

#include "device/collectives.h"
#include "device/dispatch.h"
#include "device/prims_simple.h"
#include "device/tree_args.h"
#include "device/wait.h"

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
    __shared__ bool waitFailed; // written by thread 0 before a barrier, read by all after it
    const TreeSide &side = a.tree[blockIdx.x];
    const TreeNode &node = side.node;
    size_t begin, end;
    treeHalf(a.count, sizeof(T), blockIdx.x, &begin, &end);
    const size_t n = end - begin;
    const T *in = (const T *)a.in + begin;
    T *out = (T *)a.out + begin;
    const size_t chunkElems = treeChunkElems(a.slotBytes, sizeof(T));
    const size_t nchunks = treeChunks(n, chunkElems);
    const size_t ops = treeOpCount(node, nchunks);
    // Every thread keeps the counters: they pick the slots.
    uint64_t sent[kTreeEdges], recvd[kTreeEdges];
    for (int e = 0; e < kTreeEdges; ++e) sent[e] = recvd[e] = side.edge[e].step;
    const Waiter wait{a.timeoutCycles};
    if (threadIdx.x == 0) waitFailed = false;
    __syncthreads();

    for (size_t i = 0; i < ops; ++i) {
        const TreeOp op = treeOp(node, nchunks, side.lag, i);
        const int e = edgeOf(node, op.peer);
        const bool recv = e >= 0 && (op.kind == kTreeRecvReduce || op.kind == kTreeRecvDown);
        const bool send = e >= 0 && (op.kind == kTreeSendUp || op.kind == kTreeSendDown);
        const TreeEdge &d = side.edge[e < 0 ? 0 : e];
        size_t off, len;
        treeChunk(n, chunkElems, op.chunk, &off, &len);
        if (threadIdx.x == 0 && (recv || send)) {
            bool ok = recv ? wait([&] { return *d.recvTail > recvd[e]; })
                           : wait([&] { return sent[e] - *d.sendHead < (uint64_t)a.nslots; });
            waitFailed = !ok;
            __threadfence(); // order the flag read before the data reads below
        }
        __syncthreads();
        if (waitFailed) break;
        const void *slotIn = recv ? d.recvSlots + (recvd[e] % a.nslots) * a.slotBytes : nullptr;
        void *slotOut = send ? d.sendSlots + (sent[e] % a.nslots) * a.slotBytes : nullptr;
        switch (op.kind) {
        case kTreeRecvReduce: // out = (first child ? in : out) + child's chunk
            ProtoSimple::move<T, Op>(a, slotIn, (op.first ? in : out) + off, nullptr, out + off, len, true, 0, 0, 0);
            break;
        case kTreeSendUp: // a leaf sends its input, others their partial sum
            ProtoSimple::move<T, Op>(a, nullptr, (treeSendsInput(node) ? in : out) + off, slotOut, nullptr, len,
                                     false, 0, 0, 0);
            break;
        case kTreeRecvDown:
            ProtoSimple::move<T, Op>(a, slotIn, out + off, nullptr, out + off, len, false, 0, 0, 0);
            break;
        case kTreeSendDown:
            ProtoSimple::move<T, Op>(a, nullptr, out + off, slotOut, nullptr, len, false, 0, 0, 0);
            break;
        default: // kTreeCopy: a tree of one rank
            ProtoSimple::move<T, Op>(a, nullptr, in + off, nullptr, out + off, len, false, 0, 0, 0);
        }
        if (send) ProtoSimple::fenceSend();
        __syncthreads();
        if (threadIdx.x == 0) {
            if (send) {
                if (d.sendSizes) { // the proxy sends stepBytes, which must land before the tail
                    stepBytesOf(d.peerRecvTail)[sent[e] % a.nslots] = len * sizeof(T);
                    __threadfence_system();
                }
                *d.peerRecvTail = sent[e] + 1;
            }
            if (recv) *d.peerSendHead = recvd[e] + 1;
        }
        if (send) ++sent[e];
        if (recv) ++recvd[e];
    }
    if (waitFailed && threadIdx.x == 0) *a.abortFlag = 1;
}

template <typename T, typename Op> struct TreeKernel {
    static cudaError_t launch(const TreeArgs &a, cudaStream_t stream) {
        treeAllreduceKernel<T, Op><<<2, a.nthreads, 0, stream>>>(a);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t launchTreeAllreduce(const TreeArgs &a, loomDataType_t dtype, loomRedOp_t op, cudaStream_t stream) {
    return dispatchTypeOp<TreeKernel>(dtype, op, a, stream);
}

} // namespace loom
