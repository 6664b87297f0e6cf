/*
 * Non-blocking collectives on device buffers with real requests
 * (coll_loom_request.h), each result compared element by element with a
 * host reference:
 *   outstanding  several MPI_Iallreduce in flight (sizes 1 .. 1M + 3
 *                floats, one in place), waited in reverse order; every
 *                request MPI_REQUEST_NULL after its wait
 *   mixed        Ibcast, Ireduce, Iallgather, Iallgatherv, Ireduce_scatter_block
 *                and a blocking MPI_Allreduce between them, then Waitall
 *   two comms    Iallreduce on MPI_COMM_WORLD and on a dup at once,
 *                completed through MPI_Testany only (progress, no wait)
 *   freed        MPI_Request_free right after MPI_Iallreduce: the operation
 *                still completes (a blocking allreduce after it on the same
 *                communicator orders after it), and its result is checked
 *   stream order the input written by cudaMemsetAsync on the legacy default
 *                stream, no synchronize, then MPI_Iallreduce: the call must
 *                see the memset's bytes (docs/routing.md: stream semantics)
 *   legacy (-l)  only this, run with LOOM_STREAM_BLOCKING=0: the
 *                application's work on the legacy default stream queued
 *                after MPI_Iallreduce does not wait for it: rank 0 waits
 *                for a legacy-stream memset before it sends the message
 *                the other ranks need to make their calls (a memset behind
 *                loom's kernel, which waits for them, would never finish:
 *                a failure after 10 s, as with the default blocking stream)
 *   comm free    MPI_Comm_free of a dup with an operation in flight, then
 *                its result
 *   derived      an Ibcast of a contiguous derived type, freed right after
 *                the call
 *   before       a fresh communicator's non-blocking calls before any
 *                blocking one (staged: no host agreement in them), correct
 *   exchanges    Ialltoallw (ragged, byte displacements), Ialltoall (1 MiB
 *                blocks), Ialltoallv (ragged), Igather, Iscatter, Iscan,
 *                Iexscan in flight together
 *   tables       80 ragged calls in flight (Iallgatherv of blocks past
 *                one-shot's, on the ring with uploaded block tables, and
 *                Ialltoallv), every call's counts and displacements its
 *                own, gaps checked untouched
 *   first (-f)   only this: fresh communicators whose device-buffer calls
 *                are all non-blocking (the set-up runs inside progress,
 *                coll_loom_defer.h): rank 1 receives a message that rank 0
 *                sends only after its MPI_Iallreduce, before making its own
 *                (a call that waited for the others would hang); several
 *                in flight; Ibcast, Ireduce, Iallgather then a blocking
 *                MPI_Allreduce as a communicator's first calls; exchanges
 *                and scans first and after allreduces (every pair
 *                connected inside progress); two fresh communicators set
 *                up at once; a periodic ring whose only calls are
 *                neighbourhood ones (Ineighbor_alltoall and _allgather,
 *                then Neighbor_alltoall_init started twice)
 *   persistent   MPI_Allreduce_init / Bcast_init / Alltoall_init (MPI-4;
 *                4.1: pcollreq MPIX_*_init; a visible skip without):
 *                started several times with new data, MPI_Startall, waited,
 *                then freed; a small one completed by MPI_Test polling,
 *                then started again and freed while active
 * Every call must take loom's GPU path (the .mpitest checks the reports).
 */
#include <cuda_runtime.h>
#include "../mpi/mpi4_persistent.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_checks.h"

static int rank, size;
static long bad;

static float value(int r, size_t i, int round) { return (float)((i * 3 + (size_t)r * 7 + (size_t)round) % 11); }

static float *dfill(size_t n, int r, int round)
{
    float *h = malloc(n * sizeof(float)), *d = dalloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) h[i] = value(r, i, round);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

/* out[i] must be `want(i)`; reports the first wrong element. */
static void expect(const char *what, const float *d, size_t n, float (*want)(size_t, int), int round)
{
    float *h = malloc(n * sizeof(float));
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; ++i)
        if (h[i] != want(i, round) && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d %s (%zu floats, round %d): %ld wrong, first at %zu: %g, want %g\n", rank, what,
                n, round, wrong, first, h[first], want(first, round));
    bad += wrong;
    free(h);
}

static float sum_of(size_t i, int round)
{
    float s = 0;
    for (int q = 0; q < size; ++q) s += value(q, i, round);
    return s;
}
static float from_root1(size_t i, int round) { return value(1 % size, i, round); }

static void check_request_null(MPI_Request r, const char *what)
{
    if (MPI_REQUEST_NULL != r) {
        fprintf(stderr, "FAIL rank %d %s: the request is not MPI_REQUEST_NULL after its wait\n", rank, what);
        ++bad;
    }
}

