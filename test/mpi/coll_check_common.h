/*
 * What the collective suites share (coll_check.c on intracommunicators,
 * coll_inter_check.c on intercommunicators): the call context, the input
 * values, buffers mirrored on the host, element-by-element checks and the
 * blocking/non-blocking call wrapper.
 */
#ifndef COLL_CHECK_COMMON_H
#define COLL_CHECK_COMMON_H

#include "coll_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL (-77777)

typedef struct {
    MPI_Comm comm;
    const char *cname;
    int rank, size;
    const check_memory_t *mem;
    check_tally_t *tally;
    size_t n;     /* element count of this round */
    int nb;       /* 1: the non-blocking twin + MPI_Wait */
    int in_place; /* 1: MPI_IN_PLACE where the collective allows it */
    const char *what;
} ctx_t;

/* Input value of element i contributed by `who` (a rank, or a rank pair). */
static inline int val(int who, size_t i, int salt)
{
    return (int)(((long)(who + 1) * 31 + (long)(i % 100003) * 7 + salt * 13) % 1009) - 504;
}
static inline int pair(int src, int dst) { return src * 64 + dst; }
static inline int fold(MPI_Op op, int a, int b) { return op == MPI_MAX ? (a > b ? a : b) : a + b; }

/* ---------------------------------------------------------------- buffers */
typedef struct {
    int *host; /* mirror on the host */
    void *buf; /* what the collective sees (host or device memory) */
    size_t n;
} buf_t;

static inline buf_t buf_new(ctx_t *c, size_t n)
{
    buf_t b = {malloc((n ? n : 1) * sizeof(int)), c->mem->alloc((n ? n : 1) * sizeof(int)), n};
    for (size_t i = 0; i < n; ++i) b.host[i] = SENTINEL;
    return b;
}
/* An expected result of n elements, each fill to start with. */
static inline int *want_new(size_t n, int fill)
{
    int *w = malloc((n ? n : 1) * sizeof(int));
    for (size_t i = 0; i < n; ++i) w[i] = fill;
    return w;
}

static inline void buf_push(ctx_t *c, buf_t *b) { c->mem->upload(b->buf, b->host, b->n * sizeof(int)); }
static inline void buf_pull(ctx_t *c, buf_t *b) { c->mem->download(b->host, b->buf, b->n * sizeof(int)); }
static inline void buf_free(ctx_t *c, buf_t *b)
{
    free(b->host);
    c->mem->release(b->buf);
}

/* ---------------------------------------------------------------- checking */
static inline void fail_line(ctx_t *c, const char *fmt, size_t i, long got, long want)
{
    fprintf(stderr, "FAIL %s%s comm=%s rank=%d n=%zu in_place=%d [", c->nb ? "I" : "", c->what, c->cname, c->rank,
            c->n, c->in_place);
    fprintf(stderr, fmt, i, got, want);
    fprintf(stderr, "]\n");
}

static inline void expect(ctx_t *c, const int *got, const int *want, size_t n)
{
    c->tally->checks++;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i]) {
            c->tally->failures++;
            fail_line(c, "element %zu: got %ld, want %ld", i, got[i], want[i]);
            return;
        }
}

static inline void check_rc(ctx_t *c, int rc)
{
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    c->tally->failures++;
    fprintf(stderr, "FAIL %s%s comm=%s rank=%d n=%zu: returned %s\n", c->nb ? "I" : "", c->what, c->cname, c->rank,
            c->n, msg);
}

/* Call MPI_<NAME>, or its non-blocking twin MPI_<INAME> then MPI_Wait. */
#define RUN(c, NAME, INAME, ...)                                                  \
    do {                                                                     \
        int rc_;                                                             \
        (c)->what = #NAME;                                                   \
        if ((c)->nb) {                                                       \
            MPI_Request r_ = MPI_REQUEST_NULL;                               \
            rc_ = MPI_##INAME(__VA_ARGS__, &r_);                             \
            if (rc_ == MPI_SUCCESS) rc_ = MPI_Wait(&r_, MPI_STATUS_IGNORE); \
        } else {                                                             \
            rc_ = MPI_##NAME(__VA_ARGS__);                                   \
        }                                                                    \
        check_rc(c, rc_);                                                    \
    } while (0)

#define IN_PLACE_OR(c, b) ((c)->in_place ? MPI_IN_PLACE : (b).buf)

#endif
