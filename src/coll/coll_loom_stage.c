#include "coll_loom_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "loom.h"
#include "coll_loom_where_memo.h"
#include "opal/util/output.h"
#include "ompi/datatype/ompi_datatype.h"

static __thread loom_where_memo_t where_memo;

void mca_coll_loom_where_enter(void)
{
    loom_where_memo_enter(&where_memo);
}

void mca_coll_loom_where_leave(void)
{
    loom_where_memo_leave(&where_memo);
}

loomPointerInfo_t mca_coll_loom_where(const void *ptr)
{
    if (MPI_IN_PLACE == ptr) return (loomPointerInfo_t){loomMemoryHost, -1};
    return loom_where_memo_ask(&where_memo, ptr, loomPointerQuery);
}

bool mca_coll_loom_locate(const void *ptr, loomPointerInfo_t *info)
{
    *info = mca_coll_loom_where(ptr);
    if (NULL == ptr || MPI_IN_PLACE == ptr) return false;
    return OPAL_UNLIKELY(mca_coll_loom_component.stage_host_buffers) || loomMemoryHost != info->kind;
}

bool mca_coll_loom_on_gpu(const void *ptr)
{
    loomPointerInfo_t info;
    return mca_coll_loom_locate(ptr, &info);
}

bool mca_coll_loom_span_on_gpu(const void *ptr, loom_span_t span)
{
    if (NULL == ptr || MPI_IN_PLACE == ptr || 0 == span.bytes) return mca_coll_loom_on_gpu(ptr);
    return mca_coll_loom_on_gpu((const char *)ptr + span.lo);
}

bool mca_coll_loom_v_on_gpu(const void *ptr, ompi_datatype_t *dtype, const int *counts, const int *displs, int n)
{
    if (NULL == ptr || MPI_IN_PLACE == ptr) return false;
    loom_type_shape_t sh = mca_coll_loom_shape(dtype);
    return mca_coll_loom_span_on_gpu(ptr, loom_span_of_v(&sh, counts, displs, n));
}

loom_type_shape_t mca_coll_loom_shape(ompi_datatype_t *dtype)
{
    loom_type_shape_t s;
    ptrdiff_t lb;
    ompi_datatype_get_extent(dtype, &lb, &s.extent);
    ompi_datatype_get_true_extent(dtype, &s.true_lb, &s.true_extent);
    return s;
}

bool mca_coll_loom_contiguous(ompi_datatype_t *dtype, int count)
{
    ptrdiff_t true_lb, true_extent;
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    return 0 == true_lb && opal_datatype_is_contiguous_memory_layout(&dtype->super, count);
}

loom_span_t mca_coll_loom_span_w(const int *counts, const int *displs, const MPI_Aint *adispls,
                                 ompi_datatype_t *const *types, int n)
{
    loom_span_t u = {0, 0};
    for (int q = 0; q < n; ++q) {
        if (counts[q] <= 0) continue;
        loom_type_shape_t sh = mca_coll_loom_shape(types[q]);
        loom_span_t s = loom_span_of(&sh, (size_t)counts[q]);
        s.lo += NULL != adispls ? (ptrdiff_t)adispls[q] : (ptrdiff_t)displs[q];
        u = loom_span_union(u, s);
    }
    return u;
}

static int copy_error(const char *what, size_t bytes)
{
    opal_output(mca_coll_loom_component.output, "coll/loom: staging %s of %zu bytes failed: %s", what, bytes,
                loomGetLastError());
    return MPI_ERR_BUFFER;
}

/* Testing aid (stage_host_buffers): a buffer whose span came out empty is
 * handed on as a page nobody may touch, so that a span computed too small
 * crashes the CPU tests instead of passing the user's host buffer through. */
static void *untouchable_page(void)
{
    static void *page = NULL;
    if (NULL == page) {
        void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        page = MAP_FAILED == p ? NULL : p;
    }
    return page;
}

static loomResult_t copy(const loom_stage_t *st, void *dst, const void *src, size_t bytes)
{
    return st->aside ? loomMemcpyAside(dst, src, bytes) : loomMemcpySync(dst, src, bytes);
}

