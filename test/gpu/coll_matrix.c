/*
 * GPU correctness matrix of the reduction and gather collectives through loom:
 * MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Allgatherv (ragged counts, some
 * 0, blocks in reversed order with gaps that must stay untouched),
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal and ragged counts),
 * MPI_Allreduce, MPI_Scan and MPI_Exscan (and MPI_Reduce_local), x every predefined
 * type loom maps x every op MPI defines on it x counts {0, 1, 7, 1023,
 * 2^20+3} x in place / not x roots {0, last, middle} x communicators {world,
 * split, dup, reversed, odd-sized split}. Every element is compared with a
 * host reference. Inputs are small integers, so every result is exact.
 *
 *   coll_matrix [-q] [-m device|host|mixed|alternate]
 * -m mixed: even ranks pass host buffers, odd ranks device buffers (MPI
 * allows it per call); host: every rank host memory (runs without a GPU);
 * alternate: every rank host memory for even types, device memory for odd
 * ones (the same kind on every rank in each call: what
 * coll_loom_uniform_memory promises).
 * Without -q, 2^28-byte broadcast and reduce_scatter_block run on world too.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "large_count.h"

typedef enum { K_INT, K_UINT, K_FLOAT, K_BOOL } kind_t;
typedef struct {
    const char *name;
    MPI_Datatype mpi;
    size_t size;
    kind_t kind;
    int arith, bitwise, logical; /* op classes MPI defines on the type */
} type_t;

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, OP_LAND, OP_LOR, OP_LXOR, NOPS };
static const char *const opnames[NOPS] = {"sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor"};
static MPI_Op mpi_op(int o)
{
    MPI_Op ops[NOPS] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR};
    return ops[o];
}
static int op_valid(const type_t *t, int o)
{
    return o <= OP_MAX ? t->arith : o <= OP_BXOR ? t->bitwise : t->logical;
}

static int64_t get(const type_t *t, const void *p, size_t i)
{
    const char *b = (const char *)p + i * t->size;
    if (t->kind == K_FLOAT) return t->size == 4 ? (int64_t) * (const float *)b : (int64_t) * (const double *)b;
    if (t->kind == K_INT) {
        switch (t->size) {
        case 1: return *(const int8_t *)b;
        case 2: return *(const int16_t *)b;
        case 4: return *(const int32_t *)b;
        default: return *(const int64_t *)b;
        }
    }
    switch (t->size) {
    case 1: return *(const uint8_t *)b;
    case 2: return *(const uint16_t *)b;
    case 4: return *(const uint32_t *)b;
    default: return (int64_t) * (const uint64_t *)b;
    }
}

static void set(const type_t *t, void *p, size_t i, int64_t v)
{
    char *b = (char *)p + i * t->size;
    if (t->kind == K_FLOAT) {
        if (t->size == 4) *(float *)b = (float)v;
        else *(double *)b = (double)v;
        return;
    }
    switch (t->size) {
    case 1: *(uint8_t *)b = (uint8_t)v; break;
    case 2: *(uint16_t *)b = (uint16_t)v; break;
    case 4: *(uint32_t *)b = (uint32_t)v; break;
    default: *(uint64_t *)b = (uint64_t)v; break;
    }
}

/* Small values: sums, products (of 1s and 2s) and extrema stay exact. */
static int64_t input(const type_t *t, int o, int rank, size_t i)
{
    int h = (int)((i * 31 + (size_t)rank * 17) % 11);
    if (t->kind == K_BOOL || o >= OP_LAND) return h % 3 == 0 ? 0 : (t->kind == K_BOOL ? 1 : h);
    if (o == OP_PROD) return 1 + (h & 1);
    return t->kind == K_INT || t->kind == K_FLOAT ? h - 5 : h;
}

static int64_t fold(int o, int64_t a, int64_t b)
{
    switch (o) {
    case OP_SUM: return a + b;
    case OP_PROD: return a * b;
    case OP_MIN: return a < b ? a : b;
    case OP_MAX: return a > b ? a : b;
    case OP_BAND: return a & b;
    case OP_BOR: return a | b;
    case OP_BXOR: return a ^ b;
    case OP_LAND: return a && b;
    case OP_LOR: return a || b;
    default: return !a != !b;
    }
}

