/*
 * MPI_Allreduce on the buffers the zero-copy path maps (core/algo/zerocopy/zerocopy.h),
 * compared element by element with a host reference. Each case runs several
 * rounds with new data, so a stale mapping (a peer's old allocation) shows:
 *   plain      cudaMalloc, out of place and in place
 *   offsets    interior offsets, different per rank; some not 16-byte aligned
 *              (element-wise path), some sizes with a ragged end
 *   realloc    every round frees and allocates again (often the same address:
 *              a new buffer id, so a new mapping)
 *   pool       rank 1's buffers from a cudaMallocAsync pool (not shareable):
 *              every rank takes the FIFO path for those calls
 *   managed    the last rank's buffers from cudaMallocManaged (the same)
 *   vmm        rank 0's buffers VMM memory with no shareable handle type
 *              (cuMemCreate; the same)
 *   types      MPI_CHAR sum (what OSU sends), int8 min, double max, long prod,
 *              MPI_DOUBLE_INT maxloc (16-byte elements, 8-byte aligned at odd offsets)
 * Sizes from the zero-copy threshold up (the .mpitest sets it low).
 *
 * -f: LOOM_DIRECT_MAP_FAIL names a rank whose mappings fail (fault
 * injected): every rank's zero-copy call must fail (no rank can tell which
 * slices were reduced), and the communicator must stay usable (a small
 * allreduce after it succeeds, twice over).
 *
 * -c: rank 0 passes a different count from the others (an erroneous program,
 * both sizes zero-copy): every rank's call must fail with an error, no rank
 * may touch memory past its buffers, and the communicator stays usable.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"
#include "memory_kinds.h"

typedef struct {
    const char *name;
    MPI_Datatype mpi;
    MPI_Op op;
    size_t size;
} kind_t;

/* Small integers: exact in every type (products of 1s and 2s, few ranks). */
static long input(const kind_t *k, int rank, size_t i, int round)
{
    long h = (long)((i * 7 + (size_t)rank * 13 + (size_t)round * 5) % 9);
    if (k->op == MPI_PROD) return 1 + (h & 1);
    return k->op == MPI_SUM && k->size == 1 ? h % 4 : h - 4;
}

static long fold(MPI_Op op, long a, long b)
{
    if (op == MPI_SUM) return a + b;
    if (op == MPI_PROD) return a * b;
    if (op == MPI_MIN) return a < b ? a : b;
    return a > b ? a : b;
}

static void put(const kind_t *k, void *p, size_t i, long v)
{
    char *b = (char *)p + i * k->size;
    if (k->mpi == MPI_DOUBLE) *(double *)b = (double)v;
    else if (k->size == 1) *(int8_t *)b = (int8_t)v;
    else if (k->size == 4) *(float *)b = (float)v;
    else *(int64_t *)b = v;
}

static long get(const kind_t *k, const void *p, size_t i)
{
    const char *b = (const char *)p + i * k->size;
    if (k->mpi == MPI_DOUBLE) return (long)*(const double *)b;
    if (k->size == 1) return *(const int8_t *)b;
    if (k->size == 4) return (long)*(const float *)b;
    return *(const int64_t *)b;
}

/* One call: fills this rank's input, runs, checks every element. */
static long check(MPI_Comm comm, const kind_t *k, size_t count, char *in, char *out, int in_place, int round,
                  char *host, const char *what)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const size_t bytes = count * k->size;
    for (size_t i = 0; i < count; ++i) put(k, host, i, input(k, rank, i, round));
    cudaMemcpy(in_place ? out : in, host, bytes, cudaMemcpyHostToDevice);
    if (!in_place) cudaMemset(out, 0x5a, bytes);
    int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)count, k->mpi, k->op, comm);
    cudaMemcpy(host, out, bytes, cudaMemcpyDeviceToHost);
    long bad = rc != MPI_SUCCESS;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < count; ++i) {
        long want = input(k, 0, i, round);
        for (int q = 1; q < size; ++q) want = fold(k->op, want, input(k, q, i, round));
        if (k->size == 1) want = (int8_t)want;
        if (get(k, host, i) != want) {
            if (first == (size_t)-1) first = i;
            ++bad;
        }
    }
    if (bad)
        fprintf(stderr, "FAIL %s rank %d %s count %zu in_place %d round %d rc %d: %ld wrong, first at %zu\n", what,
                rank, k->name, count, in_place, round, rc, bad, first);
    return bad;
}

