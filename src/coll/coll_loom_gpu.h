/*
 * loom's GPU path inside the component: which calls it takes, the lazy
 * creation of the loom communicator over MPI, and one helper that runs any
 * collective there (thin per-collective mappers fill a loom_gpu_call_t).
 *
 * Every rank of a call must take the same path, also when some ranks pass
 * host buffers and others device buffers (MPI allows it). So the choice never
 * depends on where this rank's buffers are, only on what every rank knows
 * alike:
 *  - the communicator's state: whether every rank's process sees a GPU (probed
 *    once, at the communicator's first collective, which every rank calls),
 *    and whether the loom communicator exists (created collectively);
 *  - the call's arguments: collective, datatype, op, counts, root.
 * While the loom communicator does not exist yet, an eligible call on a
 * communicator whose every process sees a GPU costs one small host allreduce
 * (does any rank have device buffers?); when one does, all ranks create it.
 * From then on eligible calls run on loom's kernels on every rank with no
 * agreement: a rank whose buffers are in host memory (or on another GPU) runs
 * through a device scratch buffer of the loom communicator. Calls that are
 * not eligible are staged on ranks with device buffers and delegated on the
 * others: both call the previous module with the same arguments.
 */
#ifndef COLL_LOOM_GPU_H
#define COLL_LOOM_GPU_H

#include "coll_loom.h"
#include "coll_loom_setup.h"
#include "base/coll.h"
#include "loom.h"
#include "loom_component.h"

/* Work that follows a call's output (a packed receive unpacked into the
 * user's blocks, the packed copy freed): run exactly once, ok false when the
 * call failed (then it only frees). mca_coll_loom_gpu_exec owns it from the
 * call on: it runs it before returning where the call finishes there, else
 * the call's request runs it when the operation completes (in progress,
 * before the request completes, whose error it may set). Returns the MPI
 * error code of its own work. */
typedef struct mca_coll_loom_after_s mca_coll_loom_after_t;
struct mca_coll_loom_after_s {
    int (*run)(mca_coll_loom_after_t *self, bool ok);
};

/* Work a call puts on loom's stream right after its launch, before its
 * mark (a packed output unpacked on the GPU: coll_loom_dtgpu.h). Runs once,
 * under the module's call lock, only after a launch that succeeded; the
 * struct lives until mca_coll_loom_gpu_exec returns. */
typedef struct mca_coll_loom_gpu_step_s mca_coll_loom_gpu_step_t;
struct mca_coll_loom_gpu_step_s {
    loomResult_t (*run)(mca_coll_loom_gpu_step_t *self, loomComm_t lcomm);
};

/* One call as the GPU path sees it, filled by a collective's mapper. */
typedef struct {
    int coll;            /* LOOM_COLL_*, for reports */
    loomColl kind;       /* loom's collective (base/coll.h) */
    bool ragged;         /* allgather, reduce_scatter: per-rank counts (allgatherv: bytes at displs;
                          * reduce_scatterv: elements); alltoall always is (per peer: send_counts /
                          * send_displs, counts / displs for what it receives, in bytes) */
    const void *in;      /* this rank's input (MPI_IN_PLACE resolved); may lie inside out */
    void *out;           /* this rank's output */
    size_t in_bytes;     /* bytes read from in (0: none) */
    size_t out_bytes;    /* bytes written to out (0: none) */
    size_t count;        /* loom's count: elements (per block for allgather / reduce_scatter) */
    loomDataType_t dt;
    loomRedOp_t op;
    int root;
    const size_t *counts; /* ragged calls: per rank (the same on every rank; alltoallv: what this rank receives) */
    const size_t *displs;
    const size_t *send_counts; /* alltoallv: what this rank sends each peer */
    const size_t *send_displs;
    size_t agreed_block; /* alltoall, gather, scatter: their block's bytes, alike on every rank (0: v-forms) */
    int fan_in;          /* gather(v): one rank receives from all (alike on every rank) */
    const loomDtView_t *send_view; /* alltoall: NULL, or in's blocks left in their datatypes' layout (in is */
    const loomDtView_t *recv_view; /* the user's buffer; coll_loom_dtgpu.h); recv_view likewise for out */
    const char *why_not; /* NULL: eligible; else why the call stays off the GPU (same on every rank) */
    mca_coll_loom_after_t *after; /* NULL, or what follows the output (above): exec takes it */
    mca_coll_loom_gpu_step_t *then; /* NULL, or what goes on loom's stream after the launch (above) */
    ompi_request_t **req; /* non-blocking: the request to return (coll_loom_request.h); NULL: blocking */
    bool located;         /* in_info / out_info hold where in and out are (queried by the caller in this
                           * call: a driver query is not free, test/perf/flag_latency) */
    loomPointerInfo_t in_info, out_info;
} loom_gpu_call_t;

/* MPI datatype -> loom type: predefined types and contiguous derived types of
 * one predefined type. NULL on success, else why not. */
const char *mca_coll_loom_map_type(ompi_datatype_t *dt, int count, loomDataType_t *out);
/* A reduction's datatype and op as loom's: the predefined type (or
 * value-index pair) its elements are made of, *per of them in each element
 * of dt (MPI reduces a derived type element by element), and *as_is
 * whether the kernels can read a buffer of dt as it is (contiguous, or a
 * pair with its padding); else its elements must be packed. NULL on
 * success, else why not (alike on every rank: the type signature decides). */
const char *mca_coll_loom_map_type_op(ompi_datatype_t *dt, struct ompi_op_t *op, loomDataType_t *ldt,
                                      loomRedOp_t *lop, size_t *per, bool *as_is);

/* Why a call on an intercommunicator stays off loom's kernels (a mapper that
 * would read per-rank arrays of the wrong length sets it as its why_not). */
extern const char mca_coll_loom_why_intercomm[];

/* Runs c on loom's kernels when the call is eligible and the communicator
 * takes the GPU path (see above); local_gpu: some buffer of this rank is on a
 * GPU. Returns true and sets *rc when it took the call; false when the caller
 * must stage (device buffers) or delegate (host buffers). */
bool mca_coll_loom_gpu_run(mca_coll_loom_module_t *m, loom_gpu_call_t *c, bool local_gpu, int *rc);
/* Its two halves, for mappers that prepare buffers only once the call is
 * loom's (packed copies of non-contiguous types). takes: false when the
 * caller must stage or delegate; true when the call is loom's, *rc then is
 * MPI_SUCCESS (run it: exec) or the error to return. takes reads c's buffers
 * only to choose the GPU of a communicator it creates; exec runs c as it is
 * then and returns the MPI error code (and takes c->after, run or handed to
 * the request, also when it fails). */
bool mca_coll_loom_gpu_takes(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, bool local_gpu, int *rc);
int mca_coll_loom_gpu_exec(mca_coll_loom_module_t *m, const loom_gpu_call_t *c);
/* Runs after (NULL: nothing) for a call that ended with rc; the call's error
 * stays the one returned, else after's. */
int mca_coll_loom_after_run(mca_coll_loom_after_t *after, int rc);

#endif
