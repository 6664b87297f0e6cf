/*
 * Soak: a seeded random sequence of collectives through loom, every result
 * compared with a host reference, communicators created and freed along the
 * way, memory (host RSS, GPU) reported at the start and the end.
 *
 *   soak [-s SEED] [-n CALLS] [-M MAXBYTES] [-m device|host|mixed|kinds] [-t SECONDS]
 *
 * Collectives: allreduce, reduce, bcast, scan, exscan, allgather(v),
 * reduce_scatter(_block), alltoall(v) (ragged pair counts for alltoallv),
 * gather(v), scatter(v) (ragged blocks at displacements in reversed rank
 * order).
 * Every rank draws the same sequence from SEED (collective, datatype, op,
 * count log-uniform in 0..MAXBYTES, root, in place or not, blocking or not,
 * communicator churn); with -m mixed each rank also picks host or device
 * memory per call from SEED and its rank. With -m kinds each rank allocates
 * its send and its receive buffer for every call and frees them after it,
 * each of a kind it draws for that buffer (memory_kinds.h: cudaMalloc, a
 * cudaMallocAsync pool, managed, VMM without a shareable handle, pinned or
 * pageable host), often at an element offset into the allocation: freed
 * addresses come back with other allocations behind them, as an
 * application's allocator hands them out. A failing call prints its index and
 * the seed, which reproduce it. Values are small integers, so every result is
 * exact in every type. With -t the run ends early once SECONDS have passed
 * (rank 0's clock, checked every 100 calls; every rank stops at the same call).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi/rss.h"
#include "memory_kinds.h"

/* splitmix64: the same stream on every rank. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(uint64_t *s, size_t n) { return n ? (size_t)(next(s) % n) : 0; }

typedef struct {
    const char *name;
    MPI_Datatype mpi;
    size_t size;
    int is_float, is_signed;
} type_t;
static const type_t types[] = {
    {"char", MPI_CHAR, 1, 0, 1},      {"unsigned_char", MPI_UNSIGNED_CHAR, 1, 0, 0},
    {"short", MPI_SHORT, 2, 0, 1},    {"int", MPI_INT, 4, 0, 1},
    {"unsigned", MPI_UNSIGNED, 4, 0, 0}, {"long", MPI_LONG, 8, 0, 1},
    {"float", MPI_FLOAT, 4, 1, 1},    {"double", MPI_DOUBLE, 8, 1, 1},
};
enum { NTYPES = sizeof(types) / sizeof(types[0]) };
enum { OP_SUM, OP_MIN, OP_MAX, OP_BOR, NOPS };
static MPI_Op mpi_op(int o)
{
    MPI_Op ops[NOPS] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_BOR};
    return ops[o];
}
/* From C_ALLGATHER on, counts are per rank (a block per peer). */
enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_SCAN, C_EXSCAN, C_ALLGATHER, C_ALLGATHERV, C_RSB, C_RS, C_ALLTOALL, C_ALLTOALLV,
       C_GATHER, C_SCATTER, C_GATHERV, C_SCATTERV, NCOLLS };
static const char *const cnames[NCOLLS] = {"allreduce", "reduce", "bcast", "scan", "exscan", "allgather", "allgatherv",
                                           "reduce_scatter_block", "reduce_scatter", "alltoall", "alltoallv",
                                           "gather", "scatter", "gatherv", "scatterv"};

/* Rank's element i: small, negative too where the type is signed and the op
 * arithmetic (|sum| <= 4 x ranks: exact in char for up to 31 ranks). */
