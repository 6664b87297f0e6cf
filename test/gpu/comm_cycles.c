/*
 * Communicator churn on device buffers: create a communicator (MPI_Comm_dup,
 * or MPI_Comm_split in reversed rank order every third cycle), run one
 * allreduce on device buffers through it (which creates its loom
 * communicator: connections, FIFOs, IPC mappings, proxy links), check the
 * result, free it. Host RSS and GPU memory must not grow:
 *
 *   comm_cycles [-n CYCLES] [-w WARMUP] [-t SECONDS]
 *
 * Memory is taken after WARMUP cycles and at the end (after at most SECONDS
 * of cycles); limits: GPU memory in use +0 (within 2 MiB, the driver's own
 * granularity), RSS +4 MiB. Rank 0 prints the figures and the rate.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi/rss.h"

static long gpu_used_kib(void)
{
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return (long)((total_b - free_b) / 1024);
}

enum { N = 4099 };

/* One cycle; returns the number of wrong elements (or 1 for an error). */
static int cycle(long i, int rank, int size, int *d_in, int *d_out, int *h)
{
    MPI_Comm comm;
    if (i % 3 == 2) MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comm);
    else MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (int k = 0; k < N; ++k) h[k] = (int)((i + k + rank) % 1000);
    cudaMemcpy(d_in, h, N * sizeof(int), cudaMemcpyHostToDevice);
    int bad = MPI_SUCCESS != MPI_Allreduce(d_in, d_out, N, MPI_INT, MPI_SUM, comm);
    cudaMemcpy(h, d_out, N * sizeof(int), cudaMemcpyDeviceToHost);
    for (int k = 0; k < N && !bad; ++k) {
        int want = 0;
        for (int q = 0; q < size; ++q) want += (int)((i + k + q) % 1000);
        if (h[k] != want) {
            fprintf(stderr, "comm_cycles: rank %d cycle %ld element %d: got %d, want %d\n", rank, i, k, h[k], want);
            bad = 1;
        }
    }
    MPI_Comm_free(&comm);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long cycles = 1000, warmup = 100;
    double seconds = 1e9;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "-n")) cycles = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-w")) warmup = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-t")) seconds = atof(argv[a + 1]);
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaGetDeviceCount(&ndev);
    if (ndev <= 0 || cudaSuccess != cudaSetDevice((lr ? atoi(lr) : 0) % ndev)) {
        fprintf(stderr, "comm_cycles: no usable GPU\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int *d_in = NULL, *d_out = NULL, *h = malloc(N * sizeof(int));
    cudaMalloc((void **)&d_in, N * sizeof(int));
    cudaMalloc((void **)&d_out, N * sizeof(int));
    long wrong = 0, done = 0;
    for (; done < warmup; ++done) wrong += cycle(done, rank, size, d_in, d_out, h);
    MPI_Barrier(MPI_COMM_WORLD);
    const long rss0 = rss_kib(), gpu0 = gpu_used_kib();
    const double t0 = MPI_Wtime();
    int go = 1;
    while (go) {
        wrong += cycle(done++, rank, size, d_in, d_out, h);
        /* Every rank stops at the same cycle: rank 0's clock decides. */
        int more = done < cycles && MPI_Wtime() - t0 < seconds;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        go = more;
    }
    const double t = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    const long rss1 = rss_kib(), gpu1 = gpu_used_kib();
    long mine[3] = {wrong, rss1 - rss0, gpu1 - gpu0}, worst[3];
    MPI_Allreduce(mine, worst, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    long total_wrong = 0;
    MPI_Allreduce(&wrong, &total_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    const int ok = 0 == total_wrong && worst[1] <= 4096 && worst[2] <= 2048;
    if (0 == rank)
        printf("comm_cycles: %d ranks, %ld cycles (%ld after warm-up, %.1f s, %.2f ms each): %ld wrong; "
               "worst rank: host RSS %+ld KiB, GPU memory in use %+ld KiB (rank 0: RSS %ld KiB, GPU %ld MiB "
               "in use)%s\n",
               size, done, done - warmup, t, 1e3 * t / (double)(done - warmup), total_wrong, worst[1], worst[2], rss1,
               gpu1 / 1024, ok ? "" : "  FAIL");
    cudaFree(d_in);
    cudaFree(d_out);
    free(h);
    MPI_Finalize();
    return ok ? 0 : 1;
}
