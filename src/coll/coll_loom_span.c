#include "coll_loom_span.h"

loom_span_t loom_span_of(const loom_type_shape_t *shape, size_t count)
{
    loom_span_t s = {0, 0};
    if (0 == count || 0 == shape->true_extent) return s;
    /* A negative extent walks the elements downwards. */
    ptrdiff_t last = (ptrdiff_t)(count - 1) * shape->extent;
    ptrdiff_t lo = shape->true_lb + (last < 0 ? last : 0);
    ptrdiff_t hi = shape->true_lb + shape->true_extent + (last > 0 ? last : 0);
    s.lo = lo;
    s.bytes = (size_t)(hi - lo);
    return s;
}

loom_span_t loom_span_of_v(const loom_type_shape_t *shape, const int *counts, const int *displs, int n)
{
    loom_span_t u = {0, 0};
    ptrdiff_t hi = 0;
    for (int r = 0; r < n; ++r) {
        if (counts[r] <= 0) continue;
        loom_span_t s = loom_span_of(shape, (size_t)counts[r]);
        if (0 == s.bytes) continue;
        ptrdiff_t lo_r = (ptrdiff_t)displs[r] * shape->extent + s.lo;
        ptrdiff_t hi_r = lo_r + (ptrdiff_t)s.bytes;
        if (0 == u.bytes) {
            u.lo = lo_r;
            hi = hi_r;
        } else {
            if (lo_r < u.lo) u.lo = lo_r;
            if (hi_r > hi) hi = hi_r;
        }
        u.bytes = (size_t)(hi - u.lo);
    }
    return u;
}
