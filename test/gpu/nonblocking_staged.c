/*
 * Non-blocking collectives where some ranks pass host buffers (even ranks:
 * pageable malloc memory, staged by loom) and the others device buffers
 * (odd ranks), each result compared element by element with a host
 * reference:
 *   no wait      rank 0 (host buffers) starts MPI_Iallreduce, then sends a
 *                token to rank 1, which starts its part only after the
 *                token: the call must return without waiting for rank 1
 *                (MPI's non-blocking semantics; staging inside the call
 *                deadlocked here until the kernel timed out); rank 0's call
 *                must also return in under 2 s while rank 1 sleeps 3 s
 *   all kinds    Iallreduce (one in place, one of 1M + 3 floats, past the
 *                pinned bounce buffer), Ibcast, Ireduce, Iallgather,
 *                Iallgatherv (blocks in reversed order), Ireduce_scatter_block,
 *                Ialltoall, Ialltoallv (ragged), Igather, Iscatter, Iscan,
 *                Iexscan, all in flight (bcast, gather and scatter
 *                rooted at rank 0, on host buffers), the last completed
 *                through MPI_Test alone, the rest waited in reverse order
 *   packed       MPI_Ialltoall into a strided receive type (the component's
 *                packed buffer, unpacked when the call finishes)
 *   freed        MPI_Request_free right after a staged MPI_Iallreduce, then
 *                a blocking MPI_Allreduce on the same communicator: both
 *                results there when it returns
 * Every call must take loom's GPU path (the .mpitest checks the reports).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_checks.h"

static int rank, size;
static long bad;

static int staged(int r) { return r % 2 == 0; }
static float value(int r, size_t i, int round) { return (float)((i * 3 + (size_t)r * 7 + (size_t)round) % 11); }

/* n floats where this rank keeps its buffers: host (staged ranks) or device. */
static float *balloc(size_t n)
{
    if (!staged(rank)) return dalloc(n * sizeof(float));
    float *p = malloc(n ? n * sizeof(float) : 1);
    if (!p) MPI_Abort(MPI_COMM_WORLD, 2);
    memset(p, 0, n * sizeof(float));
    return p;
}
static void bfree(float *p)
{
    if (staged(rank)) free(p);
    else cudaFree(p);
}
/* Element i of the buffer := value(r, base + i, round). */
static float *bfill(size_t n, int r, size_t base, int round)
{
    float *h = malloc(n * sizeof(float) + 1), *b = balloc(n);
    for (size_t i = 0; i < n; ++i) h[i] = value(r, base + i, round);
    cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyDefault);
    free(h);
    return b;
}
static float *bread(const float *b, size_t n)
{
    float *h = malloc(n * sizeof(float) + 1);
    cudaMemcpy(h, b, n * sizeof(float), cudaMemcpyDefault);
    return h;
}

static float sum_of(size_t i, int round)
{
    float s = 0;
    for (int q = 0; q < size; ++q) s += value(q, i, round);
    return s;
}

/* n floats at b from `at` on must be want(at + i); reports the first wrong one. */
static void expect(const char *what, const float *b, size_t n, size_t at, float (*want)(size_t, int), int round)
{
    float *h = bread(b, n + at);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; ++i)
        if (h[at + i] != want(at + i, round) && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d (%s buffers) %s (%zu floats, round %d): %ld wrong, first at %zu: %g, want %g\n",
                rank, staged(rank) ? "host" : "device", what, n, round, wrong, first, h[at + first],
                want(at + first, round));
    bad += wrong;
    free(h);
}

static void check(int rc, const char *what)
{
    if (MPI_SUCCESS != rc) {
        fprintf(stderr, "FAIL rank %d %s: MPI error %d\n", rank, what, rc);
        ++bad;
    }
}

