/*
 * What the Open MPI component (src/coll) needs of loom's core beyond the user
 * API of loom.h: the exchange with bounds every rank knows alike, the
 * scratch buffer and staging for ranks whose buffers the kernels cannot use,
 * marks and tests for calls that must not block, and the all-peer
 * connections. Not installed: it changes with the component.
 */
#ifndef LOOM_COMPONENT_H
#define LOOM_COMPONENT_H

#include "loom.h"
#include "base/dt_seg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* loomAllToAllV with what every rank of the call knows alike:
 * `agreedBlock`, a bound on every block (MPI_Alltoall's, MPI_Gather's or
 * MPI_Scatter's block bytes; 0: none known alike): small calls with such a
 * bound may take the one-shot path, which every rank must take together;
 * `fanIn`, nonzero for a gather (MPI_Gather(v): one rank receives from every
 * other): LOOM_EXCHANGE_DIRECT_PUSH may then have the root's peers copy their
 * large blocks into its buffer instead of the root copying them all. */
loomResult_t loomExchange(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls, void *recvbuff,
                          const size_t *recvcounts, const size_t *rdispls, size_t agreedBlock, int fanIn,
                          loomComm_t comm, cudaStream_t stream);

/* A device buffer of at least `bytes` on the communicator's GPU, owned by the
 * communicator (grown on demand, freed with it; valid until the next call
 * that asks for more). Used to run ranks whose buffers are elsewhere (host
 * memory, another GPU) on the communicator's kernels. */
loomResult_t loomCommScratch(loomComm_t comm, size_t bytes, void **ptr);

/* Copies between a buffer the kernels cannot use (host memory, another
 * GPU's) and the communicator's scratch buffer, on loom's stream (small
 * host ones through a pinned bounce buffer), finished when they return. */
loomResult_t loomCommStageIn(loomComm_t comm, void *scratch, const void *src, size_t bytes);
loomResult_t loomCommStageOut(loomComm_t comm, void *dst, const void *scratch, size_t bytes);

/* The same for a call that must not block (MPI's non-blocking collectives;
 * core/stage/stage_async.cc): loomStagedCreate gives the call a device buffer of
 * its own (*staged = NULL where none can be had: stage inside the call as
 * above); loomStagedIn copies into it, finished on return, without waiting
 * for loom's stream; loomStagedOut records a copy back to the caller's
 * buffer; loomStagedFinish, once the call's mark (loomCommMark) has passed,
 * runs the recorded copies (copyOut = 0: none, the call failed: the buffer
 * is then freed with the communicator) and frees the buffer and *staged. Calls on one communicator are not made
 * concurrently with each other or with loomCommStageIn/Out. */
typedef struct loomStaged *loomStaged_t;
loomResult_t loomStagedCreate(loomComm_t comm, size_t bytes, void **buffer, loomStaged_t *staged);
loomResult_t loomStagedIn(loomStaged_t staged, void *dst, const void *src, size_t bytes);
loomResult_t loomStagedOut(loomStaged_t staged, void *dst, const void *src, size_t bytes);
loomResult_t loomStagedFinish(loomStaged_t staged, int copyOut);

/* Non-contiguous MPI datatypes packed and unpacked on the GPU (the
 * component's plans, src/coll/coll_loom_dtplan.h; core/stage/stage_datatype.cc).
 * loomCommPackedBuffer: a device buffer of at least `bytes` on the
 * communicator's GPU for a call's packed input (which 0) or output (1),
 * owned by the communicator and reused by the next call that asks: the
 * call's work on loom's stream is ordered before the next call's.
 * loomCommDtPack / loomCommDtUnpack: count elements of the layout between
 * `user` (this GPU's memory) and `packed`, on loom's stream, after the
 * application's legacy-stream work and any call still pending (as a
 * collective's own kernel), not waited for: enqueue the pack before the
 * call that reads `packed` and the unpack right after the one that writes
 * it. Holes between the runs are never written. */
typedef struct {
    const loom_dt_seg_t *segs;
    int nsegs;
    int64_t extent;
    uint64_t bytes;
} loomDtLayout_t;
loomResult_t loomCommPackedBuffer(loomComm_t comm, int which, size_t bytes, void **ptr);
loomResult_t loomCommDtPack(loomComm_t comm, const loomDtLayout_t *layout, size_t count, const void *user, void *packed);
loomResult_t loomCommDtUnpack(loomComm_t comm, const loomDtLayout_t *layout, size_t count, const void *packed,
                              void *user);
/* loomCommDtPackBlocks / loomCommDtUnpackBlocks: the same for a call's
 * typed blocks in one kernel (an alltoallw's, of a type each): block k is
 * blocks[k].count elements of layouts[blocks[k].layout] at user +
 * blocks[k].user and packed + blocks[k].packed. Blocks must come in packed
 * order without overlapping there (loomInvalidArgument otherwise). */
typedef struct {
    int layout;
    uint64_t count;
    int64_t user;
    uint64_t packed;
} loomDtBlock_t;
loomResult_t loomCommDtPackBlocks(loomComm_t comm, const loomDtLayout_t *layouts, int nlayouts,
                                  const loomDtBlock_t *blocks, int nblocks, const void *user, void *packed);
loomResult_t loomCommDtUnpackBlocks(loomComm_t comm, const loomDtLayout_t *layouts, int nlayouts,
                                    const loomDtBlock_t *blocks, int nblocks, const void *packed, void *user);
/* loomExchangeTyped: loomExchange (on loom's stream) where a side whose
 * view is not NULL stays in its datatypes' layout: the tables count packed
 * bytes, and the view's blocks say where the packed bytes of each are in
 * the user's buffer (their packed offsets: the displacements). On the
 * exchange kernel the blocks are read and written in place (no packed copy;
 * such a side's pairs go through the FIFO); calls that go one-shot, or on a
 * communicator of one, are packed and unpacked around the exchange. Not for
 * MPI's in place. */
typedef struct {
    const loomDtLayout_t *layouts;
    int nlayouts;
    const loomDtBlock_t *blocks;
    int nblocks;
} loomDtView_t;
loomResult_t loomExchangeTyped(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls,
                               const loomDtView_t *sendView, void *recvbuff, const size_t *recvcounts,
                               const size_t *rdispls, const loomDtView_t *recvView, size_t agreedBlock, int fanIn,
                               loomComm_t comm);

/* For callers that must not block (MPI's non-blocking collectives).
 * loomCommSetHostWait(comm, 0): the calls that follow never wait on the host
 * for other ranks (the zero-copy allreduce and the exchanges' in-place
 * pairs, whose per-call buffer descriptions are a host rendezvous, are
 * skipped; a communicator's first exchange or scan still connects every
 * pair collectively); 1 (the default) allows it again. Every rank of a call
 * must pass the same setting.
 * loomCommMark: a mark on loom's stream after every operation enqueued so
 * far, named by *ticket (1, 2, ...). loomCommTest: *done = 1 once the stream
 * got past the mark (then with loomCommWait's errors for what ran before
 * it), else *done = 0 at once. Marks finish in ticket order. */
loomResult_t loomCommSetHostWait(loomComm_t comm, int allowed);
loomResult_t loomCommMark(loomComm_t comm, uint64_t *ticket);
loomResult_t loomCommTest(loomComm_t comm, uint64_t ticket, int *done);
/* *connected = 1 once the communicator's first exchange or scan connected
 * every pair (the same answer on every rank); until then those calls would
 * connect them collectively, on the host. */
loomResult_t loomCommPeersConnected(loomComm_t comm, int *connected);
/* With LOOM_PROFILE=1: CLOCK_MONOTONIC ns at which this thread's latest
 * one-shot call reached the GPU (its launch returned, or its mailbox line
 * went to the resident kernel); 0 before any (core/stream/posted_clock.h). */
uint64_t loomPostedNs(void);
/* The same clock at step `step` (0..3) of this thread's latest call before
 * its post: its checks began, they ended, its algorithm was chosen, the
 * resident kernel's eligibility was asked (core/stream/posted_clock.h); 0
 * before any. */
uint64_t loomPostStepNs(int step);
/* Collective: connects every pair of ranks now (what the first exchange or
 * scan does otherwise), through the bootstrap's allgather; every phase is
 * agreed, so all ranks succeed or fail alike. loomNotSupported where the
 * communicator has no all-peer connections. Nothing else may run on comm
 * meanwhile (the caller's stream work may still be in flight). */
loomResult_t loomCommConnectPeers(loomComm_t comm);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_COMPONENT_H */
