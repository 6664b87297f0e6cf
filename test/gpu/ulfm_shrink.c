/* Survivors go on (ULFM, Open MPI 5 with its ftmpi extension; mpirun
 * --with-ft ulfm, which the .mpitest's NEEDS_ULFM asks for). Every rank runs
 * device allreduces; rank VICTIM (argv[1], default: the last) kills itself
 * with SIGKILL in call KILL_AT (argv[2], default 20). Each survivor's
 * pending or next call must fail with MPI_ERR_PROC_FAILED within 5 s of the
 * death; the survivors then revoke MPI_COMM_WORLD, shrink it, and run
 * ROUNDS (argv[3], default 1000) rounds of device allreduce, bcast and
 * alltoall on the shrunken communicator (loom makes a fresh communicator
 * for it), each checked element by element. Exit 0 when all of that held;
 * 77 (skipped) where Open MPI has no ULFM. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include "device_checks.h"

#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
#define HAVE_ULFM 1
#endif

#ifdef HAVE_ULFM
static int is_proc_failed(int rc)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED;
}

/* Rounds of device collectives on comm, checked: the number of wrong elements. */
static long rounds_on(MPI_Comm comm, int rounds, float *d, float *h, int n)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long wrong = 0;
    const int block = n / size;
    for (int it = 0; it < rounds; ++it) {
        for (int i = 0; i < n; ++i) h[i] = (float)((rank + it + i) % 17);
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
        int rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, comm);
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int i = 0; i < n; ++i) {
            float want = 0;
            for (int r = 0; r < size; ++r) want += (float)((r + it + i) % 17);
            wrong += rc != MPI_SUCCESS || h[i] != want;
        }
        const int root = it % size;
        for (int i = 0; i < n; ++i) h[i] = rank == root ? (float)((it * 3 + i) % 23) : -1.0f;
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
        rc = MPI_Bcast(d, n, MPI_FLOAT, root, comm);
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int i = 0; i < n; ++i) wrong += rc != MPI_SUCCESS || h[i] != (float)((it * 3 + i) % 23);
        for (int i = 0; i < n; ++i) h[i] = (float)(rank * 1000 + i % 997);
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
        rc = MPI_Alltoall(MPI_IN_PLACE, block, MPI_FLOAT, d, block, MPI_FLOAT, comm);
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < block; ++i)
                wrong += rc != MPI_SUCCESS || h[q * block + i] != (float)(q * 1000 + (rank * block + i) % 997);
        if (wrong) {
            fprintf(stderr, "rank %d: round %d: %ld wrong\n", rank, it, wrong);
            break;
        }
    }
    return wrong;
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifndef HAVE_ULFM
    if (rank == 0) printf("SKIP: this Open MPI has no ULFM (ftmpi extension)\n");
    MPI_Finalize();
    return 77;
#else
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int victim = argc > 1 && atoi(argv[1]) < size ? atoi(argv[1]) : size - 1;
    const int kill_at = argc > 2 ? atoi(argv[2]) : 20;
    const int rounds = argc > 3 ? atoi(argv[3]) : 1000;
    if (!use_gpu_or_finalize(rank)) return 77;
    const int n = 12 * 1024; /* divisible by every size up to 4 */
    float *d, *h = malloc(n * sizeof(float));
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    double failed_after = -1;
    int rc = MPI_SUCCESS;
    for (int call = 1; call <= kill_at + 10000; ++call) {
        if (rank == victim && call == kill_at) raise(SIGKILL);
        const double t0 = MPI_Wtime();
        rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            failed_after = MPI_Wtime() - t0;
            break;
        }
    }
    long bad = 0;
    if (!is_proc_failed(rc)) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "rank %d: the failed call returned %s, not MPI_ERR_PROC_FAILED\n", rank, msg);
        ++bad;
    }
    /* The call that failed began at most one call before the death: its wait is the detection time. */
    if (failed_after > 5) {
        fprintf(stderr, "rank %d: the failure took %.1f s to report\n", rank, failed_after);
        ++bad;
    }
    MPIX_Comm_revoke(MPI_COMM_WORLD);
    MPI_Comm shrunk;
    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPIX_Comm_shrink failed\n", rank);
        MPI_Abort(MPI_COMM_SELF, 1);
    }
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    bad += rounds_on(shrunk, rounds, d, h, n);
    int flag = bad == 0;
    MPIX_Comm_agree(shrunk, &flag); /* AND over the survivors */
    int srank, ssize;
    MPI_Comm_rank(shrunk, &srank);
    MPI_Comm_size(shrunk, &ssize);
    if (srank == 0)
        printf("ulfm_shrink: rank %d killed in call %d; %d survivors got MPI_ERR_PROC_FAILED, shrank and ran %d "
               "rounds of allreduce, bcast, alltoall: %s\n", victim, kill_at, ssize, rounds,
               flag ? "0 wrong elements or errors" : "FAILED");
    MPI_Comm_free(&shrunk);
    cudaFree(d);
    free(h);
    MPI_Finalize();
    return flag ? 0 : 1;
#endif
}