static void no_wait(MPI_Comm comm)
{
    const size_t n = 4099;
    float *in = bfill(n, rank, 0, 20), *out = balloc(n);
    MPI_Request req;
    int token = 7;
    double t0 = MPI_Wtime();
    if (0 == rank) {
        check(MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req), "iallreduce (no wait)");
        const double took = MPI_Wtime() - t0;
        check(MPI_Send(&token, 1, MPI_INT, 1, 5, comm), "send token");
        if (took > 2.0) {
            fprintf(stderr, "FAIL rank 0: MPI_Iallreduce on host buffers took %.2f s while rank 1 slept: it waited "
                            "for other ranks\n", took);
            ++bad;
        }
    } else if (1 == rank) {
        sleep(3);
        check(MPI_Recv(&token, 1, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE), "recv token");
        check(MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req), "iallreduce (no wait)");
    } else {
        check(MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req), "iallreduce (no wait)");
    }
    check(MPI_Wait(&req, MPI_STATUS_IGNORE), "wait (no wait)");
    expect("iallreduce after a token", out, n, 0, sum_of, 20);
    bfree(in), bfree(out);
}

static float from_root0(size_t i, int round) { return value(0, i, round); }
/* Gathers: block q of the output is rank q's input (g floats each). */
static size_t gblock;
static float gathered(size_t i, int round) { return value((int)(i / gblock), i % gblock, round); }
/* Exchanges: rank r's block for q holds value(r, q * 100003 + i). */
static float exch(int r, int q, size_t i) { return value(r, (size_t)q * 100003 + i, 9); }

