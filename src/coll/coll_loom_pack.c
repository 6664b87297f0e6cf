#include "coll_loom_pack.h"

#include <stdlib.h>
#include <string.h>

#include "coll_loom_stage.h"
#include "ompi/datatype/ompi_datatype.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/util/output.h"

/* Block q's type size; 0 for a block without elements, whose type is not
 * read (alltoallw callers pass MPI_DATATYPE_NULL there). */
static size_t block_type_size(const loom_typed_blocks_t *b, int q)
{
    ompi_datatype_t *t = mca_coll_loom_block_type(b, q);
    size_t size = 0;
    if (NULL != t && b->counts[q] > 0) ompi_datatype_type_size(t, &size);
    return size;
}

/* Whether the blocks go through a packed copy: the one type dt when it is
 * not contiguous (whatever the counts); with dts, when a block that has
 * bytes has a type that is not. */
static bool needs_packing(const loom_typed_blocks_t *b, const size_t *bytes)
{
    if (NULL == b->dts) {
        size_t size = 0;
        if (NULL != b->dt) ompi_datatype_type_size(b->dt, &size);
        return size > 0 && !mca_coll_loom_contiguous(b->dt, 2);
    }
    for (int q = 0; q < b->n; ++q)
        if (bytes[q] && !mca_coll_loom_contiguous(b->dts[q], 2)) return true;
    return false;
}

size_t mca_coll_loom_byte_blocks(const loom_typed_blocks_t *b, size_t *bytes, size_t *at, void **base, bool *packed)
{
    for (int q = 0; q < b->n; ++q) bytes[q] = b->counts[q] > 0 ? (size_t)b->counts[q] * block_type_size(b, q) : 0;
    *packed = needs_packing(b, bytes);
    *base = *packed ? NULL : b->user;
    if (*packed) {
        size_t next = 0;
        for (int q = 0; q < b->n; ++q) at[q] = next, next += bytes[q];
        return next;
    }
    ptrdiff_t lo = 0, hi = 0;
    bool any = false;
    for (int q = 0; q < b->n; ++q) {
        if (!bytes[q]) continue;
        const ptrdiff_t first = mca_coll_loom_block_offset(b, q); /* contiguous: extent == size */
        if (!any || first < lo) lo = first;
        if (!any || first + (ptrdiff_t)bytes[q] > hi) hi = first + (ptrdiff_t)bytes[q];
        any = true;
    }
    for (int q = 0; q < b->n; ++q) at[q] = bytes[q] ? (size_t)(mca_coll_loom_block_offset(b, q) - lo) : 0;
    if (any && NULL != b->user) *base = (char *)b->user + lo;
    return any ? (size_t)(hi - lo) : 0;
}

/* The span of the blocks in the user's buffer. */
static loom_span_t blocks_span(const loom_typed_blocks_t *b)
{
    if (NULL != b->wdispls) { /* placed by rank: each block's own span, moved to its byte offset */
        loom_span_t all = {0, 0};
        for (int q = 0; q < b->n; ++q) {
            if (b->counts[q] <= 0) continue;
            const loom_type_shape_t sh = mca_coll_loom_shape(mca_coll_loom_block_type(b, q));
            loom_span_t one = loom_span_of(&sh, (size_t)b->counts[q]);
            one.lo += (ptrdiff_t)b->wdispls[q];
            all = loom_span_union(all, one);
        }
        return all;
    }
    if (NULL != b->dts) return mca_coll_loom_span_w(b->counts, b->displs, NULL, b->dts, b->n);
    loom_type_shape_t sh = mca_coll_loom_shape(b->dt);
    if (NULL == b->displs) { /* blocks at q x stride: up to the end of the last one that has elements */
        size_t end = 0;
        for (int q = 0; q < b->n; ++q)
            if (b->counts[q] > 0 && (size_t)q * b->stride + (size_t)b->counts[q] > end)
                end = (size_t)q * b->stride + (size_t)b->counts[q];
        return loom_span_of(&sh, end);
    }
    return loom_span_of_v(&sh, b->counts, b->displs, b->n);
}

/* Copies count elements between a typed buffer and packed bytes in one
 * pass of a convertor over the whole range, as MPI_Pack / MPI_Unpack do.
 * Not ompi_datatype_sndrcv: it moves the bytes in 64 KiB pieces and, for
 * some types with an lb (MPICH's DTP type in test/mpi/pack_check.c), stops
 * after a few pieces and still returns MPI_SUCCESS (Open MPI 4.1 and 5.0),
 * so a broadcast's root sent the rest of its packed copy unwritten. Any
 * shortfall here is an error, never a short copy. */
static int convert(char *typed, ompi_datatype_t *dt, size_t count, char *bytes, bool to_bytes)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    if (0 == count || 0 == size) return MPI_SUCCESS;
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    int32_t prc = to_bytes
                      ? opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super, count, typed, 0, &conv)
                      : opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dt->super, count, typed, 0, &conv);
    struct iovec iov = {.iov_base = bytes, .iov_len = count * size};
    uint32_t n = 1;
    size_t moved = iov.iov_len;
    if (OPAL_SUCCESS == prc)
        prc = to_bytes ? opal_convertor_pack(&conv, &iov, &n, &moved) : opal_convertor_unpack(&conv, &iov, &n, &moved);
    OBJ_DESTRUCT(&conv);
    if (prc < 0 || moved != count * size) {
        opal_output(mca_coll_loom_component.output, "coll/loom: %s %zu elements of %zu bytes moved %zu bytes",
                    to_bytes ? "packing" : "unpacking", count, size, moved);
        return MPI_ERR_INTERN;
    }
    return MPI_SUCCESS;
}