/* The reference, wrapped to the type as the GPU stores it. */
static int64_t want_reduced(const type_t *t, int o, int n, size_t i)
{
    int64_t w = input(t, o, 0, i);
    for (int q = 1; q < n; ++q) w = fold(o, w, input(t, o, q, i));
    char tmp[8];
    set(t, tmp, 0, w);
    return get(t, tmp, 0);
}

typedef struct {
    MPI_Comm comm;
    const char *cname;
    int rank, size;
    int on_host;    /* this rank passes host buffers */
    void *ds, *dr;  /* the buffers passed to MPI (device or host) */
    char *host;     /* staging for fill and check */
    long runs, bad;
} ctx_t;

static void fill(ctx_t *x, void *buf, size_t bytes, const type_t *t, int o, size_t count, size_t block0)
{
    for (size_t i = 0; i < count; ++i) set(t, x->host, i, input(t, o, x->rank, block0 + i));
    if (x->on_host) memcpy(buf, x->host, bytes);
    else cudaMemcpy(buf, x->host, bytes, cudaMemcpyHostToDevice);
}
static void poison(ctx_t *x, void *buf, size_t bytes)
{
    if (x->on_host) memset(buf, 0x5a, bytes);
    else cudaMemset(buf, 0x5a, bytes);
}
static void fetch(ctx_t *x, const void *buf, size_t bytes)
{
    if (x->on_host) memcpy(x->host, buf, bytes);
    else cudaMemcpy(x->host, buf, bytes, cudaMemcpyDeviceToHost);
}

static void report(ctx_t *x, const char *coll, const type_t *t, int o, size_t count, int ip, int root, int rc,
                   long bad, size_t first)
{
    ++x->runs;
    if (!bad && rc == MPI_SUCCESS) return;
    x->bad += bad + (rc != MPI_SUCCESS);
    fprintf(stderr, "FAIL %s comm=%s rank=%d %s %s count=%zu in_place=%d root=%d rc=%d: %ld wrong, first at %zu\n",
            coll, x->cname, x->rank, t->name, o >= 0 ? opnames[o] : "-", count, ip, root, rc, bad, first);
}

