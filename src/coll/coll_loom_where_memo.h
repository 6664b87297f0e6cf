/*
 * Where a call's buffers are, asked of the CUDA driver once per pointer and
 * call (mca_coll_loom_where, coll_loom_stage.h). A call's routing and its GPU
 * path ask of the same buffers, two to four times a call (what a query costs:
 * test/perf/call_costs, docs/performance.md).
 *
 * Invariants: an answer is kept only between the outermost enter and its
 * leave (the component's entry point, around one call's routing and start;
 * calls started inside it, kept non-blocking calls pumped there, share it);
 * outside a call nothing is kept, and every ask goes to the driver. An
 * application cannot free or remap a buffer inside its own call, so an
 * answer holds until the call returns; a later call may find other memory
 * at the same address, and asks again. Past LOOM_WHERE_MEMO pointers the
 * driver is asked each time (answers stay right, only dearer).
 * test/unit/test_where_memo.cc runs these rules against a driver whose
 * answers change between calls.
 */
#ifndef COLL_LOOM_WHERE_MEMO_H
#define COLL_LOOM_WHERE_MEMO_H

#include "loom.h"

#define LOOM_WHERE_MEMO 4

typedef struct {
    int depth; /* enters not yet left */
    int n;
    const void *ptr[LOOM_WHERE_MEMO];
    loomPointerInfo_t info[LOOM_WHERE_MEMO];
} loom_where_memo_t;

typedef loomResult_t (*loom_pointer_query_fn)(const void *ptr, loomPointerInfo_t *info);

static inline void loom_where_memo_enter(loom_where_memo_t *m)
{
    ++m->depth;
}

static inline void loom_where_memo_leave(loom_where_memo_t *m)
{
    if (0 == --m->depth) m->n = 0;
}

/* ptr's memory (host when NULL or when the driver cannot say). */
static inline loomPointerInfo_t loom_where_memo_ask(loom_where_memo_t *m, const void *ptr, loom_pointer_query_fn query)
{
    loomPointerInfo_t info = {loomMemoryHost, -1};
    if (NULL == ptr) return info;
    const int kept = m->depth > 0;
    for (int i = 0; kept && i < m->n; ++i)
        if (m->ptr[i] == ptr) return m->info[i];
    if (loomSuccess != query(ptr, &info)) {
        info.kind = loomMemoryHost;
        info.device = -1;
    }
    if (kept && m->n < LOOM_WHERE_MEMO) {
        m->ptr[m->n] = ptr;
        m->info[m->n++] = info;
    }
    return info;
}

#endif
