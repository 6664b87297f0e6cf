/*
 * Staging: loom's last-resort path for device buffers. The bytes a call touches
 * are copied into host memory, the previous module runs on the host copy, and
 * receive buffers are copied back. Correct for every collective, datatype and
 * op; slow. Used until (and wherever) loom's GPU path does not cover a call.
 */
#ifndef COLL_LOOM_STAGE_H
#define COLL_LOOM_STAGE_H

#include "coll_loom.h"
#include "coll_loom_span.h"
#include "loom.h"

#define LOOM_STAGE_MAX 2

typedef struct {
    void *user;
    void *host;
    void *orig; /* changed_only: the bytes as copied in (NULL: copied back whole) */
    loom_span_t span;
    bool copy_out;
} loom_staged_buf_t;

/* Staged buffers. A copy back must not write the span whole: between the
 * copy in and then (until a non-blocking call completes; during a blocking
 * call, whose wait progresses earlier pending calls), the datatype's holes
 * and the gaps between blocks may have been written by someone else
 * (another pending call whose elements sit there, the application), and MPI
 * lets them. With changed_only a receive copy keeps its bytes as copied in,
 * and only the bytes the call changed go back: a few runs one by one, many
 * (a strided type, or values that often equal the old ones) laid over a
 * fresh copy of the span read back just then, a window of two copies. */
typedef struct {
    loom_staged_buf_t buf[LOOM_STAGE_MAX];
    int n;
    bool aside;        /* copies ordered after nothing (loomMemcpyAside: at a non-blocking call's completion) */
    bool changed_only; /* set before staging: receive copies go back as above */
} loom_stage_t;

/* Where a buffer is (host when NULL, MPI_IN_PLACE or unknown to CUDA); asked
 * of the driver once per pointer between mca_coll_loom_where_enter and _leave,
 * which the component's entry point puts around each call (per thread; the
 * rules: coll_loom_where_memo.h). */
loomPointerInfo_t mca_coll_loom_where(const void *ptr);
void mca_coll_loom_where_enter(void);
void mca_coll_loom_where_leave(void);

/* True if the call must not hand ptr to a host-only module: device or managed
 * memory (or any real buffer when coll_loom_stage_host_buffers is set).
 * MPI_IN_PLACE and NULL are never on the GPU. */
bool mca_coll_loom_on_gpu(const void *ptr);
/* The same for the bytes a call touches, span from ptr: its first byte
 * decides. A v-collective's pointer may lie outside its allocation (one past
 * its end, with negative displacements) while every byte it names is inside. */
bool mca_coll_loom_span_on_gpu(const void *ptr, loom_span_t span);
/* ... and the span of counts[q] elements of dtype at displs[q] (extents), n blocks. */
bool mca_coll_loom_v_on_gpu(const void *ptr, ompi_datatype_t *dtype, const int *counts, const int *displs, int n);
/* The same, also telling where the buffer is (host when forced to stage). */
bool mca_coll_loom_locate(const void *ptr, loomPointerInfo_t *info);

loom_type_shape_t mca_coll_loom_shape(ompi_datatype_t *dtype);
/* Whether count elements of dtype are one run of bytes from the buffer
 * pointer (true_lb 0, no holes; two elements: any number of them). */
bool mca_coll_loom_contiguous(ompi_datatype_t *dtype, int count);

/* The w-forms' span: counts[q] elements of types[q] at byte displacement
 * displs[q] (int, alltoallw) or adispls[q] (MPI_Aint, neighbor_alltoallw). */
loom_span_t mca_coll_loom_span_w(const int *counts, const int *displs, const MPI_Aint *adispls,
                                 ompi_datatype_t *const *types, int n);

/* Copies span of user into a host buffer when on_gpu and sets *view to the
 * pointer to pass instead of user; otherwise *view = user. A receive buffer
 * (is_recv) is copied in too, so bytes the collective does not write come back
 * unchanged, and copied out by mca_coll_loom_unstage. */
int mca_coll_loom_stage(loom_stage_t *st, bool on_gpu, void *user, loom_span_t span, bool is_recv, void **view);

/* Ends a staged call whose previous-module call returned rc: for a
 * non-blocking call (req != NULL) waits for the request (which stays valid and
 * complete for the caller's MPI_Wait), then copies receive buffers back and
 * frees the host copies. Returns rc or the first error after it. */
int mca_coll_loom_unstage(loom_stage_t *st, int rc, ompi_request_t **req);
/* The usual shape of a call: one send and one receive buffer (either may be
 * absent: on_gpu false), staged in that order. */
static inline int mca_coll_loom_stage_pair(loom_stage_t *st, const void *sbuf, bool s_gpu, loom_span_t s_span,
                                           void *rbuf, bool r_gpu, loom_span_t r_span, const void **s_view,
                                           void **r_view)
{
    void *sv = NULL;
    int rc = mca_coll_loom_stage(st, s_gpu, (void *)sbuf, s_span, false, &sv);
    *s_view = sv;
    *r_view = rbuf;
    if (MPI_SUCCESS == rc) rc = mca_coll_loom_stage(st, r_gpu, rbuf, r_span, true, r_view);
    return rc;
}

#endif