/* Runs every block through convert, on a host view of the user's buffer. */
static int each_block(const loom_typed_blocks_t *b, const size_t *at, char *packed, bool to_bytes, bool aside)
{
    loom_stage_t st = {.n = 0, .aside = aside, .changed_only = aside}; /* aside: at completion */
    void *view;
    const loom_span_t span = blocks_span(b);
    int rc = mca_coll_loom_stage(&st, mca_coll_loom_span_on_gpu(b->user, span), b->user, span, !to_bytes, &view);
    for (int q = 0; q < b->n && MPI_SUCCESS == rc; ++q)
        if (b->counts[q] > 0)
            rc = convert((char *)view + mca_coll_loom_block_offset(b, q), mca_coll_loom_block_type(b, q),
                         (size_t)b->counts[q], packed + at[q], to_bytes);
    return mca_coll_loom_unstage(&st, rc, NULL);
}

int mca_coll_loom_pack(const loom_typed_blocks_t *b, const size_t *at, size_t total, char **packed)
{
    *packed = malloc(total ? total : 1);
    if (NULL == *packed) return MPI_ERR_NO_MEM;
    int rc = each_block(b, at, *packed, true, false);
    if (MPI_SUCCESS != rc) {
        free(*packed);
        *packed = NULL;
    }
    return rc;
}

int mca_coll_loom_unpack(const loom_typed_blocks_t *b, const size_t *at, const char *packed)
{
    return each_block(b, at, (char *)packed, false, false);
}

/* The after-work of a packed receive: one allocation, the tables behind it. */
typedef struct {
    mca_coll_loom_after_t super;
    loom_typed_blocks_t b; /* tables point behind the struct; the types it reads retained (n 0: free only) */
    size_t *at;
    char *packed;
} unpack_after_t;

void mca_coll_loom_hold_block_types(const loom_typed_blocks_t *b, int delta)
{
    for (int q = 0; q < (NULL != b->dts ? b->n : 1); ++q) {
        if (NULL == b->dts || b->counts[q] > 0) mca_coll_loom_hold(NULL != b->dts ? b->dts[q] : b->dt, delta);
    }
}

static int unpack_after_run(mca_coll_loom_after_t *self, bool ok)
{
    unpack_after_t *u = (unpack_after_t *)self;
    int rc = MPI_SUCCESS;
    /* at completion, maybe in another call's progress: copies that wait for nothing else */
    if (ok && u->b.n > 0) rc = each_block(&u->b, u->at, u->packed, false, true);
    free(u->packed);
    mca_coll_loom_hold_block_types(&u->b, -1);
    free(u);
    return rc;
}

int mca_coll_loom_unpack_after(loom_gpu_call_t *c, const loom_typed_blocks_t *b, const size_t *at, char *packed)
{
    const size_t n = NULL != b ? (size_t)b->n : 0;
    const bool displs = NULL != b && NULL != b->displs, dts = NULL != b && NULL != b->dts;
    const bool wdispls = NULL != b && NULL != b->wdispls;
    unpack_after_t *u = malloc(sizeof(*u) + n * sizeof(size_t) + (dts ? n * sizeof(ompi_datatype_t *) : 0) +
                               (wdispls ? n * sizeof(MPI_Aint) : 0) + (displs ? 2 : 1) * n * sizeof(int));
    if (NULL == u) {
        free(packed);
        return MPI_ERR_NO_MEM;
    }
    u->super.run = unpack_after_run;
    u->packed = packed;
    u->at = (size_t *)(u + 1);
    memset(&u->b, 0, sizeof(u->b));
    if (NULL != b) {
        ompi_datatype_t **types = (ompi_datatype_t **)(u->at + n);
        MPI_Aint *wds = (MPI_Aint *)(types + (dts ? n : 0)); /* all 8-byte entries up to the ints */
        int *counts = (int *)(wds + (wdispls ? n : 0)), *ds = counts + n;
        memcpy(u->at, at, n * sizeof(size_t));
        if (dts) memcpy(types, b->dts, n * sizeof(ompi_datatype_t *));
        if (wdispls) memcpy(wds, b->wdispls, n * sizeof(MPI_Aint));
        memcpy(counts, b->counts, n * sizeof(int));
        if (displs) memcpy(ds, b->displs, n * sizeof(int));
        u->b = *b;
        u->b.dts = dts ? types : NULL;
        u->b.counts = counts;
        u->b.displs = displs ? ds : NULL;
        u->b.wdispls = wdispls ? wds : NULL;
        mca_coll_loom_hold_block_types(&u->b, +1);
    }
    c->after = &u->super;
    return MPI_SUCCESS;
}