static const type_t *cur;
static int64_t val(int rank, size_t i, int o)
{
    int64_t h = (int64_t)((i * 7 + (size_t)rank * 13) % 9);
    return o == OP_BOR || !cur->is_signed ? h : h - 4;
}
static int64_t get(const type_t *t, const char *p, size_t i)
{
    p += i * t->size;
    if (t->is_float) return t->size == 4 ? (int64_t) * (const float *)p : (int64_t) * (const double *)p;
    switch (t->size) {
    case 1: return t->is_signed ? (int64_t) * (const int8_t *)p : (int64_t) * (const uint8_t *)p;
    case 2: return *(const int16_t *)p;
    case 4: return t->is_signed ? (int64_t) * (const int32_t *)p : (int64_t) * (const uint32_t *)p;
    default: return *(const int64_t *)p;
    }
}
static void set(const type_t *t, char *p, size_t i, int64_t v)
{
    p += i * t->size;
    if (t->is_float) {
        if (t->size == 4) *(float *)p = (float)v;
        else *(double *)p = (double)v;
        return;
    }
    switch (t->size) {
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: *(uint16_t *)p = (uint16_t)v; break;
    case 4: *(uint32_t *)p = (uint32_t)v; break;
    default: *(int64_t *)p = v; break;
    }
}
static int64_t fold(int o, int64_t a, int64_t b)
{
    switch (o) {
    case OP_SUM: return a + b;
    case OP_MIN: return a < b ? a : b;
    case OP_MAX: return a > b ? a : b;
    default: return a | b;
    }
}
/* The reduction of element i over n ranks, as the type stores it. */
static int64_t reduced(const type_t *t, int o, int n, size_t i)
{
    int64_t w = val(0, i, o);
    for (int q = 1; q < n; ++q) w = fold(o, w, val(q, i, o));
    char tmp[8];
    set(t, tmp, 0, w);
    return get(t, tmp, 0);
}
static int64_t stored(const type_t *t, int64_t v)
{
    char tmp[8];
    set(t, tmp, 0, v);
    return get(t, tmp, 0);
}

/* Every value above repeats every 9 elements (val's period), so a buffer of
 * them is its first 9 elements copied forward: the harness fills and checks
 * at memcpy / memcmp speed instead of element by element (a 64 MiB char call
 * would otherwise cost the harness a second). */
enum { PERIOD = 9 };
typedef int64_t (*element_fn)(const type_t *t, int o, int who, size_t i);
static int64_t of_rank(const type_t *t, int o, int rank, size_t i) { return stored(t, val(rank, i, o)); }
static int64_t of_reduction(const type_t *t, int o, int n, size_t i) { return reduced(t, o, n, i); }
/* p[0..count): element j is f(t, o, who, first + j). */
static void tile(const type_t *t, char *p, size_t count, element_fn f, int o, int who, size_t first)
{
    size_t done = count < PERIOD ? count : PERIOD;
    for (size_t j = 0; j < done; ++j) set(t, p, j, f(t, o, who, first + j));
    for (; done < count; done *= 2) /* done stays a multiple of the period */
        memcpy(p + done * t->size, p, (count - done < done ? count - done : done) * t->size);
}

typedef struct {
    int on_host;
    char *dev[2], *hostbuf[2]; /* send, receive */
    int kinds;                 /* -m kinds: this call's buffers are k[] */
    kind_buf_t k[2];
    uint64_t *mine;            /* this rank's own draws */
    int device;
    char *ref;                 /* staging for fill and check */
    char *want;                /* the expected receive buffer */
    size_t bytes;
    int pinned;                /* ref and want from cudaMallocHost */
} bufs_t;

static char *buf(bufs_t *b, int which)
{
    if (b->kinds) return b->k[which].at;
    return b->on_host ? b->hostbuf[which] : b->dev[which];
}
static int on_host(const bufs_t *b, int which) { return b->kinds ? kind_on_host(b->k[which].kind) : b->on_host; }
static void put(bufs_t *b, int which, size_t at, const char *src, size_t n)
{
    if (!n) return;
    if (on_host(b, which)) memcpy(buf(b, which) + at, src, n);
    else cudaMemcpy(buf(b, which) + at, src, n, cudaMemcpyHostToDevice);
}
static void take(bufs_t *b, int which, size_t at, char *dst, size_t n)
{
    if (!n) return;
    if (on_host(b, which)) memcpy(dst, buf(b, which) + at, n);
    else cudaMemcpy(dst, buf(b, which) + at, n, cudaMemcpyDeviceToHost);
}
/* -m kinds: this call's send and receive buffers, of `sbytes` and `rbytes`,
 * a kind drawn per buffer (device twice as often as each other kind), half
 * of them at an element offset into their allocation; each ends where its
 * allocation ends, so that an access past the call's bytes leaves it. */