static void outstanding(MPI_Comm comm)
{
    const size_t sizes[] = {1, 1000, 65536 + 5, (1u << 20) + 3};
    enum { K = sizeof(sizes) / sizeof(sizes[0]) };
    float *in[K], *out[K];
    MPI_Request req[K];
    for (int k = 0; k < K; ++k) {
        in[k] = dfill(sizes[k], rank, k);
        out[k] = k == 2 ? in[k] : dalloc(sizes[k] * sizeof(float));
        int rc = MPI_Iallreduce(k == 2 ? MPI_IN_PLACE : in[k], out[k], (int)sizes[k], MPI_FLOAT, MPI_SUM, comm, &req[k]);
        if (MPI_SUCCESS != rc) ++bad;
    }
    for (int k = K - 1; k >= 0; --k) { /* reverse order */
        if (MPI_SUCCESS != MPI_Wait(&req[k], MPI_STATUS_IGNORE)) ++bad;
        check_request_null(req[k], "outstanding");
        expect("outstanding iallreduce", out[k], sizes[k], sum_of, k);
    }
    for (int k = 0; k < K; ++k) {
        if (out[k] != in[k]) cudaFree(out[k]);
        cudaFree(in[k]);
    }
}

static void mixed(MPI_Comm comm)
{
    const size_t n = 4099;
    float *b = rank == 1 % size ? dfill(n, rank, 0) : dalloc(n * sizeof(float));
    float *rin = dfill(n, rank, 0), *rout = dalloc(n * sizeof(float));
    float *gin = dfill(n, rank, 0), *gout = dalloc(n * sizeof(float) * (size_t)size);
    float *vout = dalloc(n * sizeof(float) * (size_t)size);
    float *sin = dfill(n * (size_t)size, rank, 0), *sout = dalloc(n * sizeof(float));
    float *ain = dfill(n, rank, 5), *aout = dalloc(n * sizeof(float));
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    for (int q = 0; q < size; ++q) counts[q] = (int)n - q, displs[q] = (int)n * (size - 1 - q); /* reversed blocks */
    MPI_Request req[5];
    int rc = MPI_Ibcast(b, (int)n, MPI_FLOAT, 1 % size, comm, &req[0]);
    rc |= MPI_Ireduce(rin, rout, (int)n, MPI_FLOAT, MPI_SUM, 0, comm, &req[1]);
    rc |= MPI_Iallgather(gin, (int)n, MPI_FLOAT, gout, (int)n, MPI_FLOAT, comm, &req[2]);
    rc |= MPI_Allreduce(ain, aout, (int)n, MPI_FLOAT, MPI_SUM, comm); /* blocking, between them */
    rc |= MPI_Iallgatherv(gin, counts[rank], MPI_FLOAT, vout, counts, displs, MPI_FLOAT, comm, &req[3]);
    rc |= MPI_Ireduce_scatter_block(sin, sout, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[4]);
    if (MPI_SUCCESS != rc) ++bad;
    MPI_Status st[5];
    if (MPI_SUCCESS != MPI_Waitall(5, req, st)) ++bad;
    for (int k = 0; k < 5; ++k) check_request_null(req[k], "mixed");
    expect("ibcast", b, n, from_root1, 0);
    if (0 == rank) expect("ireduce", rout, n, sum_of, 0);
    expect("allreduce between them", aout, n, sum_of, 5);
    float *h = malloc(n * sizeof(float) * (size_t)size);
    cudaMemcpy(h, gout, n * sizeof(float) * (size_t)size, cudaMemcpyDeviceToHost);
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < n; ++i)
            if (h[(size_t)q * n + i] != value(q, i, 0) && !bad++)
                fprintf(stderr, "FAIL rank %d iallgather block %d at %zu\n", rank, q, i);
    cudaMemcpy(h, vout, n * sizeof(float) * (size_t)size, cudaMemcpyDeviceToHost);
    for (int q = 0; q < size; ++q)
        for (int i = 0; i < counts[q]; ++i)
            if (h[displs[q] + i] != value(q, (size_t)i, 0) && !bad++)
                fprintf(stderr, "FAIL rank %d iallgatherv block %d at %d\n", rank, q, i);
    cudaMemcpy(h, sout, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i)
        if (h[i] != sum_of((size_t)rank * n + i, 0) && !bad++)
            fprintf(stderr, "FAIL rank %d ireduce_scatter_block at %zu\n", rank, i);
    free(h);
    free(counts);
    free(displs);
    cudaFree(b), cudaFree(rin), cudaFree(rout), cudaFree(gin), cudaFree(gout), cudaFree(vout), cudaFree(sin);
    cudaFree(sout), cudaFree(ain), cudaFree(aout);
}

/* Ialltoallw (alltoallv's ragged blocks at byte displacements, first: on a
 * fresh communicator its pairs are connected inside progress), Ialltoall
 * (blocks of 1 MiB: in-place pairs in a blocking call, none here),
 * Ialltoallv (ragged), Igather, Iscatter, Iscan, Iexscan in flight
 * together. Element i of block q sent by rank r: value(r, q * 1000003 + i). */
static float exch_value(int r, int q, size_t i) { return value(r, (size_t)q * 1000003 + i, 7); }

