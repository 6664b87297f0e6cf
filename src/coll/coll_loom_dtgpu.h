/*
 * A rank's packed copy of non-contiguous blocks for one call on loom's
 * kernels (coll_loom_pack.h says why the kernels move packed bytes), made
 * where the blocks are:
 *  - on the GPU, when the user's buffer is on the loom communicator's GPU
 *    and every block's datatype has a plan (coll_loom_dtplan.h): packed by
 *    loom's plan kernel into the communicator's packed buffer on loom's
 *    stream before the call's kernel, and unpacked from it right after,
 *    with no host copy and no wait (loomCommDtPack / loomCommDtUnpack);
 *  - else in host memory by Open MPI's convertor (coll_loom_pack.h), the
 *    host buffer then staged like any other. At coll_loom_verbose >= 1 a
 *    device buffer that goes this way says why.
 * An exchange (alltoall(v, w), gather(v), scatter(v), neighbourhood) needs
 * no packed copy on the GPU: its kernel reads and writes the blocks in
 * place through a view of them (mca_coll_loom_view_of, loomExchangeTyped).
 * Each rank chooses alone: the bytes the call moves are the same either way.
 */
#ifndef COLL_LOOM_DTGPU_H
#define COLL_LOOM_DTGPU_H

#include "coll_loom_pack.h"

/* A call's packed input: b's blocks at `at` (total bytes). *packed is the
 * communicator's packed input buffer (*host false) or a new host buffer
 * the caller frees once the call returned (*host true). */
int mca_coll_loom_pack_in(mca_coll_loom_module_t *m, int coll, const loom_typed_blocks_t *b, const size_t *at,
                          size_t total, char **packed, bool *host);

/* The unpacking of a packed output on the GPU (c->then): the caller's
 * storage, alive until mca_coll_loom_gpu_exec returns. */
typedef struct {
    mca_coll_loom_gpu_step_t super;
    const loom_typed_blocks_t *b;
    const size_t *at;
    const char *packed;
} loom_gpu_unpack_t;

/* A call's packed output of total bytes for b's blocks at `at`, into
 * *packed: with `prefill`, b's blocks packed into it first (in place: the
 * call's input lies inside it); with `unpack`, written back into b's
 * blocks once the call put its output there (a broadcast root's is not).
 * On the GPU the unpack goes on loom's stream after the launch (c->then =
 * &u->super); in host memory c->after does it, and frees the buffer, at
 * the output's completion (mca_coll_loom_unpack_after). */
int mca_coll_loom_pack_out(mca_coll_loom_module_t *m, loom_gpu_call_t *c, const loom_typed_blocks_t *b,
                           const size_t *at, size_t total, bool prefill, bool unpack, loom_gpu_unpack_t *u,
                           char **packed);

/* A call's side left in its datatypes' layout, for the exchange kernel to
 * read or write in place (loomExchangeTyped): b's blocks at `at` as a
 * view, its arrays owned here. */
typedef struct {
    loomDtView_t view;
    loomDtLayout_t *layouts;
    ompi_datatype_t **types;
    loomDtBlock_t *blocks;
} loom_dt_view_t;

/* True with *v the view of b's blocks at `at` where the GPU can pack them
 * (as mca_coll_loom_pack_in decides) and the communicator's packed buffer
 * `which` (0 input, 1 output) can hold their total bytes (loom packs into
 * it where the kernel does not read in place: LOOM_DT_FUSE, one-shot
 * calls); false: pack them as before (the host, where memory is short).
 * Free with mca_coll_loom_view_free (also after false). */
bool mca_coll_loom_view_of(mca_coll_loom_module_t *m, const loom_typed_blocks_t *b, const size_t *at, int which,
                           size_t total, loom_dt_view_t *v);
void mca_coll_loom_view_free(loom_dt_view_t *v);

#endif
