/*
 * 1000 MPI_Comm_dup / collective / MPI_Comm_free cycles must not grow the
 * process: every loom module, and every previous module it retains, must be
 * released with its communicator.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rss.h"

static void cycles(int n)
{
    for (int i = 0; i < n; ++i) {
        MPI_Comm dup;
        int in = i, out = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, dup);
        MPI_Comm_free(&dup);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int warmup = 200, measured = 1000;
#ifdef __SANITIZE_ADDRESS__
    /* ASan's quarantine holds freed memory back, so RSS grows by design;
     * LeakSanitizer checks at exit what this limit checks otherwise. */
    const long limit_kib = 1L << 30;
    if (rank == 0) printf("dup_free: built with AddressSanitizer: RSS limit off, leaks checked at exit\n");
#else
    const long limit_kib = 1024; /* a leaked module per cycle would be far more */
#endif
    cycles(warmup);
    long before = rss_kib();
    cycles(measured);
    long after = rss_kib();
    long growth = after - before, worst = 0;
    MPI_Allreduce(&growth, &worst, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("dup_free: %d dup/free cycles after %d warm-up: RSS grew by at most %ld KiB (limit %ld KiB): %s\n",
               measured, warmup, worst, limit_kib, worst <= limit_kib ? "ok" : "FAIL");
    MPI_Finalize();
    return worst <= limit_kib ? 0 : 1;
}
