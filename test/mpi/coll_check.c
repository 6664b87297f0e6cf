#include "coll_check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reductions */
/* allreduce (kind 0), scan (1), exscan (2): element i of rank r's result folds
 * the inputs of ranks [0, size), [0, r] or [0, r). */
static void check_elementwise(ctx_t *c, MPI_Op op, int kind)
{
    size_t n = c->n;
    buf_t s = buf_new(c, n), r = buf_new(c, n);
    int *want = malloc((n ? n : 1) * sizeof(int));
    int upto = kind == 0 ? c->size : kind == 1 ? c->rank + 1 : c->rank;
    for (size_t i = 0; i < n; ++i) {
        s.host[i] = val(c->rank, i, 1);
        want[i] = val(0, i, 1);
        for (int q = 1; q < upto; ++q) want[i] = fold(op, want[i], val(q, i, 1));
    }
    buf_push(c, &s);
    if (c->in_place) memcpy(r.host, s.host, n * sizeof(int));
    buf_push(c, &r);
    const void *sb = IN_PLACE_OR(c, s);
    if (kind == 0) RUN(c, Allreduce, Iallreduce, sb, r.buf, (int)n, MPI_INT, op, c->comm);
    if (kind == 1) RUN(c, Scan, Iscan, sb, r.buf, (int)n, MPI_INT, op, c->comm);
    if (kind == 2) RUN(c, Exscan, Iexscan, sb, r.buf, (int)n, MPI_INT, op, c->comm);
    buf_pull(c, &r);
    if (upto > 0) expect(c, r.host, want, n); /* exscan leaves rank 0 undefined */
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

static void check_reduce(ctx_t *c, int root)
{
    size_t n = c->n;
    int at_root = c->rank == root;
    buf_t s = buf_new(c, n), r = buf_new(c, n);
    int *want = malloc((n ? n : 1) * sizeof(int));
    for (size_t i = 0; i < n; ++i) {
        s.host[i] = val(c->rank, i, 2);
        want[i] = 0;
        for (int q = 0; q < c->size; ++q) want[i] += val(q, i, 2);
    }
    buf_push(c, &s);
    if (c->in_place && at_root) memcpy(r.host, s.host, n * sizeof(int));
    buf_push(c, &r);
    RUN(c, Reduce, Ireduce, c->in_place && at_root ? MPI_IN_PLACE : s.buf, r.buf, (int)n, MPI_INT, MPI_SUM, root, c->comm);
    buf_pull(c, &r);
    if (at_root) expect(c, r.host, want, n);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* reduce_scatter with counts n + (r % 3), or reduce_scatter_block (block). */
static int rs_count(const ctx_t *c, int block, int q) { return block ? (int)c->n : (c->n ? (int)c->n + q % 3 : 0); }

static void check_reduce_scatter(ctx_t *c, int block)
{
    int *counts = malloc(c->size * sizeof(int));
    size_t total = 0, off = 0;
    for (int q = 0; q < c->size; ++q) {
        counts[q] = rs_count(c, block, q);
        if (q < c->rank) off += counts[q];
        total += counts[q];
    }
    size_t mine = rs_count(c, block, c->rank);
    buf_t s = buf_new(c, total), r = buf_new(c, c->in_place ? total : mine);
    int *want = malloc((mine ? mine : 1) * sizeof(int));
    for (size_t j = 0; j < total; ++j) s.host[j] = val(c->rank, j, 5);
    for (size_t i = 0; i < mine; ++i) {
        want[i] = 0;
        for (int q = 0; q < c->size; ++q) want[i] += val(q, off + i, 5);
    }
    buf_push(c, &s);
    if (c->in_place) memcpy(r.host, s.host, total * sizeof(int));
    buf_push(c, &r);
    if (block) RUN(c, Reduce_scatter_block, Ireduce_scatter_block, IN_PLACE_OR(c, s), r.buf, (int)c->n, MPI_INT, MPI_SUM, c->comm);
    else RUN(c, Reduce_scatter, Ireduce_scatter, IN_PLACE_OR(c, s), r.buf, counts, MPI_INT, MPI_SUM, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, mine);
    free(want);
    free(counts);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* ---------------------------------------------------------------- movement */
static void check_bcast(ctx_t *c, int root)
{
    size_t n = c->n;
    buf_t b = buf_new(c, n);
    int *want = malloc((n ? n : 1) * sizeof(int));
    for (size_t i = 0; i < n; ++i) {
        want[i] = val(root, i, 3);
        if (c->rank == root) b.host[i] = want[i];
    }
    buf_push(c, &b);
    RUN(c, Bcast, Ibcast, b.buf, (int)n, MPI_INT, root, c->comm);
    buf_pull(c, &b);
    expect(c, b.host, want, n);
    free(want);
    buf_free(c, &b);
}

/* gather (to root) or allgather (root < 0): block q of the result is rank q's input. */
static void check_gather(ctx_t *c, int root)
{
    size_t n = c->n, all = n * c->size;
    int at_root = root < 0 || c->rank == root;
    int in_place = c->in_place && at_root;
    buf_t s = buf_new(c, n), r = buf_new(c, all);
    int *want = malloc((all ? all : 1) * sizeof(int));
    for (int q = 0; q < c->size; ++q)
        for (size_t i = 0; i < n; ++i) want[q * n + i] = val(q, i, 4);
    for (size_t i = 0; i < n; ++i) s.host[i] = val(c->rank, i, 4);
    if (in_place) memcpy(r.host + c->rank * n, s.host, n * sizeof(int));
    buf_push(c, &s);
    buf_push(c, &r);
    const void *sb = in_place ? MPI_IN_PLACE : s.buf;
    if (root < 0) RUN(c, Allgather, Iallgather, sb, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, c->comm);
    else RUN(c, Gather, Igather, sb, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, root, c->comm);
    buf_pull(c, &r);
    if (at_root) expect(c, r.host, want, all);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

static void check_scatter(ctx_t *c, int root)
{
    size_t n = c->n;
    int at_root = c->rank == root;
    buf_t s = buf_new(c, n * c->size), r = buf_new(c, n);
    int *want = malloc((n ? n : 1) * sizeof(int));
    for (int q = 0; q < c->size; ++q)
        for (size_t i = 0; i < n; ++i) s.host[q * n + i] = val(pair(root, q), i, 6);
    for (size_t i = 0; i < n; ++i) want[i] = val(pair(root, c->rank), i, 6);
    buf_push(c, &s);
    buf_push(c, &r);
    void *rb = c->in_place && at_root ? MPI_IN_PLACE : r.buf;
    RUN(c, Scatter, Iscatter, s.buf, (int)n, MPI_INT, rb, (int)n, MPI_INT, root, c->comm);
    if (rb == MPI_IN_PLACE) {
        buf_pull(c, &s); /* the root's own block stays where it was */
        expect(c, s.host + root * n, want, n);
    } else {
        buf_pull(c, &r);
        expect(c, r.host, want, n);
    }
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

static void check_alltoall(ctx_t *c)
{
    size_t n = c->n, all = n * c->size;
    buf_t s = buf_new(c, all), r = buf_new(c, all);
    int *want = malloc((all ? all : 1) * sizeof(int));
    for (int q = 0; q < c->size; ++q)
        for (size_t i = 0; i < n; ++i) {
            s.host[q * n + i] = val(pair(c->rank, q), i, 7);
            want[q * n + i] = val(pair(q, c->rank), i, 7);
        }
    if (c->in_place) memcpy(r.host, s.host, all * sizeof(int));
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Alltoall, Ialltoall, IN_PLACE_OR(c, s), (int)n, MPI_INT, r.buf, (int)n, MPI_INT, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, all);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* Block counts that differ per rank, one-element gaps between blocks: the
 * gaps must keep their sentinel. */
static int vcount(size_t n, int src, int dst) { return n ? (int)((n + src + 2 * dst) % (n + 4)) : 0; }

static size_t layout(int *counts, int *displs, int size, int (*count_of)(size_t, int, int), size_t n, int me,
                     int as_src)
{
    size_t at = 0;
    for (int q = 0; q < size; ++q) {
        counts[q] = as_src ? count_of(n, me, q) : count_of(n, q, me);
        displs[q] = (int)at + 1;
        at += counts[q] + 1;
    }
    return at;
}

static int agv_count(size_t n, int src, int dst) { (void)dst; return n ? (int)n + src : 0; }

static void check_vector_collective(ctx_t *c, int alltoallv)
{
    int size = c->size;
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int (*count_of)(size_t, int, int) = alltoallv ? vcount : agv_count;
    size_t s_len = layout(sc, sd, size, count_of, c->n, c->rank, 1);
    size_t r_len = layout(rc, rd, size, count_of, c->n, c->rank, 0);
    buf_t s = buf_new(c, s_len), r = buf_new(c, r_len);
    int *want = want_new(r_len, SENTINEL);
    for (int q = 0; q < size; ++q) {
        for (int i = 0; i < sc[q]; ++i) s.host[sd[q] + i] = val(alltoallv ? pair(c->rank, q) : c->rank, i, 8);
        for (int i = 0; i < rc[q]; ++i) want[rd[q] + i] = val(alltoallv ? pair(q, c->rank) : q, i, 8);
    }
    buf_push(c, &s);
    buf_push(c, &r);
    if (alltoallv) RUN(c, Alltoallv, Ialltoallv, s.buf, sc, sd, MPI_INT, r.buf, rc, rd, MPI_INT, c->comm);
    else RUN(c, Allgatherv, Iallgatherv, (char *)s.buf + sd[0] * sizeof(int), sc[0], MPI_INT, r.buf, rc, rd, MPI_INT, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, r_len);
    free(want);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* gatherv to root (scatter 0) or scatterv from it (scatter 1): ragged blocks
 * (rank q's has n + q % 3 elements) at the root in reverse rank order with
 * one-element gaps, which keep their sentinel. In place at the root: its
 * own block stays where it is. */
static int rooted_count(size_t n, int q) { return n ? (int)n + q % 3 : 0; }

static void check_rooted_v(ctx_t *c, int root, int scatter)
{
    const int size = c->size, at_root = c->rank == root, in_place = c->in_place && at_root;
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    size_t len = 1;
    for (int q = size - 1; q >= 0; --q) {
        counts[q] = rooted_count(c->n, q);
        displs[q] = (int)len;
        len += (size_t)counts[q] + 1;
    }
    const size_t mine = (size_t)rooted_count(c->n, c->rank);
    buf_t big = buf_new(c, len), small = buf_new(c, mine);
    int *want = want_new(len, SENTINEL);
    for (int q = 0; q < size; ++q)
        for (int i = 0; i < counts[q]; ++i) {
            const int v = val(scatter ? pair(root, q) : q, i, 9);
            if (!scatter) want[displs[q] + i] = v;
            if (scatter && at_root) big.host[displs[q] + i] = v;
            if (!scatter && q == c->rank) small.host[i] = v;
            if (!scatter && q == c->rank && in_place) big.host[displs[q] + i] = v;
        }
    buf_push(c, &big);
    buf_push(c, &small);
    if (scatter)
        RUN(c, Scatterv, Iscatterv, big.buf, counts, displs, MPI_INT, in_place ? MPI_IN_PLACE : small.buf,
            (int)mine, MPI_INT, root, c->comm);
    else
        RUN(c, Gatherv, Igatherv, in_place ? MPI_IN_PLACE : small.buf, (int)mine, MPI_INT, big.buf, counts, displs,
            MPI_INT, root, c->comm);
    if (scatter && !in_place) {
        for (size_t i = 0; i < mine; ++i) want[i] = val(pair(root, c->rank), (size_t)i, 9);
        buf_pull(c, &small);
        expect(c, small.host, want, mine);
    } else if (at_root) { /* gatherv's result, or scatterv in place: the root's buffer unchanged */
        if (scatter)
            for (int q = 0; q < size; ++q)
                for (int i = 0; i < counts[q]; ++i) want[displs[q] + i] = val(pair(root, q), i, 9);
        buf_pull(c, &big);
        expect(c, big.host, want, len);
    }
    free(want);
    free(counts);
    free(displs);
    buf_free(c, &big);
    buf_free(c, &small);
}

/* alltoallw: 2 x vcount(n, src, dst) ints from src to dst, described as that
 * many MPI_INT on one side and half as many 2-int elements on the other
 * (which side depends on the pair: signatures match, types differ); blocks
 * at byte displacements in reverse peer order with one-int gaps. The last
 * peer's block is at 0: Open MPI 4.1's coll/self scales alltoallw's byte
 * displacements by the extent, so a one-rank communicator gets a wrong
 * result from it (host buffers too) at any other displacement. */
static void check_alltoallw(ctx_t *c)
{
    const int size = c->size;
    MPI_Datatype int2;
    MPI_Type_contiguous(2, MPI_INT, &int2);
    MPI_Type_commit(&int2);
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *st = malloc(size * sizeof(MPI_Datatype)), *rt = malloc(size * sizeof(MPI_Datatype));
    size_t s_len = 0, r_len = 0;
    for (int q = size - 1; q >= 0; --q) {
        const int out = 2 * vcount(c->n, c->rank, q), in = 2 * vcount(c->n, q, c->rank), odd = (c->rank + q) % 2;
        st[q] = odd ? int2 : MPI_INT, sc[q] = odd ? out / 2 : out, sd[q] = (int)(s_len * sizeof(int));
        rt[q] = odd ? MPI_INT : int2, rc[q] = odd ? in : in / 2, rd[q] = (int)(r_len * sizeof(int));
        s_len += (size_t)out + 1;
        r_len += (size_t)in + 1;
    }
    buf_t s = buf_new(c, s_len), r = buf_new(c, r_len);
    int *want = want_new(r_len, SENTINEL);
    for (int q = 0; q < size; ++q) {
        for (int i = 0; i < 2 * vcount(c->n, c->rank, q); ++i)
            s.host[sd[q] / sizeof(int) + i] = val(pair(c->rank, q), i, 10);
        for (int i = 0; i < 2 * vcount(c->n, q, c->rank); ++i)
            want[rd[q] / sizeof(int) + i] = val(pair(q, c->rank), i, 10);
    }
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Alltoallw, Ialltoallw, s.buf, sc, sd, st, r.buf, rc, rd, rt, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, r_len);
    MPI_Type_free(&int2);
    free(want);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(st);
    free(rt);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* A non-contiguous type: 2 blocks of 2 ints, stride 3, resized to 6 ints,
 * so each element has a hole inside (int 2) and after it (int 5). The holes
 * must keep their sentinel through bcast and allgather. (Open MPI refuses
 * predefined reduction ops on derived types, so no reduction here.) */
static int is_data(size_t j) { return (j % 6) != 2 && (j % 6) != 5; }

static void check_derived(ctx_t *c)
{
    MPI_Datatype vec, elem;
    MPI_Type_vector(2, 2, 3, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 6 * sizeof(int), &elem);
    MPI_Type_commit(&elem);
    size_t k = c->n / 4 + 1, len = 6 * k, all = len * c->size;
    buf_t b = buf_new(c, len), s = buf_new(c, len), r = buf_new(c, all);
    int *want_b = malloc(len * sizeof(int)), *want_r = malloc(all * sizeof(int));
    for (size_t j = 0; j < len; ++j) {
        want_b[j] = is_data(j) ? val(0, j, 10) : SENTINEL;
        if (c->rank == 0) b.host[j] = want_b[j];
        s.host[j] = is_data(j) ? val(c->rank, j, 9) : SENTINEL;
    }
    for (int q = 0; q < c->size; ++q)
        for (size_t j = 0; j < len; ++j) want_r[q * len + j] = is_data(j) ? val(q, j, 9) : SENTINEL;
    buf_push(c, &b);
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Bcast, Ibcast, b.buf, (int)k, elem, 0, c->comm);
    buf_pull(c, &b);
    expect(c, b.host, want_b, len);
    RUN(c, Allgather, Iallgather, s.buf, (int)k, elem, r.buf, (int)k, elem, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want_r, all);
    free(want_b);
    free(want_r);
    buf_free(c, &b);
    buf_free(c, &s);
    buf_free(c, &r);
    MPI_Type_free(&elem);
    MPI_Type_free(&vec);
}

void check_collectives(MPI_Comm comm, const char *comm_name, const check_memory_t *mem, const size_t *counts,
                       int ncounts, check_tally_t *tally)
{
    ctx_t c = {comm, comm_name, 0, 0, mem, tally, 0, 0, 0, ""};
    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    int last = c.size - 1;
    for (int k = 0; k < ncounts; ++k)
        for (c.nb = 0; c.nb <= 1; ++c.nb) {
            c.n = counts[k];
            for (c.in_place = 0; c.in_place <= 1; ++c.in_place) {
                check_elementwise(&c, MPI_SUM, 0);
                check_elementwise(&c, MPI_MAX, 0);
                check_elementwise(&c, MPI_SUM, 1);
                check_elementwise(&c, MPI_MAX, 2);
                check_reduce(&c, 0);
                check_reduce(&c, last);
                check_reduce_scatter(&c, 0);
                check_reduce_scatter(&c, 1);
                check_gather(&c, -1);
                check_gather(&c, last);
                check_scatter(&c, 0);
                check_rooted_v(&c, 0, 0);
                check_rooted_v(&c, last, 0);
                check_rooted_v(&c, 0, 1);
                check_rooted_v(&c, last, 1);
                check_alltoall(&c);
            }
            c.in_place = 0;
            check_bcast(&c, 0);
            check_bcast(&c, last);
            check_vector_collective(&c, 0);
            check_vector_collective(&c, 1);
            check_alltoallw(&c);
            check_derived(&c);
            RUN(&c, Barrier, Ibarrier, comm);
            tally->checks++;
        }
}

long check_on_all_comms(const check_memory_t *mem, const size_t *counts, int ncounts, const char *prog)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_tally_t t = {0, 0};
    MPI_Comm split, dup, reversed;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
    MPI_Comm_set_name(split, "split");
    MPI_Comm_set_name(dup, "dup");
    MPI_Comm_set_name(reversed, "reversed");

    check_collectives(MPI_COMM_WORLD, "world", mem, counts, ncounts, &t);
    check_collectives(split, "split", mem, counts, ncounts, &t);
    check_collectives(dup, "dup", mem, counts, ncounts, &t);
    check_collectives(reversed, "reversed", mem, counts, ncounts, &t);

    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&reversed);
    long sums[2] = {t.checks, t.failures}, totals[2];
    MPI_Allreduce(sums, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %d ranks, memory %s: %ld checks, %ld failures\n", prog, size, mem->name, totals[0], totals[1]);
    return totals[1];
}

/* ---------------------------------------------------------------- host memory */
static void *host_alloc(size_t bytes) { return malloc(bytes); }
static void host_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
const check_memory_t check_host_memory = {"host", host_alloc, free, host_copy, host_copy};
