/*
 * Per-peer collectives onto loom's exchange kernel: alltoall(v, w),
 * gather(v) and scatter(v) all end as one exchange call over this rank's
 * typed send and receive blocks (one per peer). Whether a call goes there
 * depends only on what every rank knows alike (intracommunicator, pairs
 * connected for a non-blocking call, and for alltoall a zero count), never
 * on datatypes or displacements: MPI lets them
 * differ between ranks, so a rank whose datatype is not contiguous bytes
 * packs its blocks through host memory (coll_loom_pack.h) instead of taking
 * another path, and negative displacements are rebased.
 */
#ifndef COLL_LOOM_BLOCKS_H
#define COLL_LOOM_BLOCKS_H

#include "coll_loom_gpu.h"
#include "coll_loom_pack.h"

/* c for mca_coll_loom_gpu_takes: an exchange, off the GPU path on an
 * intercommunicator (and, non-blocking, before its pairs are connected:
 * mca_coll_loom_gpu_takes); the user's buffers (for the GPU choice only:
 * MPI_IN_PLACE and buffers not on a GPU count as none). */
void mca_coll_loom_exchange_call(loom_gpu_call_t *c, int coll, ompi_communicator_t *comm, ompi_request_t **req,
                                 const void *sbuf, bool s_gpu, void *rbuf, bool r_gpu);

/* Room for the caller's typed blocks of one exchange call at n peers (4n
 * ints: send counts and displacements, receive counts and displacements),
 * in the module's host tables with the byte tables exchange_blocks fills:
 * grown on a communicator's first exchange, kept until the module goes.
 * NULL: out of host memory. */
int *mca_coll_loom_exchange_ints(mca_coll_loom_module_t *m, int n);

/* Runs a call mca_coll_loom_gpu_takes took over snd and rcv (n blocks each:
 * the communicator's size): byte tables, packed copies where a type is not
 * contiguous, the run, the unpacking. Returns the MPI error code. */
int mca_coll_loom_exchange_blocks(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *snd,
                                  const loom_typed_blocks_t *rcv);

/* allgather(v): runs a call mca_coll_loom_gpu_takes took (c->kind
 * loomCollAllGather, ragged or not) over this rank's typed send
 * block (snd: one block; NULL in place) and receive blocks (rcv: n, in rank
 * order). MPI lets each rank's datatypes and allgatherv's displacements
 * differ as long as the type signatures match, so the caller decides on
 * byte counts alone, and here a rank whose blocks are not contiguous bytes
 * moves them through a packed host copy; so does one whose blocks are all
 * the same size but not at q x block (the kernels' equal-blocks path,
 * which every rank takes alike from the counts). Returns the MPI error code. */
int mca_coll_loom_gather_bytes(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *snd,
                               const loom_typed_blocks_t *rcv, int me);

#endif
