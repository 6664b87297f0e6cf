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

loom_span_t loom_span_union(loom_span_t a, loom_span_t b)
{
    if (0 == a.bytes) return b;
    if (0 == b.bytes) return a;
    ptrdiff_t lo = a.lo < b.lo ? a.lo : b.lo;
    ptrdiff_t hi_a = a.lo + (ptrdiff_t)a.bytes, hi_b = b.lo + (ptrdiff_t)b.bytes;
    loom_span_t u = {lo, (size_t)((hi_a > hi_b ? hi_a : hi_b) - lo)};
    return u;
}

loom_span_t loom_span_of_v(const loom_type_shape_t *shape, const int *counts, const int *displs, int n)
{
    loom_span_t u = {0, 0};
    for (int r = 0; r < n; ++r) {
        if (counts[r] <= 0) continue;
        loom_span_t s = loom_span_of(shape, (size_t)counts[r]);
        s.lo += (ptrdiff_t)displs[r] * shape->extent;
        u = loom_span_union(u, s);
    }
    return u;
}