/* MPI_DOUBLE_INT with MPI_MAXLOC: the largest value, the lowest rank holding it. */
typedef struct {
    double v;
    int i;
} pair_t;

static double pair_value(int rank, size_t i, int round) { return (double)((i * 7 + (size_t)rank * 13 + (size_t)round * 5) % 9); }

static long check_pairs(MPI_Comm comm, size_t count, char *in, char *out, int in_place, int round, char *host,
                        const char *what)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    pair_t *h = (pair_t *)host;
    for (size_t i = 0; i < count; ++i) h[i].v = pair_value(rank, i, round), h[i].i = rank;
    cudaMemcpy(in_place ? out : in, host, count * sizeof(pair_t), cudaMemcpyHostToDevice);
    if (!in_place) cudaMemset(out, 0x5a, count * sizeof(pair_t));
    int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)count, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
    cudaMemcpy(host, out, count * sizeof(pair_t), cudaMemcpyDeviceToHost);
    long bad = rc != MPI_SUCCESS;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < count; ++i) {
        double want = pair_value(0, i, round);
        int at = 0;
        for (int q = 1; q < size; ++q)
            if (pair_value(q, i, round) > want) want = pair_value(q, i, round), at = q;
        if (h[i].v != want || h[i].i != at) {
            if (first == (size_t)-1) first = i;
            ++bad;
        }
    }
    if (bad)
        fprintf(stderr, "FAIL %s rank %d double_int maxloc count %zu in_place %d round %d rc %d: %ld wrong, first at %zu\n",
                what, rank, count, in_place, round, rc, bad, first);
    return bad;
}

/* -f and -c: an in-place allreduce of `count` floats must fail on this rank
 * (twice), and a small allreduce after each must still succeed. Finalizes
 * MPI; returns the exit status. */
