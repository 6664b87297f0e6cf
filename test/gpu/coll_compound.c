/*
 * GPU correctness of the two-field element types through loom: MPI_MINLOC
 * and MPI_MAXLOC on MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT and
 * MPI_SHORT_INT (values with many ties, so the lower-index rule is exercised),
 * MPI_SUM and MPI_PROD on MPI_C_FLOAT_COMPLEX and MPI_C_DOUBLE_COMPLEX, with
 * MPI_Allreduce, MPI_Reduce (roots 0, last, middle), MPI_Reduce_scatter_block
 * and MPI_Reduce_scatter (equal counts) x counts {0, 1, 7, 1023, 2^17+3} x in
 * place / not x communicators {world, reversed, odd-sized split}. Every
 * element is compared with a host reference; all values are small integers,
 * so results are exact.
 *
 *   coll_compound [-m device|host|mixed]
 * mixed: even ranks pass host buffers; host: all ranks (runs without a GPU,
 * checking the test against Open MPI's own reductions).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float v; int i; } float_int;
typedef struct { double v; int i; } double_int;
typedef struct { long v; int i; } long_int;
typedef struct { int v; int i; } int_int;
typedef struct { short v; int i; } short_int;
typedef struct { float re, im; } cfloat;
typedef struct { double re, im; } cdouble;

typedef enum { PAIR_FLOAT, PAIR_DOUBLE, PAIR_LONG, PAIR_INT, PAIR_SHORT, CPLX_FLOAT, CPLX_DOUBLE, NTYPES } tid_t;
static const char *const tnames[NTYPES] = {"float_int", "double_int", "long_int", "2int", "short_int",
                                           "c_float_complex", "c_double_complex"};
static const size_t tsize[NTYPES] = {sizeof(float_int), sizeof(double_int), sizeof(long_int), sizeof(int_int),
                                     sizeof(short_int), sizeof(cfloat), sizeof(cdouble)};
static MPI_Datatype tmpi(int t)
{
    MPI_Datatype m[NTYPES] = {MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT,
                              MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX};
    return m[t];
}
static int is_pair(int t) { return t <= PAIR_SHORT; }

/* An element as two doubles: (value, index) or (re, im). */
typedef struct { double a, b; } elem_t;

static void put(int t, void *buf, size_t k, elem_t e)
{
    char *p = (char *)buf + k * tsize[t];
    switch (t) {
    case PAIR_FLOAT: ((float_int *)p)->v = (float)e.a; ((float_int *)p)->i = (int)e.b; break;
    case PAIR_DOUBLE: ((double_int *)p)->v = e.a; ((double_int *)p)->i = (int)e.b; break;
    case PAIR_LONG: ((long_int *)p)->v = (long)e.a; ((long_int *)p)->i = (int)e.b; break;
    case PAIR_INT: ((int_int *)p)->v = (int)e.a; ((int_int *)p)->i = (int)e.b; break;
    case PAIR_SHORT: ((short_int *)p)->v = (short)e.a; ((short_int *)p)->i = (int)e.b; break;
    case CPLX_FLOAT: ((cfloat *)p)->re = (float)e.a; ((cfloat *)p)->im = (float)e.b; break;
    default: ((cdouble *)p)->re = e.a; ((cdouble *)p)->im = e.b; break;
    }
}
static elem_t got(int t, const void *buf, size_t k)
{
    const char *p = (const char *)buf + k * tsize[t];
    elem_t e;
    switch (t) {
    case PAIR_FLOAT: e.a = ((const float_int *)p)->v; e.b = ((const float_int *)p)->i; break;
    case PAIR_DOUBLE: e.a = ((const double_int *)p)->v; e.b = ((const double_int *)p)->i; break;
    case PAIR_LONG: e.a = (double)((const long_int *)p)->v; e.b = ((const long_int *)p)->i; break;
    case PAIR_INT: e.a = ((const int_int *)p)->v; e.b = ((const int_int *)p)->i; break;
    case PAIR_SHORT: e.a = ((const short_int *)p)->v; e.b = ((const short_int *)p)->i; break;
    case CPLX_FLOAT: e.a = ((const cfloat *)p)->re; e.b = ((const cfloat *)p)->im; break;
    default: e.a = ((const cdouble *)p)->re; e.b = ((const cdouble *)p)->im; break;
    }
    return e;
}

