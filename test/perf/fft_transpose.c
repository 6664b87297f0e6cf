/*
 * A distributed 3-D FFT's transpose on device buffers, the way FFT codes
 * write it: an n^3 array of complex floats in x-slabs ([n/p][n][n] per
 * rank) becomes y-slabs ([n][n/p][n]), every rank sending each peer a
 * subarray block. Timed two ways in one run, each result checked element
 * by element against the values the layout implies:
 *   alltoallw: MPI_Alltoallw with a subarray type per peer on each side
 *              (loom packs and unpacks them on the GPU: coll_loom_dtgpu.h);
 *   manual:    the application's own pack kernel, MPI_Alltoall of the
 *              packed blocks, its unpack kernel (fft_transpose_pack.cu).
 * A slab transpose is a pencil decomposition's transpose within one row of
 * its process grid.
 *
 *   mpirun -np P fft_transpose [n] [repeats]   (n a multiple of P; 256)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int fft_pack(const void *xslab, void *blocks, int n, int p);
int fft_unpack(void *yslab, const void *blocks, int n, int p);

static int me, np;

/* Global element (x, y, z) holds x n + y (exact in a float up to n = 4096) and z. */
static float value(int n, int x, int y) { return (float)((size_t)x * n + y); }

static long check(const float *yslab, int n, int b)
{
    long bad = 0;
    for (int x = 0; x < n; ++x)
        for (int y = 0; y < b; ++y)
            for (int z = 0; z < n; ++z) {
                const float *e = yslab + 2 * (((size_t)x * b + y) * n + z);
                if (e[0] != value(n, x, me * b + y) || e[1] != (float)z) ++bad;
            }
    return bad;
}

static double best_of(int reps, void (*fn)(void *), void *ctx)
{
    double best = 1e30;
    for (int i = 0; i < reps + 2; ++i) {
        cudaDeviceSynchronize();
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        fn(ctx);
        cudaDeviceSynchronize();
        double us = (MPI_Wtime() - t0) * 1e6;
        MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 2 && us < best) best = us;
    }
    return best;
}

typedef struct {
    int n, b;
    float *x, *y, *sblocks, *rblocks;
    MPI_Datatype *st, *rt;
    int *ones, *zeros;
} ctx_t;

static void with_alltoallw(void *p)
{
    ctx_t *c = p;
    MPI_Alltoallw(c->x, c->ones, c->zeros, c->st, c->y, c->ones, c->zeros, c->rt, MPI_COMM_WORLD);
}

static void manual(void *p)
{
    ctx_t *c = p;
    const int block = 2 * c->b * c->b * c->n; /* floats */
    fft_pack(c->x, c->sblocks, c->n, np);
    MPI_Alltoall(c->sblocks, block, MPI_FLOAT, c->rblocks, block, MPI_FLOAT, MPI_COMM_WORLD);
    fft_unpack(c->y, c->rblocks, c->n, np);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (0 == me) printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(me % ndev);
    const int n = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n <= 0 || n % np || np > 1024) {
        if (0 == me) fprintf(stderr, "fft_transpose: n (%d) must be a positive multiple of the ranks (%d)\n", n, np);
        MPI_Finalize();
        return 2;
    }
    const int b = n / np;
    const size_t elems = (size_t)b * n * n, bytes = elems * 8;
    ctx_t c = {n, b, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    float *host = malloc(bytes);
    for (int x = 0; x < b; ++x)
        for (int y = 0; y < n; ++y)
            for (int z = 0; z < n; ++z) {
                float *e = host + 2 * (((size_t)x * n + y) * n + z);
                e[0] = value(n, me * b + x, y), e[1] = (float)z;
            }
    cudaMalloc((void **)&c.x, bytes);
    cudaMalloc((void **)&c.y, bytes);
    cudaMalloc((void **)&c.sblocks, bytes);
    cudaMalloc((void **)&c.rblocks, bytes);
    cudaMemcpy(c.x, host, bytes, cudaMemcpyHostToDevice);
    /* peer q's blocks: x-slab [b][n][n] rows y in q's range; y-slab [n][b][n] rows x in q's range */
    c.st = malloc(np * sizeof(MPI_Datatype));
    c.rt = malloc(np * sizeof(MPI_Datatype));
    c.ones = malloc(np * sizeof(int));
    c.zeros = calloc(np, sizeof(int));
    for (int q = 0; q < np; ++q) {
        const int xs[] = {b, n, n}, xsub[] = {b, b, n}, xat[] = {0, q * b, 0};
        const int ys[] = {n, b, n}, ysub[] = {b, b, n}, yat[] = {q * b, 0, 0};
        MPI_Type_create_subarray(3, xs, xsub, xat, MPI_ORDER_C, MPI_C_FLOAT_COMPLEX, &c.st[q]);
        MPI_Type_create_subarray(3, ys, ysub, yat, MPI_ORDER_C, MPI_C_FLOAT_COMPLEX, &c.rt[q]);
        MPI_Type_commit(&c.st[q]);
        MPI_Type_commit(&c.rt[q]);
        c.ones[q] = 1;
    }
    const char *names[] = {"alltoallw (subarray types)", "manual pack + alltoall"};
    void (*fns[])(void *) = {with_alltoallw, manual};
    double us[2];
    long bad[2];
    for (int k = 0; k < 2; ++k) {
        cudaMemset(c.y, 0, bytes);
        us[k] = best_of(reps, fns[k], &c);
        cudaMemcpy(host, c.y, bytes, cudaMemcpyDeviceToHost);
        bad[k] = check(host, n, b);
        MPI_Allreduce(MPI_IN_PLACE, &bad[k], 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    if (0 == me) {
        printf("fft_transpose: %d^3 complex floats on %d ranks, %.1f MiB per rank, best of %d\n", n, np,
               bytes / 1048576.0, reps);
        for (int k = 0; k < 2; ++k)
            printf("  %-28s %10.1f us  %7.1f GB/s per rank  %s\n", names[k], us[k], bytes / us[k] / 1e3,
                   bad[k] ? "WRONG" : "ok");
        printf("  alltoallw / manual: %.2fx the time\n", us[0] / us[1]);
    }
    for (int q = 0; q < np; ++q) MPI_Type_free(&c.st[q]), MPI_Type_free(&c.rt[q]);
    cudaFree(c.x), cudaFree(c.y), cudaFree(c.sblocks), cudaFree(c.rblocks);
    free(host), free(c.st), free(c.rt), free(c.ones), free(c.zeros);
    MPI_Finalize();
    return bad[0] || bad[1] ? 1 : 0;
}
