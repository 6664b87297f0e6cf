/* The proxy's cost when nothing moves: after device-buffer allreduces that
 * went through the net transport (run it with LOOM_FAKE_NODES=1), every rank
 * sleeps for a few seconds and measures its process's CPU time meanwhile —
 * all of it the proxy threads' (and MPI's) idling. Fails above 5% of one core.
 * Then one more allreduce checks that the sleeping proxies wake up. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpuSeconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double wallSeconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* One allreduce of n floats on device buffers; returns the number of wrong elements. */
static long allreduceOnce(int n, int rank, int size)
{
    float *h = malloc(n * sizeof(float)), *d;
    cudaMalloc((void **)&d, n * sizeof(float));
    for (int i = 0; i < n; ++i) h[i] = (float)(rank + 1 + i % 7);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong = 0;
    for (int i = 0; i < n; ++i) wrong += h[i] != (float)(size * (size + 1) / 2 + size * (i % 7));
    cudaFree(d);
    free(h);
    return wrong;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cudaGetDeviceCount(&ndev);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaSetDevice((lr ? atoi(lr) : rank) % (ndev ? ndev : 1));
    const double idleSeconds = argc > 1 ? atof(argv[1]) : 4.0;

    long wrong = 0;
    for (int i = 0; i < 20; ++i) wrong += allreduceOnce(1 << 20, rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(100000); /* the proxies' last spin ends */
    double c0 = cpuSeconds(), w0 = wallSeconds();
    usleep((useconds_t)(idleSeconds * 1e6));
    double share = (cpuSeconds() - c0) / (wallSeconds() - w0);
    double t0 = wallSeconds();
    wrong += allreduceOnce(1 << 20, rank, size);
    double wake = wallSeconds() - t0;

    double worst = 0;
    MPI_Reduce(&share, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long allWrong = 0;
    MPI_Reduce(&wrong, &allWrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0) {
        printf("proxy_idle: %d ranks: idle process CPU over %.1f s: %.2f%% of a core (worst rank); "
               "first allreduce after it %.2f ms; %ld wrong elements\n",
               size, idleSeconds, 100 * worst, 1e3 * wake, allWrong);
        ok = worst <= 0.05 && allWrong == 0;
        if (!ok) printf("proxy_idle: FAIL (limit 5%% of a core, 0 wrong)\n");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
