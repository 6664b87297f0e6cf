/*
 * The collective suite on an intercommunicator: MPI_COMM_WORLD split into a
 * lower and an upper half, joined by MPI_Intercomm_create. Every collective
 * MPI defines on intercommunicators, blocking and non-blocking; each group
 * roots in turn (MPI_ROOT at the root, MPI_PROC_NULL at its group's other
 * ranks, the root's local rank in the other group). A rank's result comes from
 * the other group, as MPI says; values are keyed by world rank, so a result
 * from the wrong group, the wrong rank or the wrong block shows.
 */
#include "coll_check_common.h"

typedef struct {
    ctx_t c;          /* c.rank, c.size: this rank in its local group */
    int group;        /* 0: lower half of the world, 1: upper */
    int remote;       /* size of the other group */
    int lbase, rbase; /* world rank of local rank 0 and of remote rank 0 */
} inter_t;

static int me(const inter_t *x) { return x->lbase + x->c.rank; }

/* The root argument this rank passes when rank `root` of group `g` roots. */
static int root_arg(const inter_t *x, int g, int root)
{
    if (x->group != g) return root;
    return x->c.rank == root ? MPI_ROOT : MPI_PROC_NULL;
}

static void inter_allreduce(inter_t *x)
{
    ctx_t *c = &x->c;
    size_t n = c->n;
    buf_t s = buf_new(c, n), r = buf_new(c, n);
    int *want = want_new(n, 0);
    for (size_t i = 0; i < n; ++i) {
        s.host[i] = val(me(x), i, 11);
        for (int q = 0; q < x->remote; ++q) want[i] += val(x->rbase + q, i, 11);
    }
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Allreduce, Iallreduce, s.buf, r.buf, (int)n, MPI_INT, MPI_SUM, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, n);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* Ranks passing MPI_PROC_NULL must find their buffer untouched. */
static void inter_bcast(inter_t *x, int g, int root)
{
    ctx_t *c = &x->c;
    size_t n = c->n;
    const int arg = root_arg(x, g, root), root_w = (x->group == g ? x->lbase : x->rbase) + root;
    buf_t b = buf_new(c, n);
    int *want = want_new(n, SENTINEL);
    for (size_t i = 0; i < n; ++i) {
        if (MPI_ROOT == arg) b.host[i] = val(root_w, i, 12);
        if (MPI_PROC_NULL != arg) want[i] = val(root_w, i, 12);
    }
    buf_push(c, &b);
    RUN(c, Bcast, Ibcast, b.buf, (int)n, MPI_INT, arg, c->comm);
    buf_pull(c, &b);
    expect(c, b.host, want, n);
    free(want);
    buf_free(c, &b);
}

static void inter_reduce(inter_t *x, int g, int root)
{
    ctx_t *c = &x->c;
    size_t n = c->n;
    const int arg = root_arg(x, g, root);
    buf_t s = buf_new(c, n), r = buf_new(c, n);
    int *want = want_new(n, MPI_ROOT == arg ? 0 : SENTINEL);
    for (size_t i = 0; i < n; ++i) {
        s.host[i] = val(me(x), i, 13);
        for (int q = 0; MPI_ROOT == arg && q < x->remote; ++q) want[i] += val(x->rbase + q, i, 13);
    }
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Reduce, Ireduce, s.buf, r.buf, (int)n, MPI_INT, MPI_SUM, arg, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, n);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* gather to a root (g >= 0) or allgather (g < 0): block q of the result is
 * remote rank q's input. */
