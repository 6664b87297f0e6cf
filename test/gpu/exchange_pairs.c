/*
 * The v-forms' one-shot pairs (LOOM_EXCHANGE_ONESHOT_BYTES,
 * src/device/exchange/exchange_schedule.h) where the two kernels meet: in
 * one call some ranks have only small pairs (they run the one-shot kernel)
 * while others also have large ones (the exchange kernel, which moves their
 * small pairs as the same LL lines), and calls of every shape follow one
 * another, with one-shot allreduces between them, so that the slots' two
 * parities are reused under every mix. Per iteration on device buffers:
 *   alltoallv (MPI_CHAR), four shapes: ranks 0 and 1 trade large blocks
 *     and every other pair is small (both kernels in one call); every pair
 *     small (all on one-shot); every pair large or empty (the exchange
 *     kernel, token lines on the empty pairs); large blocks to higher
 *     ranks, small ones to lower (small pairs on the exchange kernel at
 *     any rank count, 2 too);
 *   gatherv and scatterv (MPI_INT) at a moving root, odd ranks' blocks
 *     large, even ranks' small;
 *   an 8-int allreduce (one-shot: it takes a flag of the same counter).
 * Every byte is compared with what its sender put there; the run's trace
 * must show both kernels (the test's .mpitest).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITERS = 12, SHAPES = 4, SMALL_MAX = 4099, LARGE = 300001, SENTINEL = 0x5a };

static int rank, nranks;

/* Byte j of what rank s sends rank r in call k. */
static uint8_t pattern(int k, int s, int r, size_t j) { return (uint8_t)(k * 13 + s * 31 + r * 17 + j * 7 + 1); }