static void all_kinds(MPI_Comm comm)
{
    const size_t n = 4099, big = (1u << 20) + 3, N = (size_t)size;
    enum { K = 14 };
    MPI_Request req[K];
    int err = 0;
    /* allreduce: plain, in place, big */
    float *a_in = bfill(n, rank, 0, 1), *a_out = balloc(n), *ip = bfill(n, rank, 0, 2);
    float *big_in = bfill(big, rank, 0, 3), *big_out = balloc(big);
    err |= MPI_Iallreduce(a_in, a_out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[0]);
    err |= MPI_Iallreduce(MPI_IN_PLACE, ip, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[1]);
    err |= MPI_Iallreduce(big_in, big_out, (int)big, MPI_FLOAT, MPI_SUM, comm, &req[2]);
    /* bcast from 0 (host buffers), reduce to 0 */
    float *bc = rank == 0 ? bfill(n, rank, 0, 4) : balloc(n);
    float *r_in = bfill(n, rank, 0, 5), *r_out = balloc(n);
    err |= MPI_Ibcast(bc, (int)n, MPI_FLOAT, 0, comm, &req[3]);
    err |= MPI_Ireduce(r_in, r_out, (int)n, MPI_FLOAT, MPI_SUM, 0, comm, &req[4]);
    /* allgather, allgatherv (reversed blocks), reduce_scatter_block */
    float *g_in = bfill(n, rank, 0, 6), *g_out = balloc(n * N), *gv_out = balloc(n * N);
    int *counts = malloc(N * sizeof(int)), *displs = malloc(N * sizeof(int));
    for (int q = 0; q < size; ++q) counts[q] = (int)n - q, displs[q] = (int)n * (size - 1 - q);
    float *rs_in = bfill(n * N, rank, 0, 7), *rs_out = balloc(n);
    err |= MPI_Iallgather(g_in, (int)n, MPI_FLOAT, g_out, (int)n, MPI_FLOAT, comm, &req[5]);
    err |= MPI_Iallgatherv(g_in, counts[rank], MPI_FLOAT, gv_out, counts, displs, MPI_FLOAT, comm, &req[6]);
    err |= MPI_Ireduce_scatter_block(rs_in, rs_out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[7]);
    /* alltoall, alltoallv (ragged, blocks reversed on receipt) */
    const size_t b = 3001;
    float *x_in = balloc(b * N), *x_out = balloc(b * N), *xv_out = balloc(b * N);
    {
        float *h = malloc(b * N * sizeof(float));
        for (int q = 0; q < size; ++q)
            for (size_t i = 0; i < b; ++i) h[(size_t)q * b + i] = exch(rank, q, i);
        cudaMemcpy(x_in, h, b * N * sizeof(float), cudaMemcpyDefault);
        free(h);
    }
    int *sc = malloc(N * sizeof(int)), *sd = malloc(N * sizeof(int)), *rc = malloc(N * sizeof(int)),
        *rd = malloc(N * sizeof(int));
    for (int q = 0; q < size; ++q) {
        sc[q] = ((rank + q) % 3) * 1000 + 1, sd[q] = (int)((size_t)q * b);
        rc[q] = ((q + rank) % 3) * 1000 + 1, rd[q] = (int)((N - 1 - (size_t)q) * b);
    }
    err |= MPI_Ialltoall(x_in, (int)b, MPI_FLOAT, x_out, (int)b, MPI_FLOAT, comm, &req[8]);
    err |= MPI_Ialltoallv(x_in, sc, sd, MPI_FLOAT, xv_out, rc, rd, MPI_FLOAT, comm, &req[9]);
    /* gather to 0, scatter from 0 (roots on host buffers), scan, exscan */
    float *ga_in = bfill(n, rank, 0, 10), *ga_out = balloc(n * N);
    float *sc_in = bfill(n * N, 0, 0, 11), *sc_out = balloc(n);
    float *p_in = bfill(n, rank, 0, 12), *p_out = balloc(n), *e_out = balloc(n);
    err |= MPI_Igather(ga_in, (int)n, MPI_FLOAT, ga_out, (int)n, MPI_FLOAT, 0, comm, &req[10]);
    err |= MPI_Iscatter(sc_in, (int)n, MPI_FLOAT, sc_out, (int)n, MPI_FLOAT, 0, comm, &req[11]);
    err |= MPI_Iscan(p_in, p_out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[12]);
    err |= MPI_Iexscan(p_in, e_out, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[13]);
    check(err, "starting the non-blocking calls");
    /* The last one through MPI_Test alone (nothing waited yet), then the rest in reverse order. */
    for (int flag = 0; !flag;) check(MPI_Test(&req[K - 1], &flag, MPI_STATUS_IGNORE), "test");
    for (int k = K - 2; k >= 0; --k) check(MPI_Wait(&req[k], MPI_STATUS_IGNORE), "wait (reverse order)");

    expect("iallreduce", a_out, n, 0, sum_of, 1);
    expect("iallreduce in place", ip, n, 0, sum_of, 2);
    expect("iallreduce 1M + 3", big_out, big, 0, sum_of, 3);
    expect("ibcast", bc, n, 0, from_root0, 4);
    if (0 == rank) expect("ireduce", r_out, n, 0, sum_of, 5);
    gblock = n;
    expect("iallgather", g_out, n * N, 0, gathered, 6);
    {
        float *h = bread(rs_out, n), *v = bread(gv_out, n * N);
        long wrong = 0;
        for (size_t i = 0; i < n; ++i) wrong += h[i] != sum_of((size_t)rank * n + i, 7);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < counts[q]; ++i) wrong += v[displs[q] + i] != value(q, (size_t)i, 6);
        free(v);
        if (wrong) fprintf(stderr, "FAIL rank %d ireduce_scatter_block / iallgatherv: %ld wrong\n", rank, wrong);
        bad += wrong;
        free(h);
    }
    {
        float *h = bread(x_out, b * N), *v = bread(xv_out, b * N);
        long wrong = 0;
        for (int q = 0; q < size; ++q) {
            for (size_t i = 0; i < b; ++i) wrong += h[(size_t)q * b + i] != exch(q, rank, i);
            for (int i = 0; i < rc[q]; ++i) wrong += v[rd[q] + i] != exch(q, rank, (size_t)i);
        }
        if (wrong) fprintf(stderr, "FAIL rank %d ialltoall(v): %ld wrong\n", rank, wrong);
        bad += wrong;
        free(h), free(v);
    }
    gblock = n;
    if (0 == rank) expect("igather", ga_out, n * N, 0, gathered, 10);
    {
        float *h = bread(sc_out, n), *p = bread(p_out, n), *e = bread(e_out, n);
        long wrong = 0;
        for (size_t i = 0; i < n; ++i) {
            float incl = 0, excl = 0;
            for (int q = 0; q <= rank; ++q) incl += value(q, i, 12);
            for (int q = 0; q < rank; ++q) excl += value(q, i, 12);
            wrong += h[i] != value(0, (size_t)rank * n + i, 11);
            wrong += p[i] != incl;
            if (rank > 0) wrong += e[i] != excl;
        }
        if (wrong) fprintf(stderr, "FAIL rank %d iscatter / iscan / iexscan: %ld wrong\n", rank, wrong);
        bad += wrong;
        free(h), free(p), free(e);
    }
    float *bufs[] = {a_in, a_out, ip, big_in, big_out, bc, r_in, r_out, g_in, g_out, gv_out, rs_in, rs_out,
                     x_in, x_out, xv_out, ga_in, ga_out, sc_in, sc_out, p_in, p_out, e_out};
    for (size_t k = 0; k < sizeof(bufs) / sizeof(bufs[0]); ++k) bfree(bufs[k]);
    free(counts), free(displs), free(sc), free(sd), free(rc), free(rd);
}