static void exchanges(MPI_Comm comm)
{
    const size_t b = 262144; /* floats per block */
    const size_t N = (size_t)size;
    float *h = malloc(b * N * sizeof(float));
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < b; ++i) h[(size_t)q * b + i] = exch_value(rank, q, i);
    float *ain = dalloc(b * N * 4), *aout = dalloc(b * N * 4), *vout = dalloc(b * N * 4), *wout = dalloc(b * N * 4);
    cudaMemcpy(ain, h, b * N * 4, cudaMemcpyHostToDevice);
    int *sc = malloc(N * sizeof(int)), *sd = malloc(N * sizeof(int)), *rc = malloc(N * sizeof(int)),
        *rd = malloc(N * sizeof(int)), *sdb = malloc(N * sizeof(int)), *rdb = malloc(N * sizeof(int));
    MPI_Datatype *wt = malloc(N * sizeof(MPI_Datatype));
    for (int q = 0; q < size; ++q) { /* rank r sends (r + q) % 3 * 1000 + 1 floats of block q to q */
        sc[q] = ((rank + q) % 3) * 1000 + 1, sd[q] = (int)(q * b);
        rc[q] = ((q + rank) % 3) * 1000 + 1, rd[q] = (int)((N - 1 - (size_t)q) * b);
        sdb[q] = sd[q] * 4, rdb[q] = rd[q] * 4, wt[q] = MPI_FLOAT;
    }
    const size_t g = 4097;
    float *gin = dfill(g, rank, 8), *gout = dalloc(g * N * 4), *sin = dfill(g * N, 0, 9), *sout = dalloc(g * 4);
    float *pin = dfill(g, rank, 10), *pout = dalloc(g * 4), *xout = dalloc(g * 4);
    MPI_Request req[7];
    int err = MPI_Ialltoallw(ain, sc, sdb, wt, wout, rc, rdb, wt, comm, &req[6]);
    err |= MPI_Ialltoall(ain, (int)b, MPI_FLOAT, aout, (int)b, MPI_FLOAT, comm, &req[0]);
    err |= MPI_Ialltoallv(ain, sc, sd, MPI_FLOAT, vout, rc, rd, MPI_FLOAT, comm, &req[1]);
    err |= MPI_Igather(gin, (int)g, MPI_FLOAT, gout, (int)g, MPI_FLOAT, 0, comm, &req[2]);
    err |= MPI_Iscatter(sin, (int)g, MPI_FLOAT, sout, (int)g, MPI_FLOAT, size - 1, comm, &req[3]);
    err |= MPI_Iscan(pin, pout, (int)g, MPI_FLOAT, MPI_SUM, comm, &req[4]);
    err |= MPI_Iexscan(pin, xout, (int)g, MPI_FLOAT, MPI_SUM, comm, &req[5]);
    if (MPI_SUCCESS != err || MPI_SUCCESS != MPI_Waitall(7, req, MPI_STATUSES_IGNORE)) ++bad;
    long wrong = 0;
    float *o = malloc(b * N * sizeof(float));
    cudaMemcpy(o, aout, b * N * 4, cudaMemcpyDeviceToHost);
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < b; ++i) wrong += o[(size_t)q * b + i] != exch_value(q, rank, i);
    for (int w = 0; w < 2; ++w) {
        cudaMemcpy(o, w ? wout : vout, b * N * 4, cudaMemcpyDeviceToHost);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < rc[q]; ++i) wrong += o[rd[q] + i] != exch_value(q, rank, (size_t)i);
    }
    if (0 == rank) {
        cudaMemcpy(o, gout, g * N * 4, cudaMemcpyDeviceToHost);
        for (int q = 0; q < size; ++q)
            for (size_t i = 0; i < g; ++i) wrong += o[(size_t)q * g + i] != value(q, i, 8);
    }
    cudaMemcpy(o, sout, g * 4, cudaMemcpyDeviceToHost); /* root size-1's buffer: value(0, .) at every rank's block */
    for (size_t i = 0; i < g; ++i) wrong += o[i] != value(0, (size_t)rank * g + i, 9);
    float *x = malloc(g * sizeof(float));
    cudaMemcpy(o, pout, g * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(x, xout, g * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < g; ++i) {
        float incl = 0, excl = 0;
        for (int q = 0; q <= rank; ++q) incl += value(q, i, 10);
        for (int q = 0; q < rank; ++q) excl += value(q, i, 10);
        wrong += o[i] != incl;
        if (rank > 0) wrong += x[i] != excl; /* rank 0's exscan output is undefined */
    }
    if (wrong) fprintf(stderr, "FAIL rank %d exchanges (ialltoall(v, w), igather, iscatter, iscan, iexscan): %ld wrong\n", rank, wrong);
    bad += wrong;
    free(h), free(o), free(x), free(sc), free(sd), free(rc), free(rd), free(sdb), free(rdb), free(wt);
    cudaFree(ain), cudaFree(aout), cudaFree(vout), cudaFree(wout), cudaFree(gin), cudaFree(gout), cudaFree(sin), cudaFree(sout);
    cudaFree(pin), cudaFree(pout), cudaFree(xout);
}

