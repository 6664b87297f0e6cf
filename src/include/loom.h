/*
 * loom.h: loom's public C API.
 *
 * This is the boundary between loom's C++/CUDA core and its users (the Open MPI
 * coll component, or any program that wants loom without MPI). It is shaped like
 * NCCL's: every call returns a loomResult_t, communicators are opaque handles,
 * collectives are ordered on a CUDA stream. No C++ exception crosses it.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

typedef enum {
    loomSuccess = 0,
    loomUnhandledCudaError = 1, /* a CUDA call failed */
    loomSystemError = 2,        /* a system call or allocation failed */
    loomInternalError = 3,      /* a bug in loom */
    loomInvalidArgument = 4,    /* a bad pointer, count, type or op */
    loomInvalidUsage = 5,       /* a call that is not allowed in this state */
    loomRemoteError = 6,        /* a peer failed: stuck, timed out, or its connection broke */
    loomInProgress = 7,         /* non-blocking operation not finished */
    loomNotSupported = 8,       /* valid, but loom cannot do it (caller may fall back) */
    loomProcFailed = 9,         /* a peer's process is gone (MPI_ERR_PROC_FAILED) */
    loomNumResults = 10
} loomResult_t;

/* Where a buffer lives, as the CUDA driver sees it. Pinned host memory is host. */
typedef enum {
    loomMemoryHost = 0,
    loomMemoryDevice = 1,
    loomMemoryManaged = 2
} loomMemoryKind_t;

typedef struct {
    loomMemoryKind_t kind;
    int device; /* CUDA device ordinal for device/managed memory, -1 for host */
} loomPointerInfo_t;

loomResult_t loomGetVersion(int *version);
const char *loomGetErrorString(loomResult_t result);
/* The message of the last failure on the calling thread ("" if none). */
const char *loomGetLastError(void);

/* 1 if the CUDA driver (libcuda.so.1) could be loaded and initialised, else 0.
 * Never creates a CUDA context. */
int loomCudaDriverAvailable(void);
/* GPUs the driver sees (0 without a driver). Never creates a CUDA context. */
int loomCudaDeviceCount(void);
/* The calling thread's current CUDA device (cudaGetDevice), -1 without one. */
int loomCudaCurrentDevice(void);

/* Classify a pointer. Without a driver every pointer is host memory.
 * Never creates a CUDA context, so it is safe before the application has
 * chosen its GPU. */
loomResult_t loomPointerQuery(const void *ptr, loomPointerInfo_t *info);

/* Synchronous copy between any two memories (host, device, managed),
 * ordered after the application's work on the legacy default stream and on
 * the calling thread's default stream, and after nothing else. */
loomResult_t loomMemcpySync(void *dst, const void *src, size_t bytes);
/* The same copy ordered after nothing at all (a non-blocking stream of
 * loom's): for copies at a non-blocking call's completion, which must not
 * wait for the application's legacy-stream work (that work may wait for
 * loom's kernels, and those for other ranks), and whose buffers the
 * application may not touch until then anyway. */
loomResult_t loomMemcpyAside(void *dst, const void *src, size_t bytes);

/* ------------------------------------------------------------ communicators */

typedef enum {
    loomInt8 = 0, loomUint8 = 1, loomInt32 = 2, loomUint32 = 3, loomInt64 = 4, loomUint64 = 5,
    loomFloat16 = 6, loomFloat32 = 7, loomFloat64 = 8, loomBfloat16 = 9, loomInt16 = 10, loomUint16 = 11,
    /* complex: {float re, im}, {double re, im}; Sum and Prod only */
    loomFloatComplex = 12, loomDoubleComplex = 13,
    /* value-index pairs laid out as C structs {value; int index} (MPI_FLOAT_INT,
     * MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT); Minloc and Maxloc
     * only. Their size is the struct's, padding included (double/long: 16 B). */
    loomFloatInt = 14, loomDoubleInt = 15, loomLongInt = 16, loomIntInt = 17, loomShortInt = 18,
    loomNumTypes = 19
} loomDataType_t;