int mca_coll_loom_stage(loom_stage_t *st, bool on_gpu, void *user, loom_span_t span, bool is_recv, void **view)
{
    *view = user;
    if (on_gpu && 0 == span.bytes && mca_coll_loom_component.stage_host_buffers && NULL != untouchable_page())
        *view = untouchable_page();
    if (!on_gpu || 0 == span.bytes) return MPI_SUCCESS;
    if (st->n >= LOOM_STAGE_MAX) return MPI_ERR_INTERN;
    void *host = malloc(span.bytes);
    if (NULL == host) return MPI_ERR_NO_MEM;
    loom_staged_buf_t *b = &st->buf[st->n++];
    b->user = user;
    b->host = host;
    b->orig = NULL;
    b->span = span;
    b->copy_out = is_recv;
    if (loomSuccess != copy(st, host, (char *)user + span.lo, span.bytes)) return copy_error("in", span.bytes);
    if (is_recv && st->changed_only) {
        if (NULL == (b->orig = malloc(span.bytes))) return MPI_ERR_NO_MEM;
        memcpy(b->orig, host, span.bytes);
    }
    *view = (char *)host - span.lo;
    return MPI_SUCCESS;
}

/* Runs of changed bytes copied one by one up to this many; beyond, laid over a fresh copy. */
#define LOOM_CHANGED_RUNS_MAX 16

/* The first index >= i where now and was differ (n: none): 4 KiB blocks,
 * then words, then bytes. */
static size_t next_changed(const unsigned char *now, const unsigned char *was, size_t i, size_t n)
{
    while (i + 4096 <= n && 0 == memcmp(now + i, was + i, 4096)) i += 4096;
    while (i + 8 <= n && 0 == memcmp(now + i, was + i, 8)) i += 8;
    while (i < n && now[i] == was[i]) ++i;
    return i;
}

/* The end of the run of changed bytes that starts at i. */
static size_t run_end(const unsigned char *now, const unsigned char *was, size_t i, size_t n)
{
    while (i < n && now[i] != was[i]) ++i;
    return i;
}

/* Each run of changed bytes of b to the user's buffer, one copy each. */
static loomResult_t copy_runs(const loom_stage_t *st, const loom_staged_buf_t *b)
{
    const unsigned char *now = b->host, *was = b->orig;
    char *user = (char *)b->user + b->span.lo;
    loomResult_t r = loomSuccess;
    for (size_t i = next_changed(now, was, 0, b->span.bytes); i < b->span.bytes && loomSuccess == r;) {
        const size_t end = run_end(now, was, i, b->span.bytes);
        r = copy(st, user + i, now + i, end - i);
        i = next_changed(now, was, end, b->span.bytes);
    }
    return r;
}

/* b's bytes that differ from b->orig back to the user's buffer
 * (loom_stage_t): a few runs one by one; many laid over a fresh copy of the
 * span (one by one still where no memory for that copy can be had). */
static loomResult_t copy_changed(const loom_stage_t *st, const loom_staged_buf_t *b)
{
    const unsigned char *now = b->host, *was = b->orig;
    const size_t n = b->span.bytes;
    int runs = 0;
    for (size_t i = next_changed(now, was, 0, n); i < n && runs <= LOOM_CHANGED_RUNS_MAX; ++runs)
        i = next_changed(now, was, run_end(now, was, i, n), n);
    unsigned char *fresh = runs > LOOM_CHANGED_RUNS_MAX ? malloc(n) : NULL;
    if (NULL == fresh) return copy_runs(st, b);
    char *user = (char *)b->user + b->span.lo;
    loomResult_t r = copy(st, fresh, user, n);
    for (size_t i = 0; i < n && loomSuccess == r; ++i)
        if (now[i] != was[i]) fresh[i] = now[i];
    if (loomSuccess == r) r = copy(st, user, fresh, n);
    free(fresh);
    return r;
}

int mca_coll_loom_unstage(loom_stage_t *st, int rc, ompi_request_t **req)
{
    if (MPI_SUCCESS == rc && NULL != req && MPI_REQUEST_NULL != *req) {
        ompi_request_wait_completion(*req);
        rc = (*req)->req_status.MPI_ERROR;
    }
    for (int i = 0; i < st->n; ++i) {
        loom_staged_buf_t *b = &st->buf[i];
        if (MPI_SUCCESS == rc && b->copy_out &&
            loomSuccess != (NULL != b->orig ? copy_changed(st, b)
                                            : copy(st, (char *)b->user + b->span.lo, b->host, b->span.bytes)))
            rc = copy_error("out", b->span.bytes);
        free(b->host);
        free(b->orig);
    }
    st->n = 0;
    return rc;
}