static void inter_gather(inter_t *x, int g, int root)
{
    ctx_t *c = &x->c;
    size_t n = c->n, all = n * (size_t)x->remote;
    const int arg = g < 0 ? 0 : root_arg(x, g, root);
    const int receives = g < 0 || MPI_ROOT == arg;
    buf_t s = buf_new(c, n), r = buf_new(c, all);
    int *want = want_new(all, SENTINEL);
    for (size_t i = 0; i < n; ++i) s.host[i] = val(me(x), i, 14);
    for (int q = 0; receives && q < x->remote; ++q)
        for (size_t i = 0; i < n; ++i) want[q * n + i] = val(x->rbase + q, i, 14);
    buf_push(c, &s);
    buf_push(c, &r);
    if (g < 0) RUN(c, Allgather, Iallgather, s.buf, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, c->comm);
    else RUN(c, Gather, Igather, s.buf, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, arg, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, all);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

static void inter_scatter(inter_t *x, int g, int root)
{
    ctx_t *c = &x->c;
    size_t n = c->n;
    const int arg = root_arg(x, g, root), root_w = (x->group == g ? x->lbase : x->rbase) + root;
    buf_t s = buf_new(c, n * (size_t)x->remote), r = buf_new(c, n);
    int *want = want_new(n, SENTINEL);
    for (int q = 0; MPI_ROOT == arg && q < x->remote; ++q)
        for (size_t i = 0; i < n; ++i) s.host[q * n + i] = val(pair(root_w, x->rbase + q), i, 15);
    for (size_t i = 0; x->group != g && i < n; ++i) want[i] = val(pair(root_w, me(x)), i, 15);
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Scatter, Iscatter, s.buf, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, arg, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, n);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* gatherv to a root / scatterv from it: remote rank q's block has n + q % 3
 * elements, at the root in reverse order with one-element gaps. */
static void inter_rooted_v(inter_t *x, int g, int root, int scatter)
{
    ctx_t *c = &x->c;
    const int arg = root_arg(x, g, root), root_w = (x->group == g ? x->lbase : x->rbase) + root;
    int *counts = malloc(x->remote * sizeof(int)), *displs = malloc(x->remote * sizeof(int));
    size_t len = 1;
    for (int q = x->remote - 1; q >= 0; --q) {
        counts[q] = c->n ? (int)c->n + q % 3 : 0;
        displs[q] = (int)len;
        len += (size_t)counts[q] + 1;
    }
    /* A leaf's own block: its local rank's count. */
    const size_t mine = c->n ? c->n + (size_t)(c->rank % 3) : 0;
    buf_t big = buf_new(c, len), small = buf_new(c, mine);
    int *want = want_new(MPI_ROOT == arg ? len : mine, SENTINEL);
    for (int q = 0; q < x->remote; ++q)
        for (int i = 0; i < counts[q]; ++i) {
            const int v = val(scatter ? pair(root_w, x->rbase + q) : x->rbase + q, i, 20);
            if (MPI_ROOT == arg && scatter) big.host[displs[q] + i] = v;
            if (MPI_ROOT == arg && !scatter) want[displs[q] + i] = v;
        }
    for (size_t i = 0; x->group != g && i < mine; ++i) {
        if (scatter) want[i] = val(pair(root_w, me(x)), i, 20);
        else small.host[i] = val(me(x), i, 20);
    }
    buf_push(c, &big);
    buf_push(c, &small);
    if (scatter) RUN(c, Scatterv, Iscatterv, big.buf, counts, displs, MPI_INT, small.buf, (int)mine, MPI_INT, arg, c->comm);
    else RUN(c, Gatherv, Igatherv, small.buf, (int)mine, MPI_INT, big.buf, counts, displs, MPI_INT, arg, c->comm);
    if (MPI_ROOT == arg && !scatter) {
        buf_pull(c, &big);
        expect(c, big.host, want, len);
    } else if (MPI_ROOT != arg && scatter) { /* a leaf's block; MPI_PROC_NULL ranks' buffers untouched */
        buf_pull(c, &small);
        expect(c, small.host, want, mine);
    }
    free(want);
    free(counts);
    free(displs);
    buf_free(c, &big);
    buf_free(c, &small);
}

static void inter_alltoall(inter_t *x)
{
    ctx_t *c = &x->c;
    size_t n = c->n, all = n * (size_t)x->remote;
    buf_t s = buf_new(c, all), r = buf_new(c, all);
    int *want = want_new(all, 0);
    for (int q = 0; q < x->remote; ++q)
        for (size_t i = 0; i < n; ++i) {
            s.host[q * n + i] = val(pair(me(x), x->rbase + q), i, 17);
            want[q * n + i] = val(pair(x->rbase + q, me(x)), i, 17);
        }
    buf_push(c, &s);
    buf_push(c, &r);
    RUN(c, Alltoall, Ialltoall, s.buf, (int)n, MPI_INT, r.buf, (int)n, MPI_INT, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, all);
    free(want);
    buf_free(c, &s);
    buf_free(c, &r);
}

/* Elements world rank src sends world rank dst: ragged, some zero. */
static int v_count(size_t n, int src, int dst) { return n ? (int)((n + (size_t)src + 2 * (size_t)dst) % (n + 4)) : 0; }

/* Blocks for the remote ranks in reverse order, one-element gaps between. */
static size_t v_layout(const inter_t *x, int *counts, int *displs, int as_src, int allgather)
{
    size_t at = 1;
    for (int q = x->remote - 1; q >= 0; --q) {
        const int peer = x->rbase + q;
        counts[q] = allgather ? v_count(x->c.n, peer, 0) : as_src ? v_count(x->c.n, me(x), peer) : v_count(x->c.n, peer, me(x));
        displs[q] = (int)at;
        at += (size_t)counts[q] + 1;
    }
    return at;
}

/* allgatherv (every remote rank's ragged block) or alltoallv. */
static void inter_vector(inter_t *x, int alltoallv)
{
    ctx_t *c = &x->c;
    int *sc = malloc(x->remote * sizeof(int)), *sd = malloc(x->remote * sizeof(int));
    int *rc = malloc(x->remote * sizeof(int)), *rd = malloc(x->remote * sizeof(int));
    size_t s_len = alltoallv ? v_layout(x, sc, sd, 1, 0) : (size_t)v_count(c->n, me(x), 0);
    size_t r_len = v_layout(x, rc, rd, 0, !alltoallv);
    buf_t s = buf_new(c, s_len), r = buf_new(c, r_len);
    int *want = want_new(r_len, SENTINEL);
    for (int q = 0; q < x->remote; ++q) {
        const int peer = x->rbase + q;
        for (int i = 0; alltoallv && i < sc[q]; ++i) s.host[sd[q] + i] = val(pair(me(x), peer), i, 18);
        for (int i = 0; i < rc[q]; ++i) want[rd[q] + i] = val(alltoallv ? pair(peer, me(x)) : peer, i, 18);
    }
    for (size_t i = 0; !alltoallv && i < s_len; ++i) s.host[i] = val(me(x), i, 18);
    buf_push(c, &s);
    buf_push(c, &r);
    if (alltoallv) RUN(c, Alltoallv, Ialltoallv, s.buf, sc, sd, MPI_INT, r.buf, rc, rd, MPI_INT, c->comm);
    else RUN(c, Allgatherv, Iallgatherv, s.buf, (int)s_len, MPI_INT, r.buf, rc, rd, MPI_INT, c->comm);
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

/* Both groups reduce vectors of T = n x (size of one group) x (size of the
 * other) elements; the other group's sum is scattered over this group: in
 * equal blocks (block) or in ragged ones (first block one longer, last one
 * shorter). */
static void inter_reduce_scatter(inter_t *x, int block)
{
    ctx_t *c = &x->c;
    const size_t total = c->n * (size_t)c->size * (size_t)x->remote;
    int *counts = malloc(c->size * sizeof(int));
    for (int k = 0; k < c->size; ++k) counts[k] = (int)(total / (size_t)c->size);
    if (!block && c->size > 1 && counts[0] > 0) counts[0]++, counts[c->size - 1]--;
    size_t off = 0, mine = (size_t)counts[c->rank];
    for (int k = 0; k < c->rank; ++k) off += (size_t)counts[k];
    buf_t s = buf_new(c, total), r = buf_new(c, mine);
    int *want = want_new(mine, 0);
    for (size_t j = 0; j < total; ++j) s.host[j] = val(me(x), j, 19);
    for (size_t i = 0; i < mine; ++i)
        for (int q = 0; q < x->remote; ++q) want[i] += val(x->rbase + q, off + i, 19);
    buf_push(c, &s);
    buf_push(c, &r);
    if (block) RUN(c, Reduce_scatter_block, Ireduce_scatter_block, s.buf, r.buf, counts[0], MPI_INT, MPI_SUM, c->comm);
    else RUN(c, Reduce_scatter, Ireduce_scatter, s.buf, r.buf, counts, MPI_INT, MPI_SUM, c->comm);
    buf_pull(c, &r);
    expect(c, r.host, want, mine);
    free(want);
    free(counts);
    buf_free(c, &s);
    buf_free(c, &r);
}

long check_intercomm(const check_memory_t *mem, const size_t *counts, int ncounts, const char *prog)
{
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    check_tally_t t = {0, 0};
    if (wsize >= 2) {
        const int half = wsize / 2, group = wrank >= half;
        MPI_Comm local, inter;
        MPI_Comm_split(MPI_COMM_WORLD, group, wrank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, group ? 0 : half, 41, &inter);
        MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
        inter_t x = {{inter, "inter", 0, 0, mem, &t, 0, 0, 0, ""}, group, 0, group ? half : 0, group ? 0 : half};
        MPI_Comm_rank(inter, &x.c.rank);
        MPI_Comm_size(inter, &x.c.size);
        MPI_Comm_remote_size(inter, &x.remote);
        const int last[2] = {half - 1, wsize - half - 1};
        for (int k = 0; k < ncounts; ++k)
            for (x.c.nb = 0; x.c.nb <= 1; ++x.c.nb) {
                x.c.n = counts[k];
                inter_allreduce(&x);
                for (int g = 0; g < 2; ++g) {
                    inter_bcast(&x, g, g ? last[g] : 0);
                    inter_reduce(&x, g, last[g]);
                    inter_gather(&x, g, 0);
                    inter_scatter(&x, g, last[g]);
                    inter_rooted_v(&x, g, 0, 0);
                    inter_rooted_v(&x, g, last[g], 1);
                }
                inter_gather(&x, -1, 0);
                inter_alltoall(&x);
                inter_vector(&x, 0);
                inter_vector(&x, 1);
                inter_reduce_scatter(&x, 1);
                inter_reduce_scatter(&x, 0);
                RUN(&x.c, Barrier, Ibarrier, inter);
            }
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
    }
    long sums[2] = {t.checks, t.failures}, totals[2];
    MPI_Allreduce(sums, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("%s: intercommunicator %d+%d ranks, memory %s: %ld checks, %ld failures\n", prog, wsize / 2,
               wsize - wsize / 2, mem->name, totals[0], totals[1]);
    return totals[1];
}
