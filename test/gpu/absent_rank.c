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
 * the ring's: the report names the peers of the step that stalled), or
 * "ipending": the second call is two MPI_Iallreduce, 8 B (posted to the
 * resident kernel, pending) then 1 MiB (launched behind it on loom's
 * stream), then cudaDeviceSynchronize, then MPI_Waitall: the failed pending
 * call must release loom's stream (no hang in the synchronize) and both
 * requests fail, within two timeouts (the launched kernel times out too). */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int call(const char *coll, float *d, int n, int size)
{
    if (!strcmp(coll, "ipending")) {
        MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int rc = MPI_Iallreduce(MPI_IN_PLACE, d, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
        if (rc == MPI_SUCCESS) rc = MPI_Iallreduce(MPI_IN_PLACE, d + 1024, n - 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q[1]);
        cudaDeviceSynchronize();
        const int w = MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        return rc != MPI_SUCCESS ? rc : w;
    }
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
    int rc = first ? MPI_SUCCESS : call(strcmp(coll, "ipending") ? coll : "allreduce", d, n, size);
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
    const double bound = strcmp(coll, "ipending") ? timeout + 5 : 2 * timeout + 5;
    int bad = rank != absent && (rc == MPI_SUCCESS || took > bound);
    if (bad) fprintf(stderr, "rank %d: expected an error within %.0f s\n", rank, bound);
    cudaFree(d);
    MPI_Finalize();
    return bad;
}
