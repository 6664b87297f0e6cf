/* A peer's buffer that cannot be mapped for an in-place exchange block
 * (fault injected: LOOM_DIRECT_MAP_FAIL names rank F, whose mappings fail as
 * if CUDA IPC refused them). Every block moves in place
 * (LOOM_EXCHANGE_DIRECT_BYTES=1 LOOM_GATHER_DIRECT_BYTES=1, one-shot off);
 * gathers push where LOOM_EXCHANGE_DIRECT_PUSH is 1 or 2 or the block is at
 * least LOOM_EXCHANGE_COPY_ENGINE_BYTES (its peers' copy engines write),
 * else the root's SMs pull; the .mpitest sets them.
 *  - MPI_Alltoall, pulled: F cannot map its senders' inputs. F's call must
 *    fail; every other rank's must succeed with every block right (F's
 *    blocks included: its peers map F's input). Pushed
 *    (LOOM_EXCHANGE_DIRECT_PUSH=2 or LOOM_EXCHANGE_COPY_ENGINES=1): F cannot
 *    map its receivers' outputs; every call fails (F's block never came),
 *    and every rank but F holds every other block.
 *  - MPI_Gather to root R != F (argv[1], default F + 1), pushed: F cannot map
 *    R's output. F's call fails (its own mapping) and R's fails (F's block
 *    never came); the others succeed, and R holds every other rank's block.
 *  - Or, pulled: MPI_Gather to root F, which cannot map its senders' inputs:
 *    F's call fails, the others' succeed, and F's own block is right.
 *  - After each, an allreduce on device buffers succeeds on every rank: the
 *    communicator stays usable.
 * Prints one line per case; exit status: the number of cases that went wrong
 * on any rank. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

static int rank, size;

static unsigned char pattern(int from, int to, size_t i) { return (unsigned char)(from * 31 + to * 7 + i); }

/* 0 when every rank saw `bad` == 0; prints the case on rank 0. */
static int report(const char *name, int bad)
{
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) fprintf(stderr, "rank %d: %s: wrong outcome\n", rank, name);
    if (0 == rank) printf("%s %s\n", any ? "FAIL" : "ok  ", name);
    return any != 0;
}

/* 1 when the block of `per` bytes at `got` is not what `from` sent this rank. */
static int wrong_block(const unsigned char *got, int from, size_t per)
{
    for (size_t i = 0; i < per; ++i)
        if (got[i] != pattern(from, rank, i)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice(ndev ? rank % ndev : 0);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *env = getenv("LOOM_DIRECT_MAP_FAIL");
    const int F = env ? atoi(env) : -1;
    const int R = argc > 1 ? atoi(argv[1]) : (F + 1) % size;
    if (F < 0 || F >= size || R == F) {
        if (0 == rank) fprintf(stderr, "direct_map_fail: set LOOM_DIRECT_MAP_FAIL to a rank, and a root other than it\n");
        MPI_Finalize();
        return 2;
    }
    const size_t per = 4096 + 3; /* an odd block: a ragged last slice */
    unsigned char *hs = malloc(per * size), *hr = malloc(per * size);
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < per; ++i) hs[q * per + i] = pattern(rank, q, i);
    unsigned char *ds = dalloc(per * size), *dr = dalloc(per * size);
    cudaMemcpy(ds, hs, per * size, cudaMemcpyHostToDevice);
    int failures = 0;

    const char *push = getenv("LOOM_EXCHANGE_DIRECT_PUSH"), *engines = getenv("LOOM_EXCHANGE_COPY_ENGINE_BYTES");
    const char *all_engines = getenv("LOOM_EXCHANGE_COPY_ENGINES");
    const int engines_mode = all_engines && atoi(all_engines) == 1; /* every pair pushed (copy engines) */
    const int alltoall_pushed = engines_mode || (push && atoi(push) == 2);
    cudaMemset(dr, 0xEE, per * size);
    int rc = MPI_Alltoall(ds, (int)per, MPI_BYTE, dr, (int)per, MPI_BYTE, MPI_COMM_WORLD);
    cudaMemcpy(hr, dr, per * size, cudaMemcpyDeviceToHost);
    int bad;
    if (alltoall_pushed) {
        /* Pushed: F's writes into its peers' outputs fail. Every call fails
         * (F's own; the others miss F's block), and every rank but F holds
         * every other block. */
        bad = rc == MPI_SUCCESS;
        for (int q = 0; rank != F && q < size; ++q)
            if (q != F) bad |= wrong_block(hr + q * per, q, per);
        failures += report("alltoall, pushed: the writer whose mappings fail and its receivers get errors, the "
                           "receivers every other block", bad);
    } else {
        /* Pulled: F's reads fail. */
        bad = rank == F ? rc == MPI_SUCCESS : rc != MPI_SUCCESS;
        for (int q = 0; rank != F && q < size; ++q) bad |= wrong_block(hr + q * per, q, per);
        failures += report("alltoall: the reader whose mappings fail gets an error, the others their data", bad);
    }
    failures += report("alltoall: the communicator stays usable", still_usable(MPI_COMM_WORLD));

    const long engine_bytes = engines ? atol(engines) : 64L << 20; /* the default */
    if (engines_mode || (push && atoi(push) >= 1) || (engine_bytes > 0 && (size_t)engine_bytes <= per)) {
        /* Gather to R, pushed: F's write into R's output fails. */
        cudaMemset(dr, 0xEE, per * size);
        rc = MPI_Gather(ds + (size_t)R * per, (int)per, MPI_BYTE, dr, (int)per, MPI_BYTE, R, MPI_COMM_WORLD);
        cudaMemcpy(hr, dr, per * size, cudaMemcpyDeviceToHost);
        bad = rank == F || rank == R ? rc == MPI_SUCCESS : rc != MPI_SUCCESS;
        for (int q = 0; rank == R && q < size; ++q)
            if (q != F) bad |= wrong_block(hr + q * per, q, per);
        failures += report("gather: the writer whose mapping fails and its root get errors, the root the other "
                           "blocks", bad);
    } else {
        /* Gather to F, pulled: F's reads of its senders' inputs fail. */
        cudaMemset(dr, 0xEE, per * size);
        rc = MPI_Gather(ds + (size_t)F * per, (int)per, MPI_BYTE, dr, (int)per, MPI_BYTE, F, MPI_COMM_WORLD);
        cudaMemcpy(hr, dr, per * size, cudaMemcpyDeviceToHost);
        bad = rank == F ? rc == MPI_SUCCESS || wrong_block(hr + (size_t)F * per, F, per) : rc != MPI_SUCCESS;
        failures += report("gather: the root whose mappings fail gets an error, its senders succeed", bad);
    }
    failures += report("gather: the communicator stays usable", still_usable(MPI_COMM_WORLD));

    cudaFree(ds);
    cudaFree(dr);
    free(hs);
    free(hr);
    MPI_Finalize();
    return failures;
}
