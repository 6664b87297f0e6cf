/* What the derived-datatype collective tests (coll_dtypes, coll_dtype_reduce)
 * share: start-up with a GPU per rank and two duplicates of MPI_COMM_WORLD
 * (dev_comm for the device-buffer calls, ref_comm for the host reference,
 * which loom never runs on GPUs), and the first byte where a device buffer
 * differs from its host reference. */
#ifndef LOOM_TEST_DT_COLL_COMMON_H
#define LOOM_TEST_DT_COLL_COMMON_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "device_checks.h"

static int me, np;
static MPI_Comm dev_comm, ref_comm;

/* 0 after MPI_Finalize (no GPU, or more than 64 ranks: the caller returns 77). */
static inline int dt_coll_start(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (!use_gpu_or_finalize(me)) return 0;
    if (np > 64) {
        if (0 == me) printf("SKIP: at most 64 ranks\n");
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dev_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &ref_comm);
    return 1;
}

/* The first byte where bytes of device memory dev differ from host, or -1. */
static inline long dt_first_diff(const char *dev, const char *host, size_t bytes)
{
    char *got = (char *)malloc(bytes ? bytes : 1);
    long bad = -1;
    cudaMemcpy(got, dev, bytes, cudaMemcpyDeviceToHost);
    for (size_t i = 0; bad < 0 && i < bytes; ++i)
        if (got[i] != host[i]) bad = (long)i;
    free(got);
    return bad;
}

#endif
