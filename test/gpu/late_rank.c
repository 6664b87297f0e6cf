/* A late rank is not an error. Rank LATE (argv[1], default 1) comes to each
 * collective SECONDS late (argv[2], default 3): first on the host (it sleeps
 * before the call), then on its GPU (a kernel keeps the legacy stream busy
 * that long, and loom's stream runs after it). With loom's default settings
 * (no LOOM_TIMEOUT) every rank must get MPI_SUCCESS and the right result,
 * element by element against a host reference, for every collective below,
 * blocking and non-blocking, whatever path it takes; the .mpitest sets
 * LOOM_WARN_AFTER below SECONDS and checks that the waiting ranks named the
 * late one (not entered / entered with its GPU busy). Exit 0 when nothing
 * was wrong.
 *
 *   late_rank [LATE [SECONDS [host|gpu|both [CASES]]]]   (a long lateness,
 *   minutes, on one phase and the first CASES collectives only) */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "busy_gpu.h"
#include "device_checks.h"

enum { KIND_HOST, KIND_GPU };

/* Rank r's value at index i (small integers: sums of floats stay exact). */
static float value(int r, size_t i) { return (float)((r * 7 + (int)(i % 61)) % 31); }

typedef struct {
    const char *name;
    size_t count; /* floats per rank's block (the whole buffer for allreduce/bcast/scan) */
} coll_case_t;

static const coll_case_t cases[] = {
    {"allreduce", 2},           {"allreduce", 1u << 20}, {"bcast", 1u << 18},     {"alltoall", 1u << 16},
    {"allgather", 1u << 16},    {"reduce_scatter_block", 1u << 16}, {"scan", 1u << 18}, {"iallreduce", 1u << 18},
};

/* Fills this rank's input (and, for bcast, the root's buffer) before the case. */
static void fill_case(const coll_case_t *c, int rank, int size, float *din, float *dout, float *hin)
{
    const size_t n = c->count;
    size_t in_n = n, out_n = n;
    if (!strcmp(c->name, "alltoall") || !strcmp(c->name, "reduce_scatter_block")) in_n = n * size;
    if (!strcmp(c->name, "alltoall") || !strcmp(c->name, "allgather")) out_n = n * size;
    for (size_t i = 0; i < in_n; ++i) hin[i] = value(rank, i);
    cudaMemcpy(din, hin, in_n * sizeof(float), cudaMemcpyHostToDevice);
    if (!strcmp(c->name, "bcast")) cudaMemcpy(dout, hin, n * sizeof(float), cudaMemcpyHostToDevice);
    else cudaMemset(dout, 0xff, out_n * sizeof(float));
    cudaDeviceSynchronize();
}