enum { OP_A, OP_B, NOPS }; /* pairs: MINLOC, MAXLOC; complex: SUM, PROD */
static MPI_Op mpi_op(int t, int o) { return is_pair(t) ? (o == OP_A ? MPI_MINLOC : MPI_MAXLOC) : (o == OP_A ? MPI_SUM : MPI_PROD); }
static const char *op_name(int t, int o) { return is_pair(t) ? (o == OP_A ? "minloc" : "maxloc") : (o == OP_A ? "sum" : "prod"); }

static elem_t input(int t, int o, int rank, size_t k)
{
    int h = (int)((k * 31 + (size_t)rank * 17) % 11);
    elem_t e;
    if (is_pair(t)) {
        e.a = h % 4 - 1;                        /* many equal values across ranks */
        e.b = (int)((rank * 13 + k) % 7) - 2;   /* indices, also tied at times */
    } else if (o == OP_A) {
        e.a = h - 5;
        e.b = h % 3 - 1;
    } else { /* products of 1, i, -1, -i, 1+i stay exact */
        static const double re[5] = {1, 0, -1, 0, 1}, im[5] = {0, 1, 0, -1, 1};
        e.a = re[h % 5];
        e.b = im[h % 5];
    }
    return e;
}
static elem_t fold(int t, int o, elem_t x, elem_t y)
{
    if (is_pair(t)) {
        int better = o == OP_A ? y.a < x.a : y.a > x.a;
        return (better || (y.a == x.a && y.b < x.b)) ? y : x;
    }
    elem_t r;
    if (o == OP_A) { r.a = x.a + y.a; r.b = x.b + y.b; }
    else { r.a = x.a * y.a - x.b * y.b; r.b = x.a * y.b + x.b * y.a; }
    return r;
}
static elem_t want(int t, int o, int n, size_t k)
{
    elem_t w = input(t, o, 0, k);
    for (int q = 1; q < n; ++q) w = fold(t, o, w, input(t, o, q, k));
    char tmp[16];
    put(t, tmp, 0, w); /* as the type stores it */
    return got(t, tmp, 0);
}

typedef struct {
    MPI_Comm comm;
    const char *cname;
    int rank, size, on_host;
    void *ds, *dr;
    char *host;
    long runs, bad;
} ctx_t;

static void to_buf(ctx_t *x, void *buf, size_t bytes)
{
    if (x->on_host) memcpy(buf, x->host, bytes);
    else cudaMemcpy(buf, x->host, bytes, cudaMemcpyHostToDevice);
}
static void from_buf(ctx_t *x, const void *buf, size_t bytes)
{
    if (x->on_host) memcpy(x->host, buf, bytes);
    else cudaMemcpy(x->host, buf, bytes, cudaMemcpyDeviceToHost);
}
static void fill(ctx_t *x, void *buf, int t, int o, size_t count, size_t first)
{
    for (size_t k = 0; k < count; ++k) put(t, x->host, k, input(t, o, x->rank, first + k));
    to_buf(x, buf, count * tsize[t]);
}
/* Checks `count` results at `buf` against the reference from element `first`. */
static void check(ctx_t *x, const char *what, int t, int o, const void *buf, size_t count, size_t first, int rc)
{
    long bad = 0;
    if (rc == MPI_SUCCESS && count) {
        from_buf(x, buf, count * tsize[t]);
        for (size_t k = 0; k < count; ++k) {
            elem_t g = got(t, x->host, k), w = want(t, o, x->size, first + k);
            if (g.a != w.a || g.b != w.b) {
                if (!bad)
                    fprintf(stderr, "rank %d %s %s %s %s count %zu: [%zu] = (%g, %g), want (%g, %g)\n", x->rank, x->cname,
                            what, tnames[t], op_name(t, o), count, first + k, g.a, g.b, w.a, w.b);
                ++bad;
            }
        }
    }
    if (rc != MPI_SUCCESS) fprintf(stderr, "rank %d %s %s %s: error %d\n", x->rank, x->cname, what, tnames[t], rc);
    x->runs++;
    x->bad += bad + (rc != MPI_SUCCESS);
}