/* The bitwise (Band, Bor, Bxor) and logical (Land, Lor, Lxor: result 1 or 0)
 * ops take integer types only; Minloc/Maxloc the value-index pairs only (on
 * equal values the lower index wins, as MPI says). */
typedef enum {
    loomSum = 0, loomProd = 1, loomMax = 2, loomMin = 3, loomBand = 4, loomBor = 5, loomBxor = 6,
    loomLand = 7, loomLor = 8, loomLxor = 9, loomMinloc = 10, loomMaxloc = 11, loomNumOps = 12
} loomRedOp_t;

size_t loomTypeSize(loomDataType_t type); /* 0 for an unknown type */
/* 1 if loom reduces `type` with `op` on the GPU, else 0. */
int loomOpSupported(loomDataType_t type, loomRedOp_t op);

/* inout[i] = in[i] op inout[i] for count elements in GPU memory of one
 * device (MPI_Reduce_local), synchronously, ordered like loomMemcpySync. */
loomResult_t loomReduceLocal(const void *in, void *inout, size_t count, loomDataType_t type, loomRedOp_t op);

#define LOOM_UNIQUE_ID_BYTES 128
typedef struct { char internal[LOOM_UNIQUE_ID_BYTES]; } loomUniqueId;

/* Made by one rank, given to all (the component sends it with MPI_Bcast). */
loomResult_t loomGetUniqueId(loomUniqueId *id);

/* How the ranks of a new communicator exchange their connection data. The
 * component implements it with the MPI communicator's allgather; loom has no
 * bootstrap network of its own. allgather: every rank contributes `bytes` at
 * send, recv receives nranks * bytes in rank order. Returns 0 on success.
 * Kept (a copy of the struct) and used again, collectively, by the first
 * loomAllToAllV: ctx must stay valid for the communicator's life. */
typedef struct {
    void *ctx;
    int (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
    /* Optional (NULL: the exchanges never read a peer's buffer in place).
     * Inside an exchange call, pairwise: sends record i of `send` (records
     * of `bytes`, back to back) to rank to[i] for i < nsend and receives a
     * record from rank from[j] into record j of recv for j < nrecv. Both ends
     * of every pair call it in the same exchange (they know the pair from
     * the counts both pass). Returns 0 on success. */
    int (*pairwise)(void *ctx, int nsend, const int *to, const void *send, int nrecv, const int *from, void *recv,
                    size_t bytes);
} loomBootstrap_t;

typedef struct loomComm *loomComm_t;

/* Collective over the nranks ranks: creates loom's resources (FIFOs, IPC
 * mappings, stream) on CUDA device cudaDev (< 0: the calling thread's current one). loomNotSupported when some pair of
 * ring neighbours has no transport yet (the caller falls back). */
loomResult_t loomCommInitRank(loomComm_t *comm, int nranks, loomUniqueId id, int rank, int cudaDev,
                              const loomBootstrap_t *bootstrap);
loomResult_t loomCommDestroy(loomComm_t comm);
loomResult_t loomCommCount(loomComm_t comm, int *count);
loomResult_t loomCommUserRank(loomComm_t comm, int *rank);
loomResult_t loomCommDevice(loomComm_t comm, int *device); /* its CUDA device */
/* GPU memory of this communicator's ring FIFO region and of the buffers
 * grown for calls (scratch, in-place inputs, the edge accumulator; outgrown
 * ones included, freed with the communicator). Not counted: the all-peer
 * connections' region, block tables and the staged calls' pool. */
loomResult_t loomCommMemoryBytes(loomComm_t comm, size_t *bytes);

/* Stream-ordered, NCCL-shaped. stream == NULL: loom's own stream of comm.
 * The calls on one communicator must run on the GPU in the order they were
 * issued (loom's kernels pair each call's steps and flags with the same
 * call on the peers): pass one stream, or make a call on another stream
 * wait for the previous call's (an event) before issuing it. */
loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, cudaStream_t stream);