/* K ragged calls of each kind in flight at once, their counts and
 * displacements all different: a table overwritten before its upload was
 * done would move the wrong blocks. Allgatherv's blocks exceed one-shot's
 * slots (1 MiB), so the ring runs with uploaded block tables
 * (core/stream/pinned_uploads.h); at these rank counts alltoallv's tables ride in
 * the launch (kExchangeInlineWords), and test/gpu/pinned_uploads checks the
 * slots directly. The gaps between blocks hold a sentinel that must stay.
 * Counts and displacements stay untouched until the Waitall (MPI's rule). */
static int ragged(int k, int from, int to) { return 1 + (k * 37 + from * 11 + to * 5) % 509; }
static float table_value(int r, int q, size_t i, int k) { return value(r, (size_t)q * 7919 + i, k); }
enum { TABLE_CALLS = 40, TABLE_GAP = 64 };
static const size_t gblock = 262144 + 1024; /* floats: past one-shot's 1 MiB */
static int gcount(int k, int q) { return (int)(gblock - 1024) + ragged(k, q, 0); }
/* Rank q's block in call k: blocks in reversed order, k-dependent gaps. */
static int gdispl(int k, int q) { return (int)((size_t)(size - 1 - q) * (gblock + TABLE_GAP) + (size_t)(k % 7)); }

static void tables(MPI_Comm comm)
{
    enum { K = TABLE_CALLS, B = 512 };
    const size_t N = (size_t)size, gout_n = N * (gblock + TABLE_GAP) + 8;
    const float sentinel = -7.0f;
    int *cnt = malloc(sizeof(int) * N * K * 6), *at = cnt;
    float *gin = dalloc(gblock * 4 * K), *gout = dalloc(gout_n * 4 * K);
    float *ain = dalloc(N * B * 4 * K), *aout = dalloc(N * B * 4 * K);
    float *h = malloc(gout_n * 4 * K);
    for (size_t i = 0; i < gout_n * K; ++i) h[i] = sentinel;
    cudaMemcpy(gout, h, gout_n * 4 * K, cudaMemcpyHostToDevice);
    for (int k = 0; k < K; ++k)
        for (size_t i = 0; i < gblock; ++i) h[(size_t)k * gblock + i] = table_value(rank, 0, i, k);
    cudaMemcpy(gin, h, gblock * 4 * K, cudaMemcpyHostToDevice);
    for (int k = 0; k < K; ++k) /* call k's alltoallv input: block q goes to q */
        for (size_t q = 0; q < N; ++q)
            for (size_t i = 0; i < B; ++i) h[((size_t)k * N + q) * B + i] = table_value(rank, (int)q, i, k);
    cudaMemcpy(ain, h, N * B * 4 * K, cudaMemcpyHostToDevice);
    MPI_Request req[2 * K];
    int err = 0;
    for (int k = 0; k < K; ++k) {
        int *gc = at, *gd = at + N, *sc = at + 2 * N, *sd = at + 3 * N, *rc = at + 4 * N, *rd = at + 5 * N;
        at += 6 * N;
        for (int q = 0; q < size; ++q) {
            gc[q] = gcount(k, q), gd[q] = gdispl(k, q);
            sc[q] = ragged(k, rank, q), sd[q] = q * B;
            rc[q] = ragged(k, q, rank), rd[q] = (int)((N - 1 - (size_t)q) * B);
        }
        err |= MPI_Iallgatherv(gin + (size_t)k * gblock, gc[rank], MPI_FLOAT, gout + (size_t)k * gout_n, gc, gd,
                               MPI_FLOAT, comm, &req[2 * k]);
        err |= MPI_Ialltoallv(ain + (size_t)k * N * B, sc, sd, MPI_FLOAT, aout + (size_t)k * N * B, rc, rd, MPI_FLOAT,
                              comm, &req[2 * k + 1]);
    }
    if (MPI_SUCCESS != err || MPI_SUCCESS != MPI_Waitall(2 * K, req, MPI_STATUSES_IGNORE)) ++bad;
    long wrong = 0, gaps = 0;
    cudaMemcpy(h, gout, gout_n * 4 * K, cudaMemcpyDeviceToHost);
    char *mine = malloc(gout_n);
    for (int k = 0; k < K; ++k) {
        const float *gk = h + (size_t)k * gout_n;
        memset(mine, 0, gout_n);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < gcount(k, q); ++i) {
                const size_t d = (size_t)gdispl(k, q) + (size_t)i;
                mine[d] = 1;
                wrong += gk[d] != table_value(q, 0, (size_t)i, k);
            }
        for (size_t d = 0; d < gout_n; ++d) gaps += !mine[d] && gk[d] != sentinel;
    }
    float *o = malloc(N * B * 4 * K);
    cudaMemcpy(o, aout, N * B * 4 * K, cudaMemcpyDeviceToHost);
    for (int k = 0; k < K; ++k)
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < ragged(k, q, rank); ++i)
                wrong += o[(size_t)k * N * B + (N - 1 - (size_t)q) * B + (size_t)i] != table_value(q, rank, (size_t)i, k);
    if (wrong || gaps)
        fprintf(stderr, "FAIL rank %d tables (%d iallgatherv + %d ialltoallv in flight): %ld wrong, %ld gap elements "
                "written\n", rank, K, K, wrong, gaps);
    bad += wrong + gaps;
    free(h), free(o), free(cnt), free(mine);
    cudaFree(gin), cudaFree(gout), cudaFree(ain), cudaFree(aout);
}