static int every_call_fails(int rank, size_t count, const char *mode, const char *what)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    float *d = (float *)dalloc(count * sizeof(float));
    int wrong = 0;
    for (int round = 0; round < 2; ++round) {
        int rc = MPI_Allreduce(MPI_IN_PLACE, d, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) fprintf(stderr, "rank %d: the call with %s succeeded\n", rank, what);
        wrong += rc == MPI_SUCCESS;
        wrong += still_usable(MPI_COMM_WORLD);
    }
    cudaFree(d);
    int any = 0;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("allreduce_zerocopy %s: %s\n", mode, any ? "FAIL" : "every rank's call failed, then usable");
    MPI_Finalize();
    return any != 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice((lr ? atoi(lr) : rank) % (ndev ? ndev : 1));
    if (argc > 1 && !strcmp(argv[1], "-f")) return every_call_fails(rank, 1u << 20, "-f", "an unmappable buffer");
    if (argc > 1 && !strcmp(argv[1], "-c"))
        return every_call_fails(rank, (1u << 20) + (rank == 0 ? 0 : 1024), "-c", "mismatched counts");
    const kind_t kinds[] = {{"float sum", MPI_FLOAT, MPI_SUM, 4},  {"char sum", MPI_CHAR, MPI_SUM, 1},
                            {"int8 min", MPI_INT8_T, MPI_MIN, 1},  {"double max", MPI_DOUBLE, MPI_MAX, 8},
                            {"long prod", MPI_LONG, MPI_PROD, 8}};
    const size_t counts[] = {1, 5, 4096, 65536 + 3, (1u << 20) + 1};
    const size_t cap = (8u << 20) + 4096;
    char *host = malloc(cap), *a = NULL, *b = NULL;
    cudaMalloc((void **)&a, cap);
    cudaMalloc((void **)&b, cap);
    long bad = 0, runs = 0;
    for (size_t t = 0; t < sizeof(kinds) / sizeof(kinds[0]); ++t)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c)
            for (int round = 0; round < 2; ++round, runs += 3) {
                bad += check(MPI_COMM_WORLD, &kinds[t], counts[c], a, b, 0, round, host, "plain");
                bad += check(MPI_COMM_WORLD, &kinds[t], counts[c], a, b, 1, round, host, "plain in place");
                /* Interior offsets, per rank: 16-byte aligned on even ranks, 8 or 4 bytes off on odd ones. */
                const size_t off = (size_t)rank * 256 + (rank % 2 ? (kinds[t].size == 8 ? 8 : 4) : 0);
                bad += check(MPI_COMM_WORLD, &kinds[t], counts[c], a + off, b + 2 * off, 0, round, host, "offsets");
                /* Interior but 16-byte aligned on every rank: the vector path. */
                bad += check(MPI_COMM_WORLD, &kinds[t], counts[c], a + 256 * (size_t)rank, b + 512, 0, round, host,
                             "aligned offsets");
                ++runs;
            }
    /* 16-byte elements: aligned, and 8 bytes off on odd ranks (element by element). */
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c)
        for (int round = 0; round < 2; ++round, runs += 3) {
            bad += check_pairs(MPI_COMM_WORLD, counts[c] / 2 + 1, a, b, 0, round, host, "pairs");
            bad += check_pairs(MPI_COMM_WORLD, counts[c] / 2 + 1, a, b, 1, round, host, "pairs in place");
            const size_t off = rank % 2 ? 8 : 0;
            bad += check_pairs(MPI_COMM_WORLD, counts[c] / 2 + 1, a + off, b + 16 + off, 0, round, host,
                               "pairs at offsets");
        }
    /* Free and allocate again every round (a new buffer id, often the same address). */
    for (int round = 0; round < 6; ++round, runs += 2) {
        cudaFree(a);
        cudaFree(b);
        cudaMalloc((void **)&a, cap);
        cudaMalloc((void **)&b, cap);
        bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, a, b, 0, round, host, "realloc");
        bad += check(MPI_COMM_WORLD, &kinds[1], 1u << 20, a, b, 1, round, host, "realloc in place");
    }
    /* Rank 1's buffers from a cudaMallocAsync pool: every rank takes the FIFO path. */
    char *pa = a, *pb = b;
    if (rank == 1) {
        cudaMallocAsync((void **)&pa, cap, 0);
        cudaMallocAsync((void **)&pb, cap, 0);
        cudaStreamSynchronize(0);
    }
    for (int round = 0; round < 2; ++round, runs += 2) {
        bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, pa, pb, 0, round, host, "pool");
        bad += check(MPI_COMM_WORLD, &kinds[3], 65536 + 3, pa, pb, 1, round, host, "pool in place");
    }
    /* ... and back: the zero-copy path again. */
    bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, a, b, 0, 9, host, "after pool");
    ++runs;
    if (rank == 1) {
        cudaFreeAsync(pa, 0);
        cudaFreeAsync(pb, 0);
        cudaStreamSynchronize(0);
    }
    /* The last rank on managed memory, then rank 0 on VMM memory: every rank
     * takes the FIFO path for those calls, and zero-copy again after. */
    char *ma = a, *mb = b;
    if (rank == size - 1 && (cudaMallocManaged((void **)&ma, cap, cudaMemAttachGlobal) != cudaSuccess ||
                             cudaMallocManaged((void **)&mb, cap, cudaMemAttachGlobal) != cudaSuccess)) {
        fprintf(stderr, "rank %d: cudaMallocManaged failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int round = 0; round < 2; ++round, runs += 2) {
        bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, ma, mb, 0, round, host, "managed");
        bad += check(MPI_COMM_WORLD, &kinds[1], 65536 + 3, ma, mb, 1, round, host, "managed in place");
    }
    if (rank == size - 1) cudaFree(ma), cudaFree(mb);
    vmm_block_t va, vb;
    char *xa = a, *xb = b;
    if (rank == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (vmm_alloc(&va, cap, dev) || vmm_alloc(&vb, cap, dev)) {
            fprintf(stderr, "rank 0: VMM allocation failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        xa = (char *)va.at, xb = (char *)vb.at;
    }
    for (int round = 0; round < 2; ++round, runs += 2) {
        bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, xa, xb, 0, round, host, "vmm");
        bad += check(MPI_COMM_WORLD, &kinds[4], 65536 + 3, xa, xb, 1, round, host, "vmm in place");
    }
    if (rank == 0) vmm_release(&va), vmm_release(&vb);
    bad += check(MPI_COMM_WORLD, &kinds[0], (1u << 20) + 1, a, b, 0, 10, host, "after managed and vmm");
    ++runs;
    long totals[2] = {runs, bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("allreduce_zerocopy: %d ranks: %ld calls (summed over ranks), %ld wrong elements or errors\n", size,
               totals[0], totals[1]);
    cudaFree(a);
    cudaFree(b);
    free(host);
    MPI_Finalize();
    return totals[1] ? 1 : 0;
}