static int kinds_alloc(bufs_t *b, size_t sbytes, size_t rbytes, size_t es, int rank)
{
    for (int which = 0; which < 2; ++which) {
        const size_t bytes = which ? rbytes : sbytes;
        size_t kind = below(b->mine, NKINDS + 1);
        if (kind >= NKINDS) kind = KIND_DEVICE;
        const size_t off = below(b->mine, 2) ? es * below(b->mine, 1024) : 0;
        if (kind_alloc(&b->k[which], (int)kind, bytes, off, b->device)) {
            fprintf(stderr, "soak: rank %d: %s buffer of %zu bytes (+%zu) not allocated\n", rank, kind_names[kind],
                    bytes, off);
            return 1;
        }
    }
    return 0;
}

/* Rank 0's wall time by part: the collective itself (call to completion),
 * the harness's fill and check, communicator churn. */
static double t_coll, t_harness, t_churn;

/* One call; returns wrong elements (+1 for an error code). */
static long one_call(MPI_Comm comm, bufs_t *b, uint64_t *rng, size_t maxbytes, long index, int *coll_out)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    const int coll = (int)below(rng, NCOLLS);
    const type_t *t = &types[below(rng, NTYPES)];
    cur = t;
    int o = (int)below(rng, NOPS);
    if (t->is_float && o == OP_BOR) o = OP_SUM;
    /* log-uniform bytes in [0, maxbytes] for the largest buffer */
    const int lg = (int)below(rng, 64 - __builtin_clzll((unsigned long long)maxbytes) + 1);
    size_t total = lg ? ((size_t)1 << (lg - 1)) + below(rng, (size_t)1 << (lg - 1)) : 0;
    if (total > maxbytes) total = maxbytes;
    size_t count = total / t->size / (coll >= C_ALLGATHER ? (size_t)n : 1);
    const int root = (int)below(rng, (size_t)n), ip = (int)below(rng, 2), nb = (int)below(rng, 4) == 0;
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    size_t all = 0;
    for (int q = 0; q < n; ++q) { /* ragged: 0..2x count */
        const int ragged = coll == C_ALLGATHERV || coll == C_RS || coll == C_GATHERV || coll == C_SCATTERV;
        counts[q] = ragged ? (int)below(rng, 2 * count + 1) : (int)count;
        if (coll >= C_ALLGATHER && counts[q] * t->size * (size_t)n > maxbytes) counts[q] = (int)count;
        displs[q] = (int)all;
        all += (size_t)counts[q];
    }
    /* alltoallv: pair[s * n + d] elements from rank s to rank d (every rank
     * draws the whole matrix; symmetric in place, as MPI requires there, and
     * without empty pairs: Open MPI 4.1's own in-place alltoallv, which
     * all-host calls go to, hangs a later call after a 0-byte pair, with or
     * without loom (open-mpi/ompi#12280; seed 2, np 2, -m host, --mca coll ^loom);
     * this rank's send and receive layouts, blocks back to back in rank order
     * or, for alltoallv half the time, in reversed rank order (in place: the
     * receive layout is the send layout). */
    int *pair = malloc(sizeof(int) * (size_t)n * (size_t)n), *scnt = malloc(sizeof(int) * (size_t)n),
        *sdsp = malloc(sizeof(int) * (size_t)n), *rcnt = malloc(sizeof(int) * (size_t)n), *rdsp = malloc(sizeof(int) * (size_t)n);
    size_t sall = 0, rall = 0;
    for (int k = 0; k < n * n; ++k) pair[k] = coll == C_ALLTOALLV ? (int)below(rng, 2 * count + 1) : (int)count;
    for (int k = 0; coll == C_ALLTOALLV && ip && k < n * n; ++k) { /* row-major: a mirror is set before it is read */
        const int from = k / n, to = k % n;
        pair[k] = from <= to ? (pair[k] ? pair[k] : 1) : pair[to * n + from];
    }
    const int reversed = coll == C_ALLTOALLV && below(rng, 2);
    for (int j = 0; j < n; ++j) {
        const int q = reversed ? n - 1 - j : j;
        scnt[q] = pair[rank * n + q], rcnt[q] = pair[q * n + rank];
        sdsp[q] = (int)sall, rdsp[q] = (int)rall;
        sall += (size_t)scnt[q], rall += (size_t)rcnt[q];
    }
    /* gatherv, scatterv: the root's blocks back to back in reversed rank order */
    int *rev = malloc(sizeof(int) * (size_t)n);
    for (int q = n - 1, at = 0; q >= 0; at += counts[q], --q) rev[q] = at;
    *coll_out = coll;
    MPI_Datatype dt = t->mpi;
    MPI_Op op = mpi_op(o);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    size_t check_n = 0, check_at = 0; /* elements of the receive buffer to check */
    const size_t es = t->size;
    char *r = b->ref;
    if (b->kinds) { /* each buffer just the elements the call may touch: it ends where its allocation ends */
        size_t snd = count, rcv = count; /* allreduce, reduce, scan, exscan, bcast */
        const int at_root = rank == root;
        switch (coll) {
        case C_GATHER: rcv = at_root ? (size_t)n * count : 0; break;
        case C_SCATTER: snd = at_root ? (size_t)n * count : 0; break;
        case C_GATHERV: snd = (size_t)counts[rank], rcv = at_root ? all : 0; break;
        case C_SCATTERV: snd = at_root ? all : 0, rcv = (size_t)counts[rank]; break;
        case C_ALLGATHER: case C_ALLGATHERV: snd = (size_t)counts[rank], rcv = all; break;
        case C_ALLTOALL: case C_ALLTOALLV: snd = sall, rcv = rall; break;
        case C_RSB: case C_RS: snd = all, rcv = ip ? all : (size_t)counts[rank]; break; /* in place: the input */
        default: break;
        }
        if (kinds_alloc(b, snd * es, rcv * es, es, rank)) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* fill */
    switch (coll) {
    case C_ALLREDUCE: case C_REDUCE: case C_SCAN: case C_EXSCAN:
        tile(t, r, count, of_rank, o, rank, 0);
        put(b, ip && (coll != C_REDUCE || rank == root) ? 1 : 0, 0, r, count * es);
        break;
    case C_GATHER: /* in place: the root's block already where it goes */
        tile(t, r, count, of_rank, o, rank, 0);
        put(b, ip && rank == root ? 1 : 0, ip && rank == root ? (size_t)rank * count * es : 0, r, count * es);
        break;
    case C_SCATTER: /* the root's block q: rank root + 16 q's sequence */
        for (int q = 0; q < n && rank == root; ++q) tile(t, r + (size_t)q * count * es, count, of_rank, o, root + 16 * q, 0);
        if (rank == root) put(b, 0, 0, r, (size_t)n * count * es);
        break;
    case C_BCAST:
        tile(t, r, count, of_rank, o, root, 0);
        if (rank == root) put(b, 1, 0, r, count * es);
        break;
    case C_GATHERV: /* in place: the root's block already at its displacement */
        tile(t, r, (size_t)counts[rank], of_rank, o, rank, 0);
        put(b, ip && rank == root ? 1 : 0, ip && rank == root ? (size_t)rev[rank] * es : 0, r, (size_t)counts[rank] * es);
        break;
    case C_SCATTERV:
        for (int q = 0; q < n && rank == root; ++q)
            tile(t, r + (size_t)rev[q] * es, (size_t)counts[q], of_rank, o, root + 16 * q, 0);
        if (rank == root) put(b, 0, 0, r, all * es);
        break;
    case C_ALLGATHER: case C_ALLGATHERV: {
        const size_t mine = (size_t)counts[rank];
        tile(t, r, mine, of_rank, o, rank, 0);
        put(b, ip ? 1 : 0, ip ? (size_t)displs[rank] * es : 0, r, mine * es);
        break;
    }
    case C_ALLTOALL: case C_ALLTOALLV: /* block q: elements [rank x count, ..) of this rank's sequence for q */
        for (int q = 0; q < n; ++q) tile(t, r + (size_t)sdsp[q] * es, (size_t)scnt[q], of_rank, o, rank + 16 * q, 0);
        put(b, ip ? 1 : 0, 0, r, sall * es);
        break;
    default: /* reduce_scatter(_block): the whole input, back to back */
        tile(t, r, all, of_rank, o, rank, 0);
        put(b, ip ? 1 : 0, 0, r, all * es);
        break;
    }
    void *s = buf(b, 0), *d = buf(b, 1);
    const double t_call = MPI_Wtime();
    switch (coll) {
    case C_ALLREDUCE:
        rc = nb ? MPI_Iallreduce(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm, &req)
                : MPI_Allreduce(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm);
        check_n = count;
        break;
    case C_REDUCE: {
        const void *src = ip && rank == root ? MPI_IN_PLACE : s;
        rc = nb ? MPI_Ireduce(src, d, (int)count, dt, op, root, comm, &req)
                : MPI_Reduce(src, d, (int)count, dt, op, root, comm);
        check_n = rank == root ? count : 0;
        break;
    }
    case C_BCAST:
        rc = nb ? MPI_Ibcast(d, (int)count, dt, root, comm, &req) : MPI_Bcast(d, (int)count, dt, root, comm);
        check_n = count;
        break;
    case C_SCAN:
        rc = nb ? MPI_Iscan(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm, &req)
                : MPI_Scan(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm);
        check_n = count;
        break;
    case C_EXSCAN: /* rank 0's output is undefined */
        rc = nb ? MPI_Iexscan(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm, &req)
                : MPI_Exscan(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm);
        check_n = rank ? count : 0;
        break;
    case C_GATHER: {
        const void *src = ip && rank == root ? MPI_IN_PLACE : s;
        rc = nb ? MPI_Igather(src, (int)count, dt, d, (int)count, dt, root, comm, &req)
                : MPI_Gather(src, (int)count, dt, d, (int)count, dt, root, comm);
        check_n = rank == root ? (size_t)n * count : 0;
        break;
    }
    case C_SCATTER: {
        void *dst = ip && rank == root ? MPI_IN_PLACE : d;
        rc = nb ? MPI_Iscatter(s, (int)count, dt, dst, (int)count, dt, root, comm, &req)
                : MPI_Scatter(s, (int)count, dt, dst, (int)count, dt, root, comm);
        check_n = ip && rank == root ? 0 : count;
        break;
    }
    case C_GATHERV: {
        const void *src = ip && rank == root ? MPI_IN_PLACE : s;
        rc = nb ? MPI_Igatherv(src, counts[rank], dt, d, counts, rev, dt, root, comm, &req)
                : MPI_Gatherv(src, counts[rank], dt, d, counts, rev, dt, root, comm);
        check_n = rank == root ? all : 0;
        break;
    }
    case C_SCATTERV: {
        void *dst = ip && rank == root ? MPI_IN_PLACE : d;
        rc = nb ? MPI_Iscatterv(s, counts, rev, dt, dst, counts[rank], dt, root, comm, &req)
                : MPI_Scatterv(s, counts, rev, dt, dst, counts[rank], dt, root, comm);
        check_n = ip && rank == root ? 0 : (size_t)counts[rank];
        break;
    }
    case C_ALLGATHER:
        rc = nb ? MPI_Iallgather(ip ? MPI_IN_PLACE : s, (int)count, dt, d, (int)count, dt, comm, &req)
                : MPI_Allgather(ip ? MPI_IN_PLACE : s, (int)count, dt, d, (int)count, dt, comm);
        check_n = all;
        break;
    case C_ALLGATHERV:
        rc = nb ? MPI_Iallgatherv(ip ? MPI_IN_PLACE : s, counts[rank], dt, d, counts, displs, dt, comm, &req)
                : MPI_Allgatherv(ip ? MPI_IN_PLACE : s, counts[rank], dt, d, counts, displs, dt, comm);
        check_n = all;
        break;
    case C_RSB:
        rc = nb ? MPI_Ireduce_scatter_block(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm, &req)
                : MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : s, d, (int)count, dt, op, comm);
        check_n = count;
        check_at = (size_t)rank * count;
        break;
    case C_ALLTOALL: /* in place: the send blocks are where the receive blocks go */
        rc = nb ? MPI_Ialltoall(ip ? MPI_IN_PLACE : s, (int)count, dt, d, (int)count, dt, comm, &req)
                : MPI_Alltoall(ip ? MPI_IN_PLACE : s, (int)count, dt, d, (int)count, dt, comm);
        check_n = rall;
        break;
    case C_ALLTOALLV: /* in place: the counts are symmetric */
        rc = nb ? MPI_Ialltoallv(ip ? MPI_IN_PLACE : s, scnt, sdsp, dt, d, rcnt, rdsp, dt, comm, &req)
                : MPI_Alltoallv(ip ? MPI_IN_PLACE : s, scnt, sdsp, dt, d, rcnt, rdsp, dt, comm);
        check_n = rall;
        break;
    default:
        rc = nb ? MPI_Ireduce_scatter(ip ? MPI_IN_PLACE : s, d, counts, dt, op, comm, &req)
                : MPI_Reduce_scatter(ip ? MPI_IN_PLACE : s, d, counts, dt, op, comm);
        check_n = (size_t)counts[rank];
        check_at = (size_t)displs[rank];
        break;
    }
    if (rc == MPI_SUCCESS && nb) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    t_coll += MPI_Wtime() - t_call;
    long bad = rc != MPI_SUCCESS;
    take(b, 1, 0, r, check_n * es);
    char *w = b->want;
    if (coll == C_BCAST) tile(t, w, check_n, of_rank, o, root, 0);
    else if (coll == C_ALLGATHER || coll == C_ALLGATHERV)
        for (int q = 0; q < n; ++q) tile(t, w + (size_t)displs[q] * es, (size_t)counts[q], of_rank, o, q, 0);
    else if (coll == C_ALLTOALL || coll == C_ALLTOALLV)
        for (int q = 0; q < n; ++q) tile(t, w + (size_t)rdsp[q] * es, (size_t)rcnt[q], of_rank, o, q + 16 * rank, 0);
    else if (coll == C_GATHER)
        for (int q = 0; q < n && check_n; ++q) tile(t, w + (size_t)q * count * es, count, of_rank, o, q, 0);
    else if (coll == C_SCATTER || coll == C_SCATTERV) tile(t, w, check_n, of_rank, o, root + 16 * rank, 0);
    else if (coll == C_GATHERV)
        for (int q = 0; q < n && check_n; ++q) tile(t, w + (size_t)rev[q] * es, (size_t)counts[q], of_rank, o, q, 0);
    else if (coll == C_SCAN || coll == C_EXSCAN) /* the fold over ranks 0..rank (exscan: ..rank - 1) */
        tile(t, w, check_n, of_reduction, o, coll == C_SCAN ? rank + 1 : rank, 0);
    else tile(t, w, check_n, of_reduction, o, n, check_at);
    if (!bad && 0 != memcmp(r, w, check_n * es)) /* exact in every type: say where */
        for (size_t i = 0; i < check_n; ++i)
            if (0 != memcmp(r + i * es, w + i * es, es)) {
                fprintf(stderr, "soak: call %ld: %s %s op %d count %zu root %d in_place %d %s: rank %d element %zu = "
                        "%lld, want %lld\n", index, cnames[coll], t->name, o, count, root, ip,
                        nb ? "non-blocking" : "blocking", rank, i, (long long)get(t, r, i), (long long)get(t, w, i));
                ++bad;
                break;
            }
    if (rc != MPI_SUCCESS) fprintf(stderr, "soak: call %ld: %s: rank %d: error %d\n", index, cnames[coll], rank, rc);
    if (b->kinds && (bad || index < 3))
        fprintf(stderr, "soak: call %ld: rank %d: send %s, receive %s\n", index, rank, kind_names[b->k[0].kind],
                kind_names[b->k[1].kind]);
    if (b->kinds) kind_free(&b->k[0]), kind_free(&b->k[1]);
    free(rev);
    free(counts);
    free(displs);
    free(pair);
    free(scnt);
    free(sdsp);
    free(rcnt);
    free(rdsp);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    uint64_t seed = 1;
    long calls = 1000;
    size_t maxbytes = (size_t)64 << 20;
    const char *mode = "device";
    double seconds = 1e12;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "-s")) seed = strtoull(argv[a + 1], NULL, 0);
        else if (!strcmp(argv[a], "-n")) calls = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-M")) maxbytes = strtoull(argv[a + 1], NULL, 0);
        else if (!strcmp(argv[a], "-m")) mode = argv[a + 1];
        else if (!strcmp(argv[a], "-t")) seconds = atof(argv[a + 1]);
    }
    int wrank, wsize, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const int host_only = !strcmp(mode, "host"), mixed = !strcmp(mode, "mixed"), kinds = !strcmp(mode, "kinds");
    if (!host_only && !mixed && !kinds && strcmp(mode, "device")) {
        if (wrank == 0) fprintf(stderr, "soak: -m %s: not device, host, mixed or kinds\n", mode);
        MPI_Finalize();
        return 2;
    }
    bufs_t b;
    memset(&b, 0, sizeof(b));
    b.kinds = kinds;
    if (!host_only) {
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            if (wrank == 0) fprintf(stderr, "soak: no GPU here; -m %s needs one (-m host runs without)\n", mode);
            MPI_Finalize();
            return 77; /* skipped */
        }
        b.device = (lr ? atoi(lr) : wrank) % ndev;
        cudaSetDevice(b.device);
        cudaFree(0); /* the primary context current: VMM allocations need it */
    }
    b.bytes = maxbytes * 2 + 64; /* ragged blocks up to 2x */
    /* The harness's own staging is pinned where a GPU is used: its copies to
     * and from device buffers then run at copy-engine speed, which keeps 10^5
     * calls up to 64 MiB inside one device call. The application's host
     * buffers (hostbuf) stay pageable malloc memory, as users' are. */
    if (host_only || cudaMallocHost((void **)&b.ref, b.bytes) != cudaSuccess ||
        cudaMallocHost((void **)&b.want, b.bytes) != cudaSuccess) {
        b.pinned = 0;
        b.ref = malloc(b.bytes);
        b.want = malloc(b.bytes);
    } else b.pinned = 1;
    for (int k = 0; k < 2 && !kinds; ++k) { /* -m kinds allocates per call instead */
        b.hostbuf[k] = malloc(b.bytes);
        if (!host_only && cudaMalloc((void **)&b.dev[k], b.bytes) != cudaSuccess) {
            fprintf(stderr, "soak: rank %d: cudaMalloc of %zu bytes failed\n", wrank, b.bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    /* Touched now, so that the RSS reported at the start already holds the
     * harness's own buffers (they would otherwise grow it as calls reach
     * larger sizes, which looked like a leak: 120 -> 470 MiB at 64 MiB). */
    if (!b.ref || !b.want || (!kinds && (!b.hostbuf[0] || !b.hostbuf[1]))) {
        fprintf(stderr, "soak: rank %d: out of host memory\n", wrank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(b.ref, 0, b.bytes);
    memset(b.want, 0, b.bytes);
    for (int k = 0; k < 2 && !kinds; ++k) memset(b.hostbuf[k], 0, b.bytes);
    size_t gfree0 = 0, gtotal = 0;
    if (!host_only) cudaMemGetInfo(&gfree0, &gtotal);
    const long rss0 = rss_kib();
    if (wrank == 0)
        printf("soak: seed %llu, %ld calls, up to %zu bytes, memory %s, %d ranks\n", (unsigned long long)seed, calls,
               maxbytes, mode, wsize);
    fflush(stdout);
    const double t0 = MPI_Wtime();
    uint64_t rng = seed, mine = seed ^ (0x1234567ull * (uint64_t)(wrank + 1));
    b.mine = &mine;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    long bad = 0, per_coll[NCOLLS] = {0}, churn = 0, done = 0;
    for (long i = 0; i < calls; ++i, ++done) {
        if (i % 100 == 0 && i > 0 && seconds < 1e12) {
            int stop = MPI_Wtime() - t0 >= seconds;
            MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (stop) break;
        }
        /* communicator churn: now and then a dup or a split replaces comm */
        const double t_step = MPI_Wtime();
        if (below(&rng, 50) == 0) {
            MPI_Comm next;
            if (below(&rng, 2)) MPI_Comm_dup(comm, &next);
            else /* world in a rotated rank order */
                MPI_Comm_split(MPI_COMM_WORLD, 0, (wrank + (int)below(&rng, (size_t)wsize)) % wsize, &next);
            MPI_Comm_free(&comm);
            comm = next;
            ++churn;
        }
        const double t_one = MPI_Wtime();
        t_churn += t_one - t_step;
        b.on_host = host_only || (mixed && below(&mine, 2));
        int coll;
        const double coll_before = t_coll;
        bad += one_call(comm, &b, &rng, maxbytes, i, &coll);
        t_harness += MPI_Wtime() - t_one - (t_coll - coll_before);
        per_coll[coll]++;
        if (wrank == 0 && calls >= 100 && (i + 1) % (calls / 100) == 0) { /* progress and memory over the run */
            size_t gfree = 0;
            if (!host_only) cudaMemGetInfo(&gfree, &gtotal);
            printf("soak: after %ld calls (%.0f s): rank 0 host RSS %ld KiB, GPU memory in use %+.1f MiB, %ld wrong "
                   "so far\n", i + 1, MPI_Wtime() - t0, rss_kib(), ((double)gfree0 - (double)gfree) / 1048576.0, bad);
            fflush(stdout);
        }
    }
    MPI_Comm_free(&comm);
    long totals[1] = {bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    size_t gfree1 = 0;
    if (!host_only) cudaMemGetInfo(&gfree1, &gtotal);
    const long rss1 = rss_kib();
    if (wrank == 0) {
        printf("soak: %ld calls x %d ranks in %.0f s, %ld communicators replaced, %ld wrong elements or errors; per "
               "collective:", done, wsize, MPI_Wtime() - t0, churn, totals[0]);
        for (int c = 0; c < NCOLLS; ++c) printf(" %s %ld", cnames[c], per_coll[c]);
        printf("\nsoak: rank 0's time: collectives %.1f s, harness fill and check %.1f s, communicator churn %.1f s\n",
               t_coll, t_harness, t_churn);
        printf("soak: rank 0 host RSS %ld -> %ld KiB, GPU memory in use %+.1f MiB (seed %llu)\n", rss0, rss1,
               ((double)gfree0 - (double)gfree1) / 1048576.0, (unsigned long long)seed);
    }
    for (int k = 0; k < 2; ++k) {
        free(b.hostbuf[k]);
        if (!host_only && !kinds) cudaFree(b.dev[k]);
    }
    if (b.pinned) {
        cudaFreeHost(b.ref);
        cudaFreeHost(b.want);
    } else {
        free(b.ref);
        free(b.want);
    }
    MPI_Finalize();
    return totals[0] ? 1 : 0;
}