#if HAVE_PERSISTENT_COLLS
static void persistent(MPI_Comm comm)
{
    const size_t n = 300001, b = 4096;
    float *in = dalloc(n * 4), *out = dalloc(n * 4), *bc = dalloc(n * 4);
    float *ain = dalloc(b * (size_t)size * 4), *aout = dalloc(b * (size_t)size * 4);
    MPI_Request req[3];
    int rc = MPI_Allreduce_init(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &req[0]);
    rc |= MPI_Bcast_init(bc, (int)n, MPI_FLOAT, 1 % size, comm, MPI_INFO_NULL, &req[1]);
    rc |= MPI_Alltoall_init(ain, (int)b, MPI_FLOAT, aout, (int)b, MPI_FLOAT, comm, MPI_INFO_NULL, &req[2]);
    if (MPI_SUCCESS != rc) ++bad;
    float *h = malloc(n * 4), *ha = malloc(b * (size_t)size * 4);
    for (int round = 0; round < 4; ++round) {
        for (size_t i = 0; i < n; ++i) h[i] = value(rank, i, 20 + round);
        cudaMemcpy(in, h, n * 4, cudaMemcpyHostToDevice);
        if (rank == 1 % size) cudaMemcpy(bc, h, n * 4, cudaMemcpyHostToDevice);
        for (int q = 0; q < size; ++q)
            for (size_t i = 0; i < b; ++i) ha[(size_t)q * b + i] = exch_value(rank, q, i + (size_t)round);
        cudaMemcpy(ain, ha, b * (size_t)size * 4, cudaMemcpyHostToDevice);
        if (round % 2) {
            if (MPI_SUCCESS != MPI_Startall(3, req)) ++bad;
        } else {
            for (int k = 0; k < 3; ++k)
                if (MPI_SUCCESS != MPI_Start(&req[k])) ++bad;
        }
        if (MPI_SUCCESS != MPI_Waitall(3, req, MPI_STATUSES_IGNORE)) ++bad;
        for (int k = 0; k < 3; ++k)
            if (MPI_REQUEST_NULL == req[k]) { /* a persistent request stays allocated after its wait */
                fprintf(stderr, "FAIL rank %d persistent request %d is MPI_REQUEST_NULL after a wait\n", rank, k);
                ++bad;
                return;
            }
        expect("persistent allreduce", out, n, sum_of, 20 + round);
        float *hb = malloc(n * 4);
        cudaMemcpy(hb, bc, n * 4, cudaMemcpyDeviceToHost);
        long wrong = 0;
        for (size_t i = 0; i < n; ++i) wrong += hb[i] != value(1 % size, i, 20 + round);
        cudaMemcpy(ha, aout, b * (size_t)size * 4, cudaMemcpyDeviceToHost);
        for (int q = 0; q < size; ++q)
            for (size_t i = 0; i < b; ++i) wrong += ha[(size_t)q * b + i] != exch_value(q, rank, i + (size_t)round);
        if (wrong) fprintf(stderr, "FAIL rank %d persistent bcast/alltoall round %d: %ld wrong\n", rank, round, wrong);
        bad += wrong;
        free(hb);
    }
    for (int k = 0; k < 3; ++k) MPI_Request_free(&req[k]);
    free(h), free(ha);
    cudaFree(in), cudaFree(out), cudaFree(bc), cudaFree(ain), cudaFree(aout);
    /* A small one (its start carries the call's mark itself): completed by
     * MPI_Test polling, then started again and freed while active, after
     * which a blocking call on the communicator orders after it. Freeing an
     * active collective request is erroneous in MPI (3.1, 5.12); loom
     * completes it anyway, since applications do it, and this checks that. */
    const size_t m = 1000;
    float *pin = dfill(m, rank, 30), *pout = dalloc(m * 4), *w = dfill(m, rank, 31), *wout = dalloc(m * 4);
    MPI_Request p;
    rc = MPI_Allreduce_init(pin, pout, (int)m, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &p);
    int flag = 0;
    rc |= MPI_Start(&p);
    while (MPI_SUCCESS == rc && !flag) rc = MPI_Test(&p, &flag, MPI_STATUS_IGNORE);
    expect("persistent allreduce (MPI_Test)", pout, m, sum_of, 30);
    cudaMemset(pout, 0, m * 4);
    rc |= MPI_Start(&p);
    rc |= MPI_Request_free(&p);
    rc |= MPI_Allreduce(w, wout, (int)m, MPI_FLOAT, MPI_SUM, comm);
    if (MPI_SUCCESS != rc || MPI_REQUEST_NULL != p) ++bad;
    expect("persistent allreduce freed while active", pout, m, sum_of, 30);
    expect("blocking allreduce after it", wout, m, sum_of, 31);
    cudaFree(pin), cudaFree(pout), cudaFree(w), cudaFree(wout);
}
#else
static void persistent(MPI_Comm comm)
{
    (void)comm;
    if (0 == rank) printf("SKIP persistent: this MPI has no persistent collectives (MPI-4 MPI_*_init, or Open MPI 4.1's pcollreq MPIX_*_init)\n");
}
#endif