/* Rooted and gather-type collectives, NCCL-shaped. Counts are elements of
 * datatype. Broadcast: sendbuff is read at the root only, recvbuff written
 * everywhere (they may be equal). Reduce: recvbuff written at the root only.
 * AllGather: recvbuff holds nranks blocks of sendcount, in rank order
 * (sendbuff == recvbuff + rank * sendcount is in place). ReduceScatter:
 * sendbuff holds nranks blocks of recvcount; rank r gets the reduction of
 * block r (recvbuff == sendbuff is in place: the result lands at its start). */
loomResult_t loomBroadcast(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, cudaStream_t stream);
loomResult_t loomReduce(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        int root, loomComm_t comm, cudaStream_t stream);
loomResult_t loomAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, cudaStream_t stream);
loomResult_t loomReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, cudaStream_t stream);

/* Ragged blocks (MPI_Allgatherv, MPI_Reduce_scatter). Every rank passes the
 * same recvcounts (and displs); counts and displacements are elements.
 * AllGatherV: rank q's sendcount (== recvcounts[q]) elements land at
 * recvbuff + displs[q] (any order; blocks must not overlap); sendbuff ==
 * recvbuff + displs[rank] is in place. ReduceScatterV: sendbuff holds the
 * blocks back to back in rank order; rank r gets the reduction of block r;
 * recvbuff may overlap sendbuff (in place: the result at its start). */
loomResult_t loomAllGatherV(const void *sendbuff, size_t sendcount, void *recvbuff, const size_t *recvcounts,
                            const size_t *displs, loomDataType_t datatype, loomComm_t comm, cudaStream_t stream);
loomResult_t loomReduceScatterV(const void *sendbuff, void *recvbuff, const size_t *recvcounts,
                                loomDataType_t datatype, loomRedOp_t op, loomComm_t comm, cudaStream_t stream);

/* Per-peer exchanges: MPI_Alltoall(v), and MPI_Gather(v) / MPI_Scatter(v)
 * as exchanges where only the root's pairs carry data. Counts and
 * displacements are bytes, nranks entries each: this rank sends
 * sendcounts[q] bytes from sendbuff + sdispls[q] to rank q, and receives
 * recvcounts[q] bytes from q at recvbuff + rdispls[q]; both ends of a pair
 * pass the same size (as MPI requires). Receive blocks must not overlap;
 * the input may overlap the output (in place: loom copies it first). The
 * first call connects every pair of ranks, collectively, through the
 * bootstrap the communicator was made with, which must still work then. */
loomResult_t loomAllToAllV(const void *sendbuff, const size_t *sendcounts, const size_t *sdispls, void *recvbuff,
                           const size_t *recvcounts, const size_t *rdispls, loomComm_t comm, cudaStream_t stream);

/* Prefix reductions in rank order (MPI_Scan, MPI_Exscan): rank r gets op
 * over the inputs of ranks 0..r (Scan) or 0..r-1 (ExScan; rank 0's recvbuff
 * is left as it is and may be NULL), folded left to right. recvbuff may be
 * sendbuff (in place). Like the exchanges, the first call connects every
 * pair of ranks, collectively. */
loomResult_t loomScan(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                      loomComm_t comm, cudaStream_t stream);
loomResult_t loomExScan(const void *sendbuff, void *recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        loomComm_t comm, cudaStream_t stream);

/* Blocks until every operation enqueued on loom's own stream has finished;
 * loomRemoteError when a peer stopped answering (the comm is then unusable),
 * or when an exchange block a peer was to write into this rank's buffer
 * never came (it could not map the buffer; the comm stays usable). */
loomResult_t loomCommWait(loomComm_t comm);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_H */
