/*
 * Typed blocks as contiguous bytes, for loom's kernels (which move bytes).
 * A rank of a rooted collective knows only its own datatypes, so whether a
 * call runs on loom's kernels cannot depend on them (every rank must take the
 * same path). A rank whose blocks are not contiguous bytes therefore moves
 * them through a packed host copy: block q becomes bytes [at[q], at[q] +
 * bytes[q]) of the packed buffer, blocks back to back in rank order; the GPU
 * path stages that host buffer like any other. Slow but correct for every
 * datatype; contiguous types (the common case) keep the user's buffer.
 */
#ifndef COLL_LOOM_PACK_H
#define COLL_LOOM_PACK_H

#include "coll_loom.h"
#include "coll_loom_gpu.h"

/* n blocks in a user buffer: block q is counts[q] elements (counts[q] <= 0:
 * no block, and its type is not read) of datatype dt at displs[q] extents
 * from user; displs NULL: at q x stride extents (equal blocks: allgather,
 * alltoall, gather and scatter, whose offsets may pass INT_MAX). With dts
 * (alltoallw; dt NULL) block q has its own type dts[q], and displs[q] is in
 * bytes, as MPI_Alltoallw's are. With wdispls (the neighbourhood
 * collectives' blocks placed by rank: coll_loom_neighbor_map.h) block q is
 * at wdispls[q] bytes from user whatever its type, and displs is unset. */
typedef struct {
    void *user;
    ompi_datatype_t *dt;
    ompi_datatype_t *const *dts;
    int n;
    const int *counts;
    const int *displs;
    size_t stride;
    const MPI_Aint *wdispls;
} loom_typed_blocks_t;

/* Block q's displacement in extents of the one type dt (not with dts). */
static inline ptrdiff_t mca_coll_loom_block_displ(const loom_typed_blocks_t *b, int q)
{
    return NULL != b->displs ? (ptrdiff_t)b->displs[q] : (ptrdiff_t)((size_t)q * b->stride);
}

/* Block q's datatype. */
static inline ompi_datatype_t *mca_coll_loom_block_type(const loom_typed_blocks_t *b, int q)
{
    return NULL != b->dts ? b->dts[q] : b->dt;
}

/* Where block q starts, in bytes from user. */
static inline ptrdiff_t mca_coll_loom_block_offset(const loom_typed_blocks_t *b, int q)
{
    if (NULL != b->wdispls) return (ptrdiff_t)b->wdispls[q];
    if (NULL != b->dts) return (ptrdiff_t)b->displs[q];
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(b->dt, &lb, &extent);
    return mca_coll_loom_block_displ(b, q) * extent;
}

/* Takes (+1) or drops (-1) a reference on b's type, or with dts on the type
 * of every block with elements (the others are not read). */
void mca_coll_loom_hold_block_types(const loom_typed_blocks_t *b, int delta);

/* The blocks as bytes for the kernels, relative to *base: bytes[q] and at[q]
 * (n entries each). Contiguous types (with dts: every block's that has
 * bytes): *base is the user's buffer moved to the lowest block
 * (displacements may be negative), *packed false. Others: consecutive
 * offsets in a packed buffer (*base NULL until packed), *packed true.
 * Returns the bytes spanned from *base. */
size_t mca_coll_loom_byte_blocks(const loom_typed_blocks_t *b, size_t *bytes, size_t *at, void **base, bool *packed);

/* A new host buffer of `total` bytes with the blocks packed at `at` (user on
 * a GPU: read through a host copy of the blocks' span). */
int mca_coll_loom_pack(const loom_typed_blocks_t *b, const size_t *at, size_t total, char **packed);

/* Writes the packed blocks back into the user's buffer; bytes between the
 * blocks and inside the type's holes stay as they were. */
int mca_coll_loom_unpack(const loom_typed_blocks_t *b, const size_t *at, const char *packed);

/* c->after for a call whose output is the packed host buffer `packed`
 * (malloc'ed; taken): once the output is in place (in the call, or at a
 * non-blocking call's completion) its blocks are unpacked into b's (NULL: a
 * broadcast root's packed input, only freed) and it is freed. Keeps copies
 * of b's tables and at, and a reference on each datatype it will read (the
 * caller may free them before completion, the module's tables serve the
 * next call).
 * MPI_ERR_NO_MEM (packed freed) when there is no memory for that. */
int mca_coll_loom_unpack_after(loom_gpu_call_t *c, const loom_typed_blocks_t *b, const size_t *at, char *packed);

#endif
