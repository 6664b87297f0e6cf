// The GPU side of net_latency's third measurement: one kernel thread does
// what a ring kernel does per net step — writes the step into the send FIFO
// in mapped host memory, its size, a system fence, the tail; waits for the
// receive FIFO's tail, reads the step, returns the credit — ping-ponging with
// the other process through both proxies. One thread: beyond a few words
// it times dependent PCIe reads of the slot (~1 us each), which loom's
// kernels issue from many threads at once; use it for small steps.
#include <cstdint>

#include <cuda_runtime.h>

#include "fifo_pingpong.h"

namespace {

__device__ uint64_t globalNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void fifoPingPong(FifoPingPongArgs a) {
    uint64_t sum = 0;
    for (uint64_t s = 0; s < a.total; ++s) {
        if (s == a.warmup) a.times[0] = globalNs();
        for (int turn = 0; turn < 2; ++turn) {
            if ((turn == 0) == (a.first != 0)) { // send
                while (s - *a.outHead >= (uint64_t)a.nslots) {}
                // 8-byte words (a byte at a time over PCIe would time the loads).
                uint64_t *slot = (uint64_t *)(a.outSlots + (s % a.nslots) * a.slotBytes);
                for (size_t i = 0; i < (a.bytes + 7) / 8; ++i) slot[i] = s;
                a.outSizes[s % a.nslots] = a.bytes;
                __threadfence_system();
                *a.outTail = s + 1;
            } else { // receive
                while (*a.inTail <= s) {}
                __threadfence();
                const volatile uint64_t *slot = (const volatile uint64_t *)(a.inSlots + (s % a.nslots) * a.slotBytes);
                for (size_t i = 0; i < (a.bytes + 7) / 8; ++i) sum += slot[i];
                *a.inHead = s + 1;
            }
        }
    }
    a.times[1] = globalNs();
    a.times[2] = sum; // keeps the reads
}

} // namespace

cudaError_t launchFifoPingPong(const FifoPingPongArgs &a) {
    fifoPingPong<<<1, 1>>>(a);
    return cudaGetLastError();
}
