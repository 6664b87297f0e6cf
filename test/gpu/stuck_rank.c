/* A stuck peer is an error. Rank STUCK (argv[1], default 1) runs with
 * LOOM_STUCK_RANK and LOOM_STUCK_CALL=2 (the .mpitest sets them): its GPU
 * says it started the second allreduce and then does none of it, as a hung
 * GPU would. Every other rank must get an MPI error (not a hang, not
 * MPI_ERR_PROC_FAILED: the process is alive) within LOOM_STUCK_TIMEOUT
 * (argv[2] seconds, default 3) + 5 s; the .mpitest checks that the message
 * says the peer stopped moving inside the call. The stuck rank's next call,
 * which the others (whose communicator failed) never make, must fail
 * within 5 s. Exit 0 on every rank when that held. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "device_checks.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int stuck = argc > 1 ? atoi(argv[1]) : 1;
    const double timeout = argc > 2 ? atof(argv[2]) : 3;
    if (!use_gpu_or_finalize(rank)) return 77;
    const int n = 1 << 18; /* 1 MiB of floats: the ring */
    float *d;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    int rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* call 1: everyone moves */
    int bad = rc != MPI_SUCCESS;
    const double t0 = MPI_Wtime();
    rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* call 2: rank STUCK stops */
    const double took = MPI_Wtime() - t0;
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (rank == stuck) {
        printf("stuck_rank: rank %d (the stuck one): %s after %.1f s\n", rank, rc == MPI_SUCCESS ? "returned" : "error",
               took);
        /* Its own side still works, but the others' failed: its next call,
         * which they never make, must fail in seconds (their watchdogs put
         * the failure on their board slots), not wait for them for ever. */
        const double t1 = MPI_Wtime();
        rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double next = MPI_Wtime() - t1;
        const int ok = rc != MPI_SUCCESS && next <= 5;
        printf("stuck_rank: rank %d: its next call: %s after %.1f s: %s\n", rank, rc == MPI_SUCCESS ? "success" : "error",
               next, ok ? "ok" : "FAIL");
        bad += !ok;
    } else {
        const int in_time = took >= timeout * 0.9 && took <= timeout + 5;
        const int ok = rc != MPI_SUCCESS && cls == MPI_ERR_OTHER && in_time;
        printf("stuck_rank: rank %d: %s (class %d) after %.1f s: %s\n", rank, rc == MPI_SUCCESS ? "success" : "error",
               cls, took, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    fflush(stdout);
    /* No collective on MPI_COMM_WORLD after its failure (MPI leaves its
     * state undefined; the stuck rank's side of it still looks healthy):
     * each rank's exit status is its verdict, and mpirun's is theirs. */
    cudaFree(d);
    MPI_Finalize();
    return bad ? 1 : 0;
}
