/*
 * One segment of a datatype plan (src/coll/coll_loom_dtplan.h): `count`
 * runs of `len` bytes, `stride` bytes apart, the first at `offset` from an
 * element's start, packed back to back from `packed`. Shared by the
 * component, which builds plans, and the kernels that run them (C and C++).
 */
#ifndef LOOM_BASE_DT_SEG_H
#define LOOM_BASE_DT_SEG_H

#include <stdint.h>

typedef struct loom_dt_seg_s {
    int64_t offset;
    int64_t stride;
    uint64_t len;
    uint64_t count;
    uint64_t packed;
} loom_dt_seg_t;

#endif
