/* A rank that never arrives. After one allreduce that every rank joins
 * (it creates loom's communicator), rank ABSENT (argv[1], default 1) sleeps
 * past LOOM_TIMEOUT (argv[2] seconds, default 3; the .mpitest sets the same)
 * before its next allreduce of 1 MiB of floats on device buffers. Every other
 * rank's call must return an MPI error within LOOM_TIMEOUT + 5 s instead of
 * hanging, and loom's report (checked by the .mpitest's EXPECT_LOG) must
 * name the absent rank. With argv[3] "first" the absent rank never calls
 * the allreduce (it sleeps, then finalizes): the others wait in loom's
 * host-side set-up (the probe of the communicator's first collective) and
 * must fail in the same time. Exit status: 0 when every waiting rank failed
 * in time; the absent rank's own late call (not in "first" mode: its
 * set-up would meet the per-call agreement, which MPI leaves unbounded)
 * fails too, its peers having given up. argv[4] (default allreduce): the
 * collective both calls are, alltoall or scan instead (their peers are not
 * the ring's: the report names the peers of the step that stalled). */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int call(const char *coll, float *d, int n, int size)
{
    if (!strcmp(coll, "alltoall"))
        return MPI_Alltoall(MPI_IN_PLACE, n / size, MPI_FLOAT, d, n / size, MPI_FLOAT, MPI_COMM_WORLD);
    if (!strcmp(coll, "scan")) return MPI_Scan(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static double wallSeconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int absent = argc > 1 ? atoi(argv[1]) : 1;
    const double timeout = argc > 2 ? atof(argv[2]) : 3;
    const int first = argc > 3 && 0 == strcmp(argv[3], "first");
    const char *coll = argc > 4 ? argv[4] : "allreduce";
    cudaGetDeviceCount(&ndev);
    cudaSetDevice(ndev ? rank % ndev : 0);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int n = 1 << 18;
    float *d;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    int rc = first ? MPI_SUCCESS : call(coll, d, n, size);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: the first %s failed\n", rank, coll);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cudaDeviceSynchronize();
    if (rank == absent) sleep((unsigned)(timeout + 4));
    if (rank == absent && first) {
        cudaFree(d);
        MPI_Finalize();
        return 0;
    }
    const double t0 = wallSeconds();
    rc = call(coll, d, n, size);
    const double took = wallSeconds() - t0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, msg, &len);
    printf("rank %d%s: %s returned %s after %.1f s\n", rank, rank == absent ? " (absent)" : "", coll,
           rc == MPI_SUCCESS ? "success" : msg, took);
    int bad = rank != absent && (rc == MPI_SUCCESS || took > timeout + 5);
    if (bad) fprintf(stderr, "rank %d: expected an error within %.0f s\n", rank, timeout + 5);
    cudaFree(d);
    MPI_Finalize();
    return bad;
}