static void run_type(ctx_t *x, int t, int o, size_t count)
{
    const size_t es = tsize[t], n = (size_t)x->size;
    MPI_Datatype dt = tmpi(t);
    MPI_Op op = mpi_op(t, o);
    for (int ip = 0; ip < 2; ++ip) {
        /* allreduce */
        fill(x, ip ? x->dr : x->ds, t, o, count, 0);
        int rc = MPI_Allreduce(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, dt, op, x->comm);
        check(x, ip ? "allreduce(in place)" : "allreduce", t, o, x->dr, count, 0, rc);
        /* reduce, three roots */
        int roots[3] = {0, x->size - 1, x->size / 2};
        for (int r = 0; r < 3; ++r) {
            const int root = roots[r], rip = ip && x->rank == root;
            fill(x, rip ? x->dr : x->ds, t, o, count, 0);
            rc = MPI_Reduce(rip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, dt, op, root, x->comm);
            if (x->rank == root) check(x, rip ? "reduce(in place)" : "reduce", t, o, x->dr, count, 0, rc);
            else check(x, "reduce", t, o, NULL, 0, 0, rc);
        }
        /* reduce_scatter_block and reduce_scatter (equal counts) */
        for (int v = 0; v < 2; ++v) {
            fill(x, ip ? x->dr : x->ds, t, o, count * n, 0);
            int counts[64];
            for (size_t q = 0; q < n; ++q) counts[q] = (int)count;
            rc = v ? MPI_Reduce_scatter(ip ? MPI_IN_PLACE : x->ds, x->dr, counts, dt, op, x->comm)
                   : MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : x->ds, x->dr, (int)count, dt, op, x->comm);
            check(x, v ? "reduce_scatter" : "reduce_scatter_block", t, o, x->dr, count, (size_t)x->rank * count, rc);
        }
    }
    (void)es;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *mode = "device";
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "-m") && i + 1 < argc) mode = argv[++i];
    int wrank, wsize, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaGetDeviceCount(&ndev);
    if (ndev > 0) cudaSetDevice((lr ? atoi(lr) : wrank) % ndev);
    const size_t counts[] = {0, 1, 7, 1023, (1u << 17) + 3};
    const size_t maxbytes = ((1u << 17) + 3) * 16 * (size_t)wsize;
    MPI_Comm comms[3];
    const char *cnames[3] = {"world", "reversed", "odd_split"};
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank == wsize - 1 && wsize > 2, wrank, &comms[2]);
    ctx_t x;
    memset(&x, 0, sizeof(x));
    x.on_host = !strcmp(mode, "host") || (!strcmp(mode, "mixed") && wrank % 2 == 0);
    x.host = malloc(maxbytes);
    if (x.on_host) {
        x.ds = malloc(maxbytes);
        x.dr = malloc(maxbytes);
    } else {
        cudaMalloc(&x.ds, maxbytes);
        cudaMalloc(&x.dr, maxbytes);
    }
    for (int c = 0; c < 3; ++c) {
        x.comm = comms[c];
        x.cname = cnames[c];
        MPI_Comm_rank(x.comm, &x.rank);
        MPI_Comm_size(x.comm, &x.size);
        for (int t = 0; t < NTYPES; ++t)
            for (int o = 0; o < NOPS; ++o)
                for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) run_type(&x, t, o, counts[i]);
    }
    long totals[2] = {x.runs, x.bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("coll_compound: %d ranks, memory %s: %ld collective calls (summed over ranks), %ld wrong elements or errors\n",
               wsize, mode, totals[0], totals[1]);
    for (int c = 1; c < 3; ++c) MPI_Comm_free(&comms[c]);
    if (x.on_host) {
        free(x.ds);
        free(x.dr);
    } else {
        cudaFree(x.ds);
        cudaFree(x.dr);
    }
    free(x.host);
    MPI_Finalize();
    return totals[1] == 0 ? 0 : 1;
}
