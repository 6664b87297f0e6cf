/*
 * Byte spans of MPI buffers: which bytes, relative to the buffer pointer, a
 * (datatype, count) or a (datatype, counts[], displs[]) touches. Staging copies
 * exactly that span, so holes in non-contiguous types and gaps between the
 * blocks of v-collectives survive a round trip untouched.
 *
 * Pure arithmetic on (lb, extent, true_lb, true_extent): unit-tested without MPI.
 */
#ifndef COLL_LOOM_SPAN_H
#define COLL_LOOM_SPAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    ptrdiff_t extent;      /* MPI extent: stride between consecutive elements */
    ptrdiff_t true_lb;     /* first byte of one element's data */
    ptrdiff_t true_extent; /* bytes from the first to the last byte of data */
} loom_type_shape_t;

typedef struct {
    ptrdiff_t lo;  /* first byte, relative to the buffer pointer (may be < 0) */
    size_t bytes;  /* 0: nothing is touched */
} loom_span_t;

/* count elements starting at the buffer pointer. */
loom_span_t loom_span_of(const loom_type_shape_t *shape, size_t count);

/* The smallest span covering a and b (an empty span covers nothing). */
loom_span_t loom_span_union(loom_span_t a, loom_span_t b);

/* Element i of rank r sits at displs[r] + i (in extents); n ranks. */
loom_span_t loom_span_of_v(const loom_type_shape_t *shape, const int *counts, const int *displs, int n);

#endif