/* A small block: 0, 1 or an odd size up to SMALL_MAX, by call and pair. */
static size_t small_bytes(int k, int s, int r)
{
    const size_t sizes[] = {0, 1, 333, 4097, 64, SMALL_MAX, 7};
    return sizes[(size_t)(k * 3 + s * 5 + r * 2) % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* Bytes rank s sends rank r in alltoallv call k of shape `shape`. */
static size_t a2a_bytes(int shape, int k, int s, int r)
{
    if (s == r) return 1000 + (size_t)s;
    if (shape == 3) return s < r ? LARGE + (size_t)r : 1 + (size_t)(k * 3 + s * 5 + r * 2) % 333; /* one way each */
    if (shape == 0) return (s < 2 && r < 2) ? LARGE + (size_t)k : small_bytes(k, s, r) + 1; /* mixed */
    if (shape == 1) return small_bytes(k, s, r);                                           /* all small */
    return (s + r + k) % 3 ? LARGE - (size_t)s : 0;                                        /* large or empty */
}

static long check(const uint8_t *got, size_t at, int k, int s, int r, size_t bytes, const char *what)
{
    long bad = 0;
    for (size_t j = 0; j < bytes; ++j)
        if (got[at + j] != pattern(k, s, r, j) && bad++ < 3)
            fprintf(stderr, "rank %d: %s call %d: byte %zu of rank %d's block is %u, want %u\n", rank, what, k, j, s,
                    got[at + j], pattern(k, s, r, j));
    return bad;
}

static long alltoallv(int shape, int k, MPI_Comm comm)
{
    int *sc = malloc(sizeof(int) * nranks), *sd = malloc(sizeof(int) * nranks), *rc = malloc(sizeof(int) * nranks),
        *rd = malloc(sizeof(int) * nranks);
    size_t sall = 0, rall = 0;
    for (int q = 0; q < nranks; ++q) sd[q] = (int)sall, sc[q] = (int)a2a_bytes(shape, k, rank, q), sall += sc[q];
    for (int q = nranks - 1; q >= 0; --q) /* receive blocks reversed, 3 bytes apart */
        rd[q] = (int)rall, rc[q] = (int)a2a_bytes(shape, k, q, rank), rall += rc[q] + 3;
    uint8_t *host = malloc(sall + rall + 1), *in, *out;
    for (int q = 0; q < nranks; ++q)
        for (int j = 0; j < sc[q]; ++j) host[sd[q] + j] = pattern(k, rank, q, j);
    cudaMalloc((void **)&in, sall + 1);
    cudaMalloc((void **)&out, rall + 1);
    cudaMemcpy(in, host, sall, cudaMemcpyHostToDevice);
    cudaMemset(out, SENTINEL, rall + 1);
    long bad = MPI_Alltoallv(in, sc, sd, MPI_CHAR, out, rc, rd, MPI_CHAR, comm) != MPI_SUCCESS;
    cudaMemcpy(host, out, rall + 1, cudaMemcpyDeviceToHost);
    for (int q = 0; q < nranks; ++q) {
        bad += check(host, rd[q], k, q, rank, rc[q], "alltoallv");
        if (host[rd[q] + rc[q]] != SENTINEL) bad++, fprintf(stderr, "rank %d: alltoallv call %d wrote past block %d\n", rank, k, q);
    }
    cudaFree(in);
    cudaFree(out);
    free(host), free(sc), free(sd), free(rc), free(rd);
    return bad;
}

/* Ints rank q gives (gatherv) or takes (scatterv) at call k. */
static int rooted_ints(int k, int q) { return q % 2 ? LARGE / 4 + k : (int)small_bytes(k, q, 0) / 4; }

static long rooted(int gather, int k, MPI_Comm comm)
{
    const int root = k % nranks;
    int *counts = malloc(sizeof(int) * nranks), *displs = malloc(sizeof(int) * nranks);
    size_t all = 0;
    for (int q = 0; q < nranks; ++q) displs[q] = (int)all, counts[q] = rooted_ints(k, q), all += (size_t)counts[q] + 1;
    const size_t mine = (size_t)rooted_ints(k, rank) * 4, big = all * 4;
    uint8_t *host = malloc(big + mine + 1), *whole, *part;
    cudaMalloc((void **)&whole, big);
    cudaMalloc((void **)&part, mine + 4);
    long bad = 0;
    if (gather) {
        for (size_t j = 0; j < mine; ++j) host[j] = pattern(k, rank, root, j);
        cudaMemcpy(part, host, mine, cudaMemcpyHostToDevice);
        cudaMemset(whole, SENTINEL, big);
        bad += MPI_Gatherv(part, (int)(mine / 4), MPI_INT, whole, counts, displs, MPI_INT, root, comm) != MPI_SUCCESS;
        if (rank == root) {
            cudaMemcpy(host, whole, big, cudaMemcpyDeviceToHost);
            for (int q = 0; q < nranks; ++q) bad += check(host, (size_t)displs[q] * 4, k, q, root, (size_t)counts[q] * 4, "gatherv");
        }
    } else {
        if (rank == root) {
            for (int q = 0; q < nranks; ++q)
                for (size_t j = 0; j < (size_t)counts[q] * 4; ++j) host[(size_t)displs[q] * 4 + j] = pattern(k, root, q, j);
            cudaMemcpy(whole, host, big, cudaMemcpyHostToDevice);
        }
        cudaMemset(part, SENTINEL, mine + 4);
        bad += MPI_Scatterv(whole, counts, displs, MPI_INT, part, (int)(mine / 4), MPI_INT, root, comm) != MPI_SUCCESS;
        cudaMemcpy(host, part, mine + 4, cudaMemcpyDeviceToHost);
        bad += check(host, 0, k, root, rank, mine, "scatterv");
        if (host[mine] != SENTINEL) bad++, fprintf(stderr, "rank %d: scatterv call %d wrote past its block\n", rank, k);
    }
    cudaFree(whole);
    cudaFree(part);
    free(host), free(counts), free(displs);
    return bad;
}

static long allreduce(int k, MPI_Comm comm)
{
    int host[8], *d;
    for (int i = 0; i < 8; ++i) host[i] = k + rank * i;
    cudaMalloc((void **)&d, sizeof(host));
    cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice);
    long bad = MPI_Allreduce(MPI_IN_PLACE, d, 8, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS;
    cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost);
    for (int i = 0; i < 8; ++i)
        if (host[i] != nranks * k + i * nranks * (nranks - 1) / 2) bad++;
    cudaFree(d);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || !ndev) {
        if (!rank) fprintf(stderr, "exchange_pairs: no GPU here\n");
        MPI_Finalize();
        return 77;
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaSetDevice((lr ? atoi(lr) : rank) % ndev);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    long bad = 0, calls = 0;
    for (int k = 0; k < ITERS; ++k) {
        for (int shape = 0; shape < SHAPES; ++shape, ++calls) bad += alltoallv((shape + k) % SHAPES, k, comm);
        bad += rooted(1, k, comm) + rooted(0, k, comm);
        bad += allreduce(k, comm);
        calls += 3;
    }
    long tot[2] = {bad, calls};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (!rank) printf("exchange_pairs: %d ranks: %ld calls (summed over ranks), %ld wrong bytes or errors\n", nranks, tot[1], tot[0]);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return tot[0] ? 1 : 0;
}