static int call(const coll_case_t *c, float *din, float *dout)
{
    const int n = (int)c->count;
    MPI_Comm w = MPI_COMM_WORLD;
    if (!strcmp(c->name, "allreduce")) return MPI_Allreduce(din, dout, n, MPI_FLOAT, MPI_SUM, w);
    if (!strcmp(c->name, "bcast")) return MPI_Bcast(dout, n, MPI_FLOAT, 0, w);
    if (!strcmp(c->name, "alltoall")) return MPI_Alltoall(din, n, MPI_FLOAT, dout, n, MPI_FLOAT, w);
    if (!strcmp(c->name, "allgather")) return MPI_Allgather(din, n, MPI_FLOAT, dout, n, MPI_FLOAT, w);
    if (!strcmp(c->name, "reduce_scatter_block")) return MPI_Reduce_scatter_block(din, dout, n, MPI_FLOAT, MPI_SUM, w);
    if (!strcmp(c->name, "scan")) return MPI_Scan(din, dout, n, MPI_FLOAT, MPI_SUM, w);
    MPI_Request q;
    int rc = MPI_Iallreduce(din, dout, n, MPI_FLOAT, MPI_SUM, w, &q);
    return rc != MPI_SUCCESS ? rc : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* Element by element against the host's reference. */
static long check(const coll_case_t *c, int rank, int size, float *dout, float *hout)
{
    const size_t n = c->count;
    const int blocks = !strcmp(c->name, "alltoall") || !strcmp(c->name, "allgather") ? size : 1;
    cudaMemcpy(hout, dout, n * blocks * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong = 0;
    for (int b = 0; b < blocks; ++b)
        for (size_t i = 0; i < n; ++i) {
            float want = 0;
            if (!strcmp(c->name, "allreduce") || !strcmp(c->name, "iallreduce"))
                for (int r = 0; r < size; ++r) want += value(r, i);
            else if (!strcmp(c->name, "scan"))
                for (int r = 0; r <= rank; ++r) want += value(r, i);
            else if (!strcmp(c->name, "bcast"))
                want = value(0, i);
            else if (!strcmp(c->name, "alltoall"))
                want = value(b, (size_t)rank * n + i);
            else if (!strcmp(c->name, "allgather"))
                want = value(b, i);
            else /* reduce_scatter_block */
                for (int r = 0; r < size; ++r) want += value(r, (size_t)rank * n + i);
            if (hout[(size_t)b * n + i] != want) {
                if (wrong < 3)
                    fprintf(stderr, "rank %d: %s count %zu: [%d][%zu] = %g, want %g\n", rank, c->name, n, b, i,
                            hout[(size_t)b * n + i], want);
                ++wrong;
            }
        }
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int late = argc > 1 ? atoi(argv[1]) : 1;
    const double seconds = argc > 2 ? atof(argv[2]) : 3;
    const char *phases = argc > 3 ? argv[3] : "both";
    const int first_kind = strcmp(phases, "gpu") ? KIND_HOST : KIND_GPU,
              last_kind = strcmp(phases, "host") ? KIND_GPU : KIND_HOST;
    if (!use_gpu_or_finalize(rank)) return 77;
    const size_t most = (size_t)(1u << 20) * (size_t)(size > 4 ? size : 4);
    float *din, *dout, *hin = malloc(most * sizeof(float)), *hout = malloc(most * sizeof(float));
    cudaMalloc((void **)&din, most * sizeof(float));
    cudaMalloc((void **)&dout, most * sizeof(float));
    /* Everyone on time once: loom's communicator is made. */
    int rc = MPI_Allreduce(MPI_IN_PLACE, din, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = rc != MPI_SUCCESS;
    int calls = 0;
    int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
    if (argc > 4 && atoi(argv[4]) > 0 && atoi(argv[4]) < ncases) ncases = atoi(argv[4]);
    for (int kind = first_kind; kind <= last_kind; ++kind)
        for (int k = 0; k < ncases; ++k) {
            const coll_case_t *c = &cases[k];
            fill_case(c, rank, size, din, dout, hin);
            MPI_Barrier(MPI_COMM_WORLD); /* on the host: everyone starts the case together */
            if (rank == late) {
                if (kind == KIND_HOST) usleep((useconds_t)(seconds * 1e6));
                else if (busy_gpu(seconds, 0) != 0) ++wrong;
            }
            const double t0 = MPI_Wtime();
            rc = call(c, din, dout);
            const double took = MPI_Wtime() - t0;
            ++calls;
            if (rc != MPI_SUCCESS) {
                char msg[MPI_MAX_ERROR_STRING];
                int len = 0;
                MPI_Error_string(rc, msg, &len);
                fprintf(stderr, "rank %d: %s (count %zu) with rank %d late on its %s: error %s\n", rank, c->name,
                        c->count, late, kind == KIND_HOST ? "host" : "GPU", msg);
                ++wrong;
                continue;
            }
            wrong += check(c, rank, size, dout, hout);
            if (rank != late && took < seconds * 0.5) /* the call cannot finish before the late rank came */
                fprintf(stderr, "rank %d: %s finished in %.2f s, before the late rank came (%.0f s)?\n", rank,
                        c->name, took, seconds);
        }
    long all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("late_rank: %d ranks, %d calls with rank %d %.0f s late (%s): %ld wrong elements or "
               "errors\n", size, calls, late, seconds,
               first_kind == last_kind ? (first_kind == KIND_HOST ? "host" : "GPU") : "host, then GPU", all);
    cudaFree(din);
    cudaFree(dout);
    free(hin);
    free(hout);
    MPI_Finalize();
    return all ? 1 : 0;
}