static void two_comms(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    { /* blocking first: the dup's loom communicator */
        float *w = dalloc(4);
        MPI_Allreduce(MPI_IN_PLACE, w, 1, MPI_FLOAT, MPI_SUM, dup);
        cudaFree(w);
    }
    const size_t n = (1u << 18) + 1;
    float *a = dfill(n, rank, 1), *b = dfill(n, rank, 2), *oa = dalloc(n * 4), *ob = dalloc(n * 4);
    MPI_Request req[2];
    MPI_Iallreduce(a, oa, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Iallreduce(b, ob, (int)n, MPI_FLOAT, MPI_SUM, dup, &req[1]);
    int left = 2;
    long spins = 0;
    while (left > 0 && spins < 100000000L) { /* progress through MPI_Testany only */
        int idx = MPI_UNDEFINED, flag = 0;
        MPI_Testany(2, req, &idx, &flag, MPI_STATUS_IGNORE);
        if (flag && MPI_UNDEFINED != idx) --left;
        ++spins;
    }
    if (left) {
        fprintf(stderr, "FAIL rank %d: two comms: %d requests never completed through MPI_Testany\n", rank, left);
        ++bad;
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    expect("iallreduce on world", oa, n, sum_of, 1);
    expect("iallreduce on a dup", ob, n, sum_of, 2);
    cudaFree(a), cudaFree(b), cudaFree(oa), cudaFree(ob);
    MPI_Comm_free(&dup);
}

static void freed(MPI_Comm comm)
{
    const size_t n = 70001;
    float *a = dfill(n, rank, 3), *oa = dalloc(n * 4), *c = dfill(n, rank, 4), *oc = dalloc(n * 4);
    MPI_Request r;
    MPI_Iallreduce(a, oa, (int)n, MPI_FLOAT, MPI_SUM, comm, &r);
    MPI_Request_free(&r);
    check_request_null(r, "freed");
    MPI_Allreduce(c, oc, (int)n, MPI_FLOAT, MPI_SUM, comm); /* after the freed one on loom's stream */
    expect("freed iallreduce", oa, n, sum_of, 3);
    expect("allreduce after a freed one", oc, n, sum_of, 4);
    cudaFree(a), cudaFree(oa), cudaFree(c), cudaFree(oc);
}

/* A derived datatype (4 floats), freed right after the call: Open MPI
 * retains it through the request loom returns (MPI reduces only predefined
 * types: a broadcast carries it). */
static void derived_type(MPI_Comm comm)
{
    const size_t n = 4 * 50001;
    float *buf = rank == 1 % size ? dfill(n, rank, 11) : dalloc(n * 4);
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_FLOAT, &four);
    MPI_Type_commit(&four);
    MPI_Request r;
    if (MPI_SUCCESS != MPI_Ibcast(buf, (int)(n / 4), four, 1 % size, comm, &r)) ++bad;
    MPI_Type_free(&four);
    if (MPI_SUCCESS != MPI_Wait(&r, MPI_STATUS_IGNORE)) ++bad;
    expect("ibcast of a derived type", buf, n, from_root1, 11);
    cudaFree(buf);
}

/* busy: bytes of a memset queued on the legacy stream first, so that the
 * stream still holds work when the call enters (the event path of
 * LOOM_STREAM_BLOCKING=0, core/stream/app_order.cc). */
static void stream_order(MPI_Comm comm, size_t busy)
{
    const size_t n = (1u << 20) + 7; /* ints */
    int *d = dalloc(n * sizeof(int)), *o = dalloc(n * sizeof(int));
    char *ahead = busy ? dalloc(busy) : NULL;
    cudaMemset(d, 0, n * sizeof(int));
    cudaDeviceSynchronize();
    if (ahead) cudaMemsetAsync(ahead, 3, busy, 0);
    cudaMemsetAsync(d, rank + 1, n * sizeof(int), 0); /* legacy default stream; no synchronize */
    MPI_Request r;
    MPI_Iallreduce(d, o, (int)n, MPI_INT, MPI_SUM, comm, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int *h = malloc(n * sizeof(int));
    cudaMemcpy(h, o, n * sizeof(int), cudaMemcpyDeviceToHost);
    long want = 0;
    for (int q = 0; q < size; ++q) want += (long)(q + 1) * 0x01010101L;
    long wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += h[i] != (int)want;
    if (wrong) fprintf(stderr, "FAIL rank %d stream order: %ld of %zu wrong (%d, want %d)\n", rank, wrong, n, h[0], (int)want);
    bad += wrong;
    free(h);
    cudaFree(d), cudaFree(o);
    if (ahead) cudaFree(ahead);
}

static void legacy_overlap(MPI_Comm comm)
{
    const size_t n = (1u << 20) + 5; /* floats: past the resident kernel's size, so launched on loom's stream */
    float *in = dfill(n, rank, 4), *out = dalloc(n * sizeof(float));
    char *other = dalloc(1u << 20);
    int token = 5;
    MPI_Request r;
    if (0 != rank) MPI_Recv(&token, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm, &r)) ++bad;
    if (0 == rank) {
        cudaMemsetAsync(other, 1, 1u << 20, 0); /* the legacy default stream */
        const double t0 = MPI_Wtime();
        cudaError_t q;
        while ((q = cudaStreamQuery(0)) == cudaErrorNotReady && MPI_Wtime() - t0 < 10) usleep(100);
        if (q != cudaSuccess) {
            fprintf(stderr, "FAIL rank 0 legacy overlap: a legacy-stream memset after MPI_Iallreduce did not finish "
                    "in %.1f s (%s): it waits for the collective\n", MPI_Wtime() - t0, cudaGetErrorString(q));
            ++bad;
        }
        for (int q2 = 1; q2 < size; ++q2) MPI_Send(&token, 1, MPI_INT, q2, 98, MPI_COMM_WORLD);
    }
    if (MPI_SUCCESS != MPI_Wait(&r, MPI_STATUS_IGNORE)) ++bad;
    expect("iallreduce beside the application's legacy-stream work", out, n, sum_of, 4);
    cudaFree(in), cudaFree(out), cudaFree(other);
}

static void comm_free_in_flight(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    const size_t n = (1u << 20) + 1;
    float *oa = dalloc(n * 4), *b = dfill(n, rank, 6);
    MPI_Allreduce(MPI_IN_PLACE, oa, 1, MPI_FLOAT, MPI_SUM, dup); /* blocking first: the dup's loom communicator */
    MPI_Request r;
    MPI_Iallreduce(b, oa, (int)n, MPI_FLOAT, MPI_SUM, dup, &r);
    MPI_Request_free(&r);
    MPI_Comm_free(&dup); /* with the operation in flight: it completes first */
    expect("iallreduce on a freed communicator", oa, n, sum_of, 6);
    cudaFree(b), cudaFree(oa);
}

/* A fresh periodic ring whose device-buffer calls are all neighbourhood
 * ones, non-blocking and persistent: the set-up and the pairs' connection
 * run inside progress, then loom's exchange takes them (a ring of 3 or more
 * ranks fits it). Rank r's block k (0: to its left, 1: to its right) holds
 * value(r, k * b + i, round). */
static void neighbours_first(void)
{
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1}, nbr[2];
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Cart_shift(ring, 0, 1, &nbr[0], &nbr[1]);
    const size_t b = 65537;
    float *h = malloc(2 * b * 4), *in = dalloc(2 * b * 4), *to = dalloc(2 * b * 4), *all = dalloc(2 * b * 4);
    MPI_Request r[3];
    int rounds = 1, rc = MPI_SUCCESS;
#if HAVE_PERSISTENT_COLLS
    rounds = 3; /* round 0 non-blocking, rounds 1 and 2 the persistent request started again */
    rc |= MPI_Neighbor_alltoall_init(in, (int)b, MPI_FLOAT, to, (int)b, MPI_FLOAT, ring, MPI_INFO_NULL, &r[2]);
#endif
    for (int round = 0; round < rounds; ++round) {
        for (size_t i = 0; i < 2 * b; ++i) h[i] = value(rank, i, 30 + round);
        cudaMemcpy(in, h, 2 * b * 4, cudaMemcpyHostToDevice);
        if (0 == round) {
            rc |= MPI_Ineighbor_alltoall(in, (int)b, MPI_FLOAT, to, (int)b, MPI_FLOAT, ring, &r[0]);
            rc |= MPI_Ineighbor_allgather(in, (int)b, MPI_FLOAT, all, (int)b, MPI_FLOAT, ring, &r[1]);
            rc |= MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        } else {
            rc |= MPI_Start(&r[2]);
            rc |= MPI_Wait(&r[2], MPI_STATUS_IGNORE);
        }
        long wrong = 0;
        for (int k = 0; k < 2; ++k) { /* block k comes from nbr[k]: its block 1 - k, or (allgather) its block 0 */
            cudaMemcpy(h, to + k * b, b * 4, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < b; ++i) wrong += h[i] != value(nbr[k], (size_t)(1 - k) * b + i, 30 + round);
            cudaMemcpy(h, all + k * b, b * 4, cudaMemcpyDeviceToHost);
            for (size_t i = 0; 0 == round && i < b; ++i) wrong += h[i] != value(nbr[k], i, 30);
        }
        if (wrong) fprintf(stderr, "FAIL rank %d: neighbourhood calls first, round %d: %ld wrong\n", rank, round, wrong);
        bad += wrong;
    }
#if HAVE_PERSISTENT_COLLS
    rc |= MPI_Request_free(&r[2]);
#endif
    if (MPI_SUCCESS != rc) ++bad;
    MPI_Comm_free(&ring);
    free(h);
    cudaFree(in), cudaFree(to), cudaFree(all);
}

