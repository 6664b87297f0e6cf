/*
 * loom's GPU path inside the component: MPI (datatype, op) -> loom, agreement
 * of all ranks, lazy creation of the loom communicator over MPI, the call.
 */
#ifndef COLL_LOOM_GPU_H
#define COLL_LOOM_GPU_H

#include "coll_loom.h"
#include "loom.h"

/* Runs a blocking allreduce on loom's kernels when every rank can. Returns
 * true and sets *rc when it took the call; false when the caller must stage. */
bool mca_coll_loom_gpu_allreduce(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                                 ompi_communicator_t *comm, mca_coll_loom_module_t *m,
                                 const loomPointerInfo_t *sinfo, const loomPointerInfo_t *rinfo, int *rc);

/* Releases the loom communicator of a module (module destructor). */
void mca_coll_loom_gpu_release(mca_coll_loom_module_t *m);

#endif
