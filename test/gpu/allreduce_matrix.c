/*
 * GPU correctness matrix of MPI_Allreduce on device buffers through loom:
 * every MPI type loom maps x {sum, prod, min, max} x counts x in-place /
 * out-of-place x communicators {world, split, dup, reversed}, compared element
 * by element with a host reference. Inputs are small integers, so every result
 * is exactly representable in every type: the tolerance is 0, for floating
 * point too. The 2^28-byte count runs on world with sum and max only (host
 * checking of the full product would take minutes); `-q` skips it. `-t NAME`
 * runs one type only (racecheck, which is slow, over a smaller matrix). `-i`
 * calls MPI_Iallreduce + MPI_Wait instead (the non-blocking paths).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    MPI_Datatype mpi;
    size_t size;
    int is_signed, is_float;
} type_t;

static int nonblocking; /* -i */

static double get(const type_t *t, const void *p, size_t i)
{
    const char *b = (const char *)p + i * t->size;
    if (t->is_float) return t->size == 4 ? *(const float *)b : *(const double *)b;
    switch (t->size) {
    case 1: return t->is_signed ? (double)*(const int8_t *)b : (double)*(const uint8_t *)b;
    case 4: return t->is_signed ? (double)*(const int32_t *)b : (double)*(const uint32_t *)b;
    default: return t->is_signed ? (double)*(const int64_t *)b : (double)*(const uint64_t *)b;
    }
}

static void set(const type_t *t, void *p, size_t i, double v)
{
    char *b = (char *)p + i * t->size;
    if (t->is_float) {
        if (t->size == 4) *(float *)b = (float)v;
        else *(double *)b = v;
        return;
    }
    switch (t->size) {
    case 1: if (t->is_signed) *(int8_t *)b = (int8_t)v; else *(uint8_t *)b = (uint8_t)v; break;
    case 4: if (t->is_signed) *(int32_t *)b = (int32_t)v; else *(uint32_t *)b = (uint32_t)v; break;
    default: if (t->is_signed) *(int64_t *)b = (int64_t)v; else *(uint64_t *)b = (uint64_t)v; break;
    }
}

/* Small integers: sums, products (of 1s and 2s) and extrema stay exact. */
static double input(const type_t *t, MPI_Op op, int rank, size_t i)
{
    int h = (int)((i * 31 + (size_t)rank * 17) % 11);
    if (op == MPI_PROD) return 1 + (h & 1);
    return t->is_signed || t->is_float ? h - 5 : h;
}

static double fold(MPI_Op op, double a, double b)
{
    if (op == MPI_SUM) return a + b;
    if (op == MPI_PROD) return a * b;
    if (op == MPI_MIN) return a < b ? a : b;
    return a > b ? a : b;
}

static long run_one(MPI_Comm comm, const type_t *t, MPI_Op op, const char *opname, size_t count, int in_place,
                    void *dsend, void *drecv, void *host, const char *cname)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t bytes = count * t->size;
    for (size_t i = 0; i < count; ++i) set(t, host, i, input(t, op, rank, i));
    cudaMemcpy(in_place ? drecv : dsend, host, bytes, cudaMemcpyHostToDevice);
    if (!in_place) cudaMemset(drecv, 0x5a, bytes);
    int rc;
    if (nonblocking) {
        MPI_Request req;
        rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : dsend, drecv, (int)count, t->mpi, op, comm, &req);
        if (MPI_SUCCESS == rc) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : dsend, drecv, (int)count, t->mpi, op, comm);
    }
    cudaMemcpy(host, drecv, bytes, cudaMemcpyDeviceToHost);
    long bad = rc != MPI_SUCCESS;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < count; ++i) {
        double want = input(t, op, 0, i);
        for (int q = 1; q < size; ++q) want = fold(op, want, input(t, op, q, i));
        if (get(t, host, i) != want) {
            if (first == (size_t)-1) first = i;
            ++bad;
        }
    }
    if (bad)
        fprintf(stderr, "FAIL comm=%s rank=%d %s %s count=%zu in_place=%d rc=%d: %ld wrong, first at %zu\n", cname,
                rank, t->name, opname, count, in_place, rc, bad, first);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int quick = 0;
    const char *only = NULL;
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "-q")) quick = 1;
        else if (!strcmp(argv[a], "-i")) nonblocking = 1;
        else if (!strcmp(argv[a], "-t") && a + 1 < argc) only = argv[++a];
    }
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (wrank == 0) fprintf(stderr, "allreduce_matrix: no usable GPU: skipped\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice((lr ? atoi(lr) : wrank) % (ndev ? ndev : 1));

    const type_t types[] = {
        {"float", MPI_FLOAT, 4, 1, 1},       {"double", MPI_DOUBLE, 8, 1, 1},
        {"int", MPI_INT, 4, 1, 0},           {"long", MPI_LONG, 8, 1, 0},
        {"unsigned", MPI_UNSIGNED, 4, 0, 0}, {"unsigned_long", MPI_UNSIGNED_LONG, 8, 0, 0},
        {"int8", MPI_INT8_T, 1, 1, 0},       {"uint8", MPI_UINT8_T, 1, 0, 0},
    };
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    const char *opnames[] = {"sum", "prod", "min", "max"};
    const size_t counts[] = {0, 1, 7, 1023, (1u << 20) + 3};
    const size_t big_bytes = 1u << 28;

    void *ds, *dr, *host = malloc(big_bytes);
    cudaMalloc(&ds, big_bytes);
    cudaMalloc(&dr, big_bytes);
    MPI_Comm comms[4];
    const char *cnames[] = {"world", "split", "dup", "reversed"};
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comms[1]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &comms[3]);

    long runs = 0, bad = 0;
    for (int c = 0; c < 4; ++c)
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); ++t)
            for (int o = 0; o < 4 && (!only || !strcmp(only, types[t].name)); ++o)
                for (int ip = 0; ip <= 1; ++ip) {
                    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k, ++runs)
                        bad += run_one(comms[c], &types[t], ops[o], opnames[o], counts[k], ip, ds, dr, host, cnames[c]);
                    if (!quick && c == 0 && (ops[o] == MPI_SUM || ops[o] == MPI_MAX)) {
                        bad += run_one(comms[c], &types[t], ops[o], opnames[o], big_bytes / types[t].size, ip, ds, dr,
                                       host, cnames[c]);
                        ++runs;
                    }
                }
    long totals[2] = {runs, bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("allreduce_matrix: %d ranks: %ld allreduce runs (summed over ranks), %ld wrong elements or errors\n",
               wsize, totals[0], totals[1]);
    for (int c = 1; c < 4; ++c) MPI_Comm_free(&comms[c]);
    cudaFree(ds);
    cudaFree(dr);
    free(host);
    MPI_Finalize();
    if (!totals[0] && wrank == 0) fprintf(stderr, "allreduce_matrix: no type named %s\n", only ? only : "?");
    return totals[1] || !totals[0] ? 1 : 0;
}