/* Fresh communicators whose first device-buffer calls are non-blocking. */
static void first_calls(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    const size_t n = (1u << 20) + 3;
    float *in = dfill(n, rank, 3), *out = dalloc(n * sizeof(float));
    int token = 7;
    MPI_Request r;
    if (1 == rank) MPI_Recv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, c, &r)) ++bad;
    if (0 == rank && size > 1) MPI_Send(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
    if (MPI_SUCCESS != MPI_Wait(&r, MPI_STATUS_IGNORE)) ++bad;
    expect("first iallreduce (a message between the ranks' calls)", out, n, sum_of, 3);
    outstanding(c);
    exchanges(c); /* pairs connected once the iallreduces before are done */
    MPI_Comm_free(&c);
    cudaFree(in), cudaFree(out);

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    mixed(c); /* Ibcast, Ireduce, Iallgather kept behind the vote; the blocking MPI_Allreduce settles them */
    MPI_Comm_free(&c);

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    exchanges(c); /* the first call's vote makes the loom communicator, then every pair is connected */
    MPI_Comm_free(&c);

    MPI_Comm two[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &two[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &two[1]);
    float *i2[2], *o2[2];
    MPI_Request r2[2];
    for (int k = 0; k < 2; ++k) {
        i2[k] = dfill(n, rank, 4 + k), o2[k] = dalloc(n * sizeof(float));
        if (MPI_SUCCESS != MPI_Iallreduce(i2[k], o2[k], (int)n, MPI_FLOAT, MPI_SUM, two[k], &r2[k])) ++bad;
    }
    if (MPI_SUCCESS != MPI_Waitall(2, r2, MPI_STATUSES_IGNORE)) ++bad;
    for (int k = 0; k < 2; ++k) {
        expect("first iallreduce on two fresh communicators at once", o2[k], n, sum_of, 4 + k);
        cudaFree(i2[k]), cudaFree(o2[k]);
        MPI_Comm_free(&two[k]);
    }
    neighbours_first();
}

/* Every rank's wrong elements and errors summed; finalizes; the exit status. */
static int verdict(const char *mode)
{
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank) printf("coll_nonblocking%s: %d ranks: %ld wrong elements or errors\n", mode, size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice((lr ? atoi(lr) : rank) % (ndev ? ndev : 1));
    if (argc > 1 && 0 == strcmp(argv[1], "-l")) {
        float *w = dfill(1, rank, 0); /* a blocking call first: non-blocking ones launch on loom's stream then */
        MPI_Allreduce(MPI_IN_PLACE, w, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        cudaFree(w);
        for (int round = 0; round < 3; ++round) {
            legacy_overlap(MPI_COMM_WORLD);
            stream_order(MPI_COMM_WORLD, (size_t)1 << 30); /* the call still sees the legacy stream's earlier work */
        }
        return verdict(" -l");
    }
    if (argc > 1 && 0 == strcmp(argv[1], "-f")) {
        first_calls();
        return verdict(" -f");
    }
    /* A fresh dup's first calls are non-blocking: its first one waits in
     * progress for the vote and the set-up (coll_loom_defer.h). */
    MPI_Comm fresh;
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    outstanding(fresh);
    MPI_Comm_free(&fresh);
    {
        float *w = dfill((size_t)size, rank, 0), *o = dalloc((size_t)size * 4);
        MPI_Allreduce(w, o, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Alltoall(w, 1, MPI_FLOAT, o, 1, MPI_FLOAT, MPI_COMM_WORLD);
        MPI_Scan(w, o, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        cudaFree(w), cudaFree(o);
    }
    for (int round = 0; round < 2; ++round) {
        outstanding(MPI_COMM_WORLD);
        derived_type(MPI_COMM_WORLD);
        mixed(MPI_COMM_WORLD);
        exchanges(MPI_COMM_WORLD);
        tables(MPI_COMM_WORLD);
        persistent(MPI_COMM_WORLD);
        two_comms();
        freed(MPI_COMM_WORLD);
        stream_order(MPI_COMM_WORLD, 0);
    }
    comm_free_in_flight();
    return verdict("");
}
