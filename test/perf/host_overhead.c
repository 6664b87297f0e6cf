/*
 * Time per 8-byte MPI_Allreduce on host buffers. Run it with and without loom
 * (--mca coll ^loom); the difference is what loom's routing check costs.
 * usage: host_overhead [iterations]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    double in = 1.0, out = 0.0;
    for (int i = 0; i < 1000; ++i) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; ++i) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double us = (MPI_Wtime() - t0) * 1e6 / (double)iters;
        MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (us < best) best = us;
    }
    if (rank == 0) printf("host_overhead: 8-byte MPI_Allreduce on host buffers: %.3f us per call (best of 5 x %ld)\n", best, iters);
    MPI_Finalize();
    return 0;
}
