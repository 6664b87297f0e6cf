/* What the GPU fault and bad-input tests share: a device allocation that
 * aborts the job when it fails, and the check that a communicator still
 * works after a call that failed or went wrong. */
#ifndef LOOM_TEST_DEVICE_CHECKS_H
#define LOOM_TEST_DEVICE_CHECKS_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>

static inline void *dalloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* Picks GPU rank % count; false (after "SKIP: no GPU" from rank 0 and
 * MPI_Finalize) where there is none: the caller returns 77. */
static inline int use_gpu_or_finalize(int rank)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0) printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 0;
    }
    cudaSetDevice(rank % ndev);
    return 1;
}

/* 0 when a small allreduce on device memory still gives the right sums. */
static inline int still_usable(MPI_Comm comm)
{
    int n = 0, me = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    float h[33], *d = (float *)dalloc(sizeof(h));
    for (int i = 0; i < 33; ++i) h[i] = (float)(me + i);
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    int rc = MPI_Allreduce(MPI_IN_PLACE, d, 33, MPI_FLOAT, MPI_SUM, comm);
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    cudaFree(d);
    int bad = rc != MPI_SUCCESS;
    for (int i = 0; i < 33; ++i) bad |= h[i] != (float)(n * (n - 1) / 2 + n * i);
    return bad;
}

#endif
