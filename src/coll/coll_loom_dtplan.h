/*
 * A datatype's layout as a plan of strided runs: the first part of packing
 * and unpacking non-contiguous types where the data is (the GPU's kernels
 * will run the same plan that the CPU executor here runs and that the
 * tests check against MPI_Pack / MPI_Unpack).
 *
 * The plan of one element of a datatype lists the contiguous runs of bytes
 * its type map names, in type-map order (the order MPI_Pack packs them),
 * merged into segments: `count` runs of `len` bytes, `stride` bytes apart,
 * the first at `offset` from the element's start (negative where the type
 * map reaches below it), packed back to back from `packed`; element k of a
 * call starts k x `extent` from the buffer pointer and packs at k x
 * `bytes`. A vector,
 * a 2-D subarray or a resized row of them is one segment; each face of a
 * 3-D subarray one; an indexed type one per block that breaks the stride.
 * The runs come from Open MPI's own description of the type
 * (opal_convertor_raw), so every constructor, nesting, hole, negative lower
 * bound and resized extent is the library's, not a reimplementation.
 */
#ifndef COLL_LOOM_DTPLAN_H
#define COLL_LOOM_DTPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "coll_loom.h"
#include "base/dt_seg.h" /* loom_dt_seg_t: one segment, shared with the kernels */

BEGIN_C_DECLS


typedef struct {
    loom_dt_seg_t *segs;
    size_t nsegs;
    size_t bytes;        /* packed bytes of one element: the type's size */
    int64_t extent;      /* from one element to the next */
    int64_t lo, hi;      /* the bytes one element touches: [lo, hi) from its start */
} loom_dt_plan_t;

/* The plan of one element of dt (*plan zeroed first; free it with
 * mca_coll_loom_dt_plan_free). MPI_SUCCESS, MPI_ERR_NO_MEM, or
 * MPI_ERR_INTERN where the library's description does not add up to the
 * type's size (said with the type's name). */
int mca_coll_loom_dt_plan(ompi_datatype_t *dt, loom_dt_plan_t *plan);
void mca_coll_loom_dt_plan_free(loom_dt_plan_t *plan);

/* dt's plan, made on first use and kept with the datatype (an attribute
 * whose delete callback frees it when the type is freed, so a new type at
 * the same address never finds an old plan; MPI_Type_dup does not copy
 * it). NULL with *rc set where none can be had. Thread-safe as MPI's
 * attribute calls are. */
const loom_dt_plan_t *mca_coll_loom_dt_plan_of(ompi_datatype_t *dt, int *rc);
/* Plans kept with datatypes now (for tests). */
long mca_coll_loom_dt_plans_kept(void);

/* The CPU executors of a plan over count elements (host memory): user ->
 * packed, packed -> user (bytes between runs untouched). */
void mca_coll_loom_dt_pack_cpu(const loom_dt_plan_t *plan, size_t count, const void *user, void *packed);
void mca_coll_loom_dt_unpack_cpu(const loom_dt_plan_t *plan, size_t count, const void *packed, void *user);

END_C_DECLS

#endif