/* Ialltoall into a strided receive type (every other float): the component
 * packs it in a buffer of its own and unpacks it when the call finishes,
 * so the call may not complete later by progress. */
static void packed_receive(MPI_Comm comm)
{
    const size_t b = 2049, N = (size_t)size;
    MPI_Datatype v, every_other;
    MPI_Type_vector((int)b, 1, 2, MPI_FLOAT, &v);
    MPI_Type_create_resized(v, 0, (MPI_Aint)(2 * b * sizeof(float)), &every_other);
    MPI_Type_commit(&every_other);
    float *in = balloc(b * N), *out = balloc(2 * b * N);
    float *h = malloc(2 * b * N * sizeof(float));
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < b; ++i) h[(size_t)q * b + i] = exch(rank, q, i);
    cudaMemcpy(in, h, b * N * sizeof(float), cudaMemcpyDefault);
    MPI_Request req;
    check(MPI_Ialltoall(in, (int)b, MPI_FLOAT, out, 1, every_other, comm, &req), "ialltoall (strided receive)");
    check(MPI_Wait(&req, MPI_STATUS_IGNORE), "wait (strided receive)");
    cudaMemcpy(h, out, 2 * b * N * sizeof(float), cudaMemcpyDefault);
    long wrong = 0;
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < b; ++i) wrong += h[(size_t)q * 2 * b + 2 * i] != exch(q, rank, i);
    if (wrong) fprintf(stderr, "FAIL rank %d ialltoall into a strided receive type: %ld wrong\n", rank, wrong);
    bad += wrong;
    free(h);
    bfree(in), bfree(out);
    MPI_Type_free(&every_other);
    MPI_Type_free(&v);
}

static void freed(MPI_Comm comm)
{
    const size_t n = 70001;
    float *a = bfill(n, rank, 0, 13), *oa = balloc(n), *c = bfill(n, rank, 0, 14), *oc = balloc(n);
    MPI_Request r;
    check(MPI_Iallreduce(a, oa, (int)n, MPI_FLOAT, MPI_SUM, comm, &r), "iallreduce (freed)");
    check(MPI_Request_free(&r), "request free");
    check(MPI_Allreduce(c, oc, (int)n, MPI_FLOAT, MPI_SUM, comm), "allreduce after a freed one");
    expect("freed iallreduce", oa, n, 0, sum_of, 13);
    expect("allreduce after a freed one", oc, n, 0, sum_of, 14);
    bfree(a), bfree(oa), bfree(c), bfree(oc);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || !ndev) {
        if (!rank) fprintf(stderr, "nonblocking_staged: no usable GPU: skipped\n");
        MPI_Finalize();
        return 77;
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaSetDevice((lr ? atoi(lr) : rank) % ndev);
    /* A blocking call of each family makes the loom communicator and
     * connects every pair (non-blocking calls take loom's kernels after). */
    {
        float *w = bfill((size_t)size, rank, 0, 0), *o = balloc((size_t)size);
        MPI_Allreduce(w, o, size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Alltoall(w, 1, MPI_FLOAT, o, 1, MPI_FLOAT, MPI_COMM_WORLD);
        MPI_Scan(w, o, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        bfree(w), bfree(o);
    }
    for (int round = 0; round < 2; ++round) {
        no_wait(MPI_COMM_WORLD);
        all_kinds(MPI_COMM_WORLD);
        packed_receive(MPI_COMM_WORLD);
        freed(MPI_COMM_WORLD);
    }
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank) printf("nonblocking_staged: %d ranks (even ones on host buffers): %ld wrong elements or errors\n",
                          size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