/* Element-wise check of n elements at host[at..] against want(i). */
#define CHECK(n, at, want_expr)                                                                   \
    do {                                                                                          \
        for (size_t i_ = 0; i_ < (n); ++i_) {                                                     \
            size_t i = i_;                                                                        \
            (void)i;                                                                              \
            if (get(t, x->host, (at) + i_) != (want_expr)) {                                      \
                if (!bad) first = (at) + i_;                                                      \
                ++bad;                                                                            \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* Ragged block sizes around `count` (never above it; some 0). */
static size_t ragged(size_t count, size_t q)
{
    size_t r = count * ((q * 5 + 1) % 4) / 3;
    return r > 0 && q % 2 ? r - 1 : r;
}

/* MPI_Reduce_local(in, inout): inout = in op inout, elementwise, wrapped to the type. */
static int64_t want_local(const type_t *t, int o, int rank, size_t i)
{
    char tmp[8];
    set(t, tmp, 0, fold(o, input(t, o, rank, i), input(t, o, rank + 1, i)));
    return get(t, tmp, 0);
}

static void reductions(ctx_t *x, const type_t *t, int o, size_t count, int ip, int root)
{
    const size_t bytes = count * t->size, n = (size_t)x->size;
    MPI_Op op = mpi_op(o);
    long bad;
    size_t first;
    int rc;
    /* reduce_local (no in-place form): this rank's input into rank + 1's */
    if (!ip) {
        fill(x, x->ds, bytes, t, o, count, 0);
        for (size_t i = 0; i < count; ++i) set(t, x->host, i, input(t, o, x->rank + 1, i));
        if (x->on_host) memcpy(x->dr, x->host, bytes);
        else cudaMemcpy(x->dr, x->host, bytes, cudaMemcpyHostToDevice);
        rc = MPI_Reduce_local(x->ds, x->dr, (int)count, t->mpi, op);
        fetch(x, x->dr, bytes);
        bad = 0, first = 0;
        CHECK(count, 0, want_local(t, o, x->rank, i));
        report(x, "reduce_local", t, o, count, ip, -1, rc, bad, first);
    }
    /* allreduce */
    fill(x, ip ? x->dr : x->ds, bytes, t, o, count, 0);
    if (!ip) poison(x, x->dr, bytes);
    rc = MPI_Allreduce(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, t->mpi, op, x->comm);
    fetch(x, x->dr, bytes);
    bad = 0, first = 0;
    CHECK(count, 0, want_reduced(t, o, x->size, i));
    report(x, "allreduce", t, o, count, ip, -1, rc, bad, first);
    /* reduce: in place at the root only */
    const int rip = ip && x->rank == root;
    fill(x, rip ? x->dr : x->ds, bytes, t, o, count, 0);
    if (!rip) poison(x, x->dr, bytes);
    rc = MPI_Reduce(rip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, t->mpi, op, root, x->comm);
    bad = 0, first = 0;
    if (x->rank == root) {
        fetch(x, x->dr, bytes);
        CHECK(count, 0, want_reduced(t, o, x->size, i));
    }
    report(x, "reduce", t, o, count, ip, root, rc, bad, first);
    /* scan and exscan: rank r gets the fold over ranks 0..r (exscan 0..r-1;
     * rank 0's output is undefined there, so not checked) */
    for (int ex = 0; ex < 2; ++ex) {
        fill(x, ip ? x->dr : x->ds, bytes, t, o, count, 0);
        if (!ip) poison(x, x->dr, bytes);
        rc = ex ? MPI_Exscan(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, t->mpi, op, x->comm)
                : MPI_Scan(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, t->mpi, op, x->comm);
        bad = 0, first = 0;
        const int upto = x->rank + 1 - ex;
        if (upto > 0) {
            fetch(x, x->dr, bytes);
            CHECK(count, 0, want_reduced(t, o, upto, i));
        }
        report(x, ex ? "exscan" : "scan", t, o, count, ip, -1, rc, bad, first);
    }
    /* reduce_scatter_block and reduce_scatter: n blocks of count in, block `rank` out */
    for (int v = 0; v < 2; ++v) {
        fill(x, ip ? x->dr : x->ds, bytes * n, t, o, count * n, 0);
        if (!ip) poison(x, x->dr, bytes);
        int *counts = malloc(n * sizeof(int));
        for (size_t q = 0; q < n; ++q) counts[q] = (int)count;
        rc = v ? MPI_Reduce_scatter(ip ? MPI_IN_PLACE : x->ds, x->dr, counts, t->mpi, op, x->comm)
               : MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, t->mpi, op, x->comm);
        free(counts);
        fetch(x, x->dr, bytes);
        bad = 0, first = 0;
        CHECK(count, 0, want_reduced(t, o, x->size, (size_t)x->rank * count + i));
        report(x, v ? "reduce_scatter" : "reduce_scatter_block", t, o, count, ip, -1, rc, bad, first);
    }
    /* reduce_scatter, ragged counts: block q of ragged(count, q) elements */
    int *rcounts = malloc(n * sizeof(int));
    size_t total = 0, mine = 0;
    for (size_t q = 0; q < n; ++q) {
        rcounts[q] = (int)ragged(count, q);
        if (q == (size_t)x->rank) mine = total;
        total += (size_t)rcounts[q];
    }
    fill(x, ip ? x->dr : x->ds, total * t->size, t, o, total, 0);
    if (!ip) poison(x, x->dr, (size_t)rcounts[x->rank] * t->size);
    rc = MPI_Reduce_scatter(ip ? MPI_IN_PLACE : x->ds, x->dr, rcounts, t->mpi, op, x->comm);
    fetch(x, x->dr, (size_t)rcounts[x->rank] * t->size);
    bad = 0, first = 0;
    CHECK((size_t)rcounts[x->rank], 0, want_reduced(t, o, x->size, mine + i));
    report(x, "reduce_scatter(ragged)", t, o, count, ip, -1, rc, bad, first);
    free(rcounts);
}

static void movement(ctx_t *x, const type_t *t, size_t count, int ip, int root)
{
    const size_t bytes = count * t->size, n = (size_t)x->size;
    long bad;
    size_t first;
    /* bcast: the root's data everywhere */
    if (x->rank == root) fill(x, x->dr, bytes, t, OP_SUM, count, 0);
    else poison(x, x->dr, bytes);
    int rc = MPI_Bcast(x->dr, (int)count, t->mpi, root, x->comm);
    fetch(x, x->dr, bytes);
    bad = 0, first = 0;
    CHECK(count, 0, input(t, OP_SUM, root, i));
    report(x, "bcast", t, -1, count, ip, root, rc, bad, first);
    /* allgather: block q from rank q */
    poison(x, x->dr, bytes * n);
    if (ip) {
        for (size_t i = 0; i < count; ++i) set(t, x->host, i, input(t, OP_SUM, x->rank, i));
        char *at = (char *)x->dr + (size_t)x->rank * bytes;
        if (x->on_host) memcpy(at, x->host, bytes);
        else cudaMemcpy(at, x->host, bytes, cudaMemcpyHostToDevice);
    } else {
        fill(x, x->ds, bytes, t, OP_SUM, count, 0);
    }
    rc = MPI_Allgather(ip ? MPI_IN_PLACE : x->ds, (int)count, t->mpi, x->dr, (int)count, t->mpi, x->comm);
    fetch(x, x->dr, bytes * n);
    bad = 0, first = 0;
    for (size_t q = 0; q < n; ++q) CHECK(count, q * count, input(t, OP_SUM, (int)q, i));
    report(x, "allgather", t, -1, count, ip, -1, rc, bad, first);
    /* allgatherv: ragged blocks, the last rank's first, one element of gap
     * after each odd rank's block (which must stay as it was) */
    int *rcounts = malloc(n * sizeof(int)), *displs = malloc(n * sizeof(int));
    size_t end = 0;
    for (size_t j = n; j-- > 0;) {
        rcounts[j] = (int)ragged(count, j);
        displs[j] = (int)end;
        end += (size_t)rcounts[j] + (j % 2);
    }
    const size_t mine = (size_t)rcounts[x->rank];
    poison(x, x->dr, end * t->size);
    for (size_t i = 0; i < mine; ++i) set(t, x->host, i, input(t, OP_SUM, x->rank, i));
    void *own = ip ? (char *)x->dr + (size_t)displs[x->rank] * t->size : x->ds;
    if (x->on_host) memcpy(own, x->host, mine * t->size);
    else cudaMemcpy(own, x->host, mine * t->size, cudaMemcpyHostToDevice);
    rc = MPI_Allgatherv(ip ? MPI_IN_PLACE : x->ds, (int)mine, t->mpi, x->dr, rcounts, displs, t->mpi, x->comm);
    fetch(x, x->dr, end * t->size);
    bad = 0, first = 0;
    char poisoned[8];
    memset(poisoned, 0x5a, sizeof(poisoned));
    const int64_t untouched = get(t, poisoned, 0);
    for (size_t q = 0; q < n; ++q) {
        CHECK((size_t)rcounts[q], (size_t)displs[q], input(t, OP_SUM, (int)q, i));
        if (q % 2) CHECK(1, (size_t)displs[q] + (size_t)rcounts[q], untouched);
    }
    report(x, "allgatherv", t, -1, count, ip, -1, rc, bad, first);
    free(rcounts);
    free(displs);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int quick = 0;
    const char *mode = "device";
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "-q")) quick = 1;
        else if (!strcmp(argv[a], "-m") && a + 1 < argc) mode = argv[++a];
    }
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    if (strcmp(mode, "host")) {
        cudaGetDeviceCount(&ndev);
        cudaSetDevice((lr ? atoi(lr) : wrank) % (ndev ? ndev : 1));
    }
    const int on_host = !strcmp(mode, "host") || (!strcmp(mode, "mixed") && wrank % 2 == 0);
    const int alternate = !strcmp(mode, "alternate");

    const type_t types[] = {
        {"char", MPI_CHAR, 1, K_INT, 1, 0, 0},
        {"signed_char", MPI_SIGNED_CHAR, 1, K_INT, 1, 1, 1},
        {"unsigned_char", MPI_UNSIGNED_CHAR, 1, K_UINT, 1, 1, 1},
        {"short", MPI_SHORT, 2, K_INT, 1, 1, 1},
        {"unsigned_short", MPI_UNSIGNED_SHORT, 2, K_UINT, 1, 1, 1},
        {"int", MPI_INT, 4, K_INT, 1, 1, 1},
        {"unsigned", MPI_UNSIGNED, 4, K_UINT, 1, 1, 1},
        {"long", MPI_LONG, 8, K_INT, 1, 1, 1},
        {"unsigned_long", MPI_UNSIGNED_LONG, 8, K_UINT, 1, 1, 1},
        {"long_long", MPI_LONG_LONG, 8, K_INT, 1, 1, 1},
        {"unsigned_long_long", MPI_UNSIGNED_LONG_LONG, 8, K_UINT, 1, 1, 1},
        {"int8", MPI_INT8_T, 1, K_INT, 1, 1, 1},
        {"uint16", MPI_UINT16_T, 2, K_UINT, 1, 1, 1},
        {"int32", MPI_INT32_T, 4, K_INT, 1, 1, 1},
        {"uint64", MPI_UINT64_T, 8, K_UINT, 1, 1, 1},
        {"float", MPI_FLOAT, 4, K_FLOAT, 1, 0, 0},
        {"double", MPI_DOUBLE, 8, K_FLOAT, 1, 0, 0},
        {"c_bool", MPI_C_BOOL, 1, K_BOOL, 0, 0, 1},
        {"byte", MPI_BYTE, 1, K_UINT, 0, 1, 0},
    };
    const size_t ntypes = sizeof(types) / sizeof(types[0]);
    const size_t counts[] = {0, 1, 7, 1023, large_count((1u << 20) + 3)};
    const size_t ncounts = sizeof(counts) / sizeof(counts[0]);
    const size_t big_bytes = (size_t)1 << 28, max_bytes = (counts[ncounts - 1] + 1) * 8 * (size_t)wsize;
    /* + the allgatherv's gaps */
    const size_t buf_bytes = (quick || max_bytes > big_bytes ? max_bytes : big_bytes) + 64 * (size_t)wsize;

    ctx_t x = {0};
    x.on_host = on_host;
    x.host = malloc(buf_bytes);
    void *hs = NULL, *hr = NULL, *gs = NULL, *gr = NULL;
    if (on_host || alternate) {
        hs = malloc(buf_bytes);
        hr = malloc(buf_bytes);
    }
    if (!on_host || alternate) {
        cudaMalloc(&gs, buf_bytes);
        cudaMalloc(&gr, buf_bytes);
    }
    x.ds = on_host ? hs : gs;
    x.dr = on_host ? hr : gr;
    MPI_Comm comms[5];
    const char *cnames[] = {"world", "split", "dup", "reversed", "odd_split"};
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comms[1]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &comms[3]);
    /* the first wsize-1 ranks (odd-sized for even worlds), the last alone */
    MPI_Comm_split(MPI_COMM_WORLD, wrank == wsize - 1, wrank, &comms[4]);

    for (int c = 0; c < 5; ++c) {
        x.comm = comms[c];
        x.cname = cnames[c];
        MPI_Comm_rank(x.comm, &x.rank);
        MPI_Comm_size(x.comm, &x.size);
        const int roots[3] = {0, x.size - 1, x.size / 2};
        for (size_t ti = 0; ti < ntypes; ++ti) {
            const type_t *t = &types[ti];
            if (alternate) {
                x.on_host = ti % 2 == 0;
                x.ds = x.on_host ? hs : gs;
                x.dr = x.on_host ? hr : gr;
            }
            int first_op = -1;
            for (int o = 0; o < NOPS; ++o) {
                if (!op_valid(t, o)) continue;
                if (first_op < 0) first_op = o;
                for (size_t k = 0; k < ncounts; ++k)
                    for (int ip = 0; ip <= 1; ++ip)
                        if (k + 1 < ncounts || o == first_op) /* the large count: one op per type */
                            reductions(&x, t, o, counts[k], ip, roots[(k + ip) % 3]);
            }
            for (size_t k = 0; k < ncounts; ++k)
                for (int ip = 0; ip <= 1; ++ip) movement(&x, t, counts[k], ip, roots[(k + ip + ti) % 3]);
        }
        if (!quick && c == 0) { /* 2^28 bytes of one type */
            const type_t *f = &types[15];
            movement(&x, f, big_bytes / f->size / (size_t)x.size, 0, x.size - 1);
            reductions(&x, f, OP_SUM, big_bytes / f->size / (size_t)x.size, 0, 0);
        }
    }
    long totals[2] = {x.runs, x.bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("coll_matrix: %d ranks, memory %s: %ld collective calls (summed over ranks), %ld wrong elements or "
               "errors\n", wsize, mode, totals[0], totals[1]);
    for (int c = 1; c < 5; ++c) MPI_Comm_free(&comms[c]);
    free(hs);
    free(hr);
    cudaFree(gs);
    cudaFree(gr);
    free(x.host);
    MPI_Finalize();
    return totals[1] ? 1 : 0;
}
