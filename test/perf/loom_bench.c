/*
 * loom-bench: an MPI collective on CUDA device buffers through Open MPI +
 * loom, and its NCCL twin (the system libnccl.so.2, opened with dlopen;
 * unique id sent with MPI_Bcast) in the same run, on the same buffers. Both
 * are timed as a blocking call: NCCL's stream is synchronized after every
 * call, as an MPI collective must (and as OSU's osu_xccl_* do). -I times
 * loom's non-blocking form instead (MPI_Iallreduce ... + MPI_Wait at once),
 * with no blocking collective on device buffers at all: the first
 * non-blocking call makes loom's communicator inside progress
 * (coll_loom_defer.h; its time is the "first call" line). -P times the
 * persistent form where Open MPI has it (MPI_..._init once per size, then
 * MPI_Start + MPI_Wait per call).
 *
 *   loom-bench [-C allreduce|bcast|reduce|allgather|reduce_scatter|allgatherv|alltoall|gather|scatter|
 *                  alltoallv|gatherv|scatterv]
 *              [-T float|char]
 *              [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c] [-I|-P] [--csv FILE] [--no-nccl]
 *
 * allgatherv: ragged blocks (rank q about 2(q+1)/(n+1) of the average) vs
 * NCCL's grouped ncclBroadcast, one per rank (NCCL has no allgatherv);
 * alltoall, gather and scatter vs a grouped ncclSend and ncclRecv per pair
 * that moves bytes (as nccl-tests). alltoallv: the pair from s to d moves
 * about 2((s+d) mod n + 1)/(n+1) of the average block, every rank's blocks
 * back to back in rank order (each rank still sends and receives about
 * `bytes`); gatherv, scatterv: allgatherv's ragged blocks to or from root 0;
 * all three vs grouped ncclSend/ncclRecv of the same pairs.
 * Sizes are bytes as nccl-tests counts them: allgather's whole output,
 * reduce_scatter's and alltoall's whole input, gather's and scatter's root
 * buffer, the buffer of the others; -c
 * checks every size against a host reference (sums). busbw = algbw x
 * nccl-tests' factor (allreduce 2(n-1)/n, allgather, reduce_scatter and
 * alltoall, gather, scatter (n-1)/n, bcast and reduce 1). ratio = loom busbw / NCCL busbw (> 1: loom faster). Root 0.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_dl.h"
#include "../mpi/mpi4_persistent.h"
#if HAVE_PERSISTENT_COLLS
#define HAVE_PERSISTENT 1
#else
#define HAVE_PERSISTENT 0
#endif

#define CUDA(call)                                                                                  \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "loom-bench: %s: %s\n", #call, cudaGetErrorString(e_));                 \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
        }                                                                                           \
    } while (0)

enum { ALLREDUCE, BCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, ALLGATHERV, ALLTOALL, GATHER, SCATTER, ALLTOALLV, GATHERV,
       SCATTERV, NCOLLS };
static const char *const coll_names[] = {"allreduce", "bcast",   "reduce",    "allgather", "reduce_scatter",
                                         "allgatherv", "alltoall", "gather",    "scatter",   "alltoallv",
                                         "gatherv",   "scatterv"};
static int coll = ALLREDUCE, use_char = 0, nranks = 1, me = 0; /* me: this rank, set once */

/* allgatherv's (gatherv's, scatterv's) ragged blocks: rank q's is about
 * 2(q+1)/(n+1) of the average, so the whole is still about `bytes`; blocks
 * back to back. alltoallv: this rank's send (sc, sd) and receive (rc_, rd)
 * tables over pair_count. */
static int vcounts[1024], vdispls[1024], sc[1024], sd[1024], rc_[1024], rd[1024];
static int pair_count(size_t avg, int from, int to)
{
    return (int)(avg * 2 * (size_t)((from + to) % nranks + 1) / (size_t)(nranks + 1));
}
/* Where rank from's block for rank to starts in from's send buffer. */
static size_t pair_send_displ(size_t avg, int from, int to)
{
    size_t at = 0;
    for (int q = 0; q < to; ++q) at += (size_t)pair_count(avg, from, q);
    return at;
}
static void ragged_layout(size_t avg)
{
    size_t at = 0, sat = 0, rat = 0;
    for (int q = 0; q < nranks; ++q) {
        vcounts[q] = (int)(avg * 2 * (size_t)(q + 1) / (size_t)(nranks + 1));
        vdispls[q] = (int)at;
        at += (size_t)vcounts[q];
        sc[q] = pair_count(avg, me, q), sd[q] = (int)sat, sat += (size_t)sc[q];
        rc_[q] = pair_count(avg, q, me), rd[q] = (int)rat, rat += (size_t)rc_[q];
    }
}
static int ragged(void) { return coll == ALLGATHERV || coll == ALLTOALLV || coll == GATHERV || coll == SCATTERV; }

/* Elements of the call for a size in bytes (see the header). */
static size_t elems(size_t bytes)
{
    size_t e = bytes / (use_char ? 1 : sizeof(float));
    return coll == ALLREDUCE || coll == BCAST || coll == REDUCE ? e : e / (size_t)nranks;
}

/* -I: the non-blocking form, each call waited for at once (MPI_I... + MPI_Wait). */
static int nonblocking;

static void loom_icall(const void *s, void *r, size_t count, MPI_Datatype dt)
{
    MPI_Request q;
    switch (coll) {
    case ALLREDUCE: MPI_Iallreduce(s, r, (int)count, dt, MPI_SUM, MPI_COMM_WORLD, &q); break;
    case BCAST: MPI_Ibcast(r, (int)count, dt, 0, MPI_COMM_WORLD, &q); break;
    case REDUCE: MPI_Ireduce(s, r, (int)count, dt, MPI_SUM, 0, MPI_COMM_WORLD, &q); break;
    case ALLGATHER: MPI_Iallgather(s, (int)count, dt, r, (int)count, dt, MPI_COMM_WORLD, &q); break;
    case ALLGATHERV: MPI_Iallgatherv(s, vcounts[me], dt, r, vcounts, vdispls, dt, MPI_COMM_WORLD, &q); break;
    case ALLTOALLV: MPI_Ialltoallv(s, sc, sd, dt, r, rc_, rd, dt, MPI_COMM_WORLD, &q); break;
    case GATHERV: MPI_Igatherv(s, vcounts[me], dt, r, vcounts, vdispls, dt, 0, MPI_COMM_WORLD, &q); break;
    case SCATTERV: MPI_Iscatterv(s, vcounts, vdispls, dt, r, vcounts[me], dt, 0, MPI_COMM_WORLD, &q); break;
    case ALLTOALL: MPI_Ialltoall(s, (int)count, dt, r, (int)count, dt, MPI_COMM_WORLD, &q); break;
    case GATHER: MPI_Igather(s, (int)count, dt, r, (int)count, dt, 0, MPI_COMM_WORLD, &q); break;
    case SCATTER: MPI_Iscatter(s, (int)count, dt, r, (int)count, dt, 0, MPI_COMM_WORLD, &q); break;
    default: MPI_Ireduce_scatter_block(s, r, (int)count, dt, MPI_SUM, MPI_COMM_WORLD, &q); break;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* -P: the persistent form; one request per (buffers, count), made at its first call. */
static int persistent;
#if HAVE_PERSISTENT
static MPI_Request q = MPI_REQUEST_NULL;
static void loom_pcall(const void *s, void *r, size_t count, MPI_Datatype dt)
{
    static const void *qs;
    static void *qr;
    static size_t qcount;
    if (MPI_REQUEST_NULL != q && (qs != s || qr != r || qcount != count)) MPI_Request_free(&q);
    int rc = MPI_SUCCESS;
    if (MPI_REQUEST_NULL == q) {
        MPI_Info i = MPI_INFO_NULL;
        MPI_Comm w = MPI_COMM_WORLD;
        switch (coll) {
        case ALLREDUCE: rc = MPI_Allreduce_init(s, r, (int)count, dt, MPI_SUM, w, i, &q); break;
        case BCAST: rc = MPI_Bcast_init(r, (int)count, dt, 0, w, i, &q); break;
        case REDUCE: rc = MPI_Reduce_init(s, r, (int)count, dt, MPI_SUM, 0, w, i, &q); break;
        case ALLGATHER: rc = MPI_Allgather_init(s, (int)count, dt, r, (int)count, dt, w, i, &q); break;
        case ALLGATHERV: rc = MPI_Allgatherv_init(s, vcounts[me], dt, r, vcounts, vdispls, dt, w, i, &q); break;
        case ALLTOALLV: rc = MPI_Alltoallv_init(s, sc, sd, dt, r, rc_, rd, dt, w, i, &q); break;
        case GATHERV: rc = MPI_Gatherv_init(s, vcounts[me], dt, r, vcounts, vdispls, dt, 0, w, i, &q); break;
        case SCATTERV: rc = MPI_Scatterv_init(s, vcounts, vdispls, dt, r, vcounts[me], dt, 0, w, i, &q); break;
        case ALLTOALL: rc = MPI_Alltoall_init(s, (int)count, dt, r, (int)count, dt, w, i, &q); break;
        case GATHER: rc = MPI_Gather_init(s, (int)count, dt, r, (int)count, dt, 0, w, i, &q); break;
        case SCATTER: rc = MPI_Scatter_init(s, (int)count, dt, r, (int)count, dt, 0, w, i, &q); break;
        default: rc = MPI_Reduce_scatter_block_init(s, r, (int)count, dt, MPI_SUM, w, i, &q); break;
        }
        qs = s, qr = r, qcount = count;
    }
    if (MPI_SUCCESS == rc) rc = MPI_Start(&q);
    if (MPI_SUCCESS == rc) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != rc) {
        fprintf(stderr, "loom-bench: persistent %s of %zu elements failed (%d)\n", coll_names[coll], count, rc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}
static void persistent_free(void)
{
    if (MPI_REQUEST_NULL != q) MPI_Request_free(&q);
}
#else
static void persistent_free(void) {}
#endif

static void loom_call(const void *s, void *r, size_t count)
{
    MPI_Datatype dt = use_char ? MPI_CHAR : MPI_FLOAT;
#if HAVE_PERSISTENT
    if (persistent) {
        loom_pcall(s, r, count, dt);
        return;
    }
#endif
    if (nonblocking) {
        loom_icall(s, r, count, dt);
        return;
    }
    switch (coll) {
    case ALLREDUCE: MPI_Allreduce(s, r, (int)count, dt, MPI_SUM, MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(r, (int)count, dt, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(s, r, (int)count, dt, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(s, (int)count, dt, r, (int)count, dt, MPI_COMM_WORLD); break;
    case ALLGATHERV: MPI_Allgatherv(s, vcounts[me], dt, r, vcounts, vdispls, dt, MPI_COMM_WORLD); break;
    case ALLTOALLV: MPI_Alltoallv(s, sc, sd, dt, r, rc_, rd, dt, MPI_COMM_WORLD); break;
    case GATHERV: MPI_Gatherv(s, vcounts[me], dt, r, vcounts, vdispls, dt, 0, MPI_COMM_WORLD); break;
    case SCATTERV: MPI_Scatterv(s, vcounts, vdispls, dt, r, vcounts[me], dt, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(s, (int)count, dt, r, (int)count, dt, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(s, (int)count, dt, r, (int)count, dt, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(s, (int)count, dt, r, (int)count, dt, 0, MPI_COMM_WORLD); break;
    default: MPI_Reduce_scatter_block(s, r, (int)count, dt, MPI_SUM, MPI_COMM_WORLD); break;
    }
}

static void nccl_call(nccl_comm_t comm, cudaStream_t st, const void *s, void *r, size_t count)
{
    int dt = use_char ? NCCL_INT8 : NCCL_FLOAT32;
    switch (coll) {
    case ALLREDUCE: nccl.all_reduce(s, r, count, dt, NCCL_SUM, comm, st); break;
    case BCAST: nccl.broadcast(r, r, count, dt, 0, comm, st); break;
    case REDUCE: nccl.reduce(s, r, count, dt, NCCL_SUM, 0, comm, st); break;
    case ALLGATHER: nccl.all_gather(s, r, count, dt, comm, st); break;
    case ALLGATHERV: { /* NCCL has no allgatherv: one broadcast per rank, grouped */
        const size_t es = use_char ? 1 : sizeof(float);
        nccl.group_start();
        for (int q = 0; q < nranks; ++q)
            nccl.broadcast(s, (char *)r + (size_t)vdispls[q] * es, (size_t)vcounts[q], dt, q, comm, st);
        nccl.group_end();
        break;
    }
    case ALLTOALL: { /* NCCL has no alltoall: a send and a receive per peer, grouped (as nccl-tests does) */
        const size_t bytes = count * (use_char ? 1 : sizeof(float));
        nccl.group_start();
        for (int q = 0; q < nranks; ++q) {
            nccl.send((const char *)s + (size_t)q * bytes, count, dt, q, comm, st);
            nccl.recv((char *)r + (size_t)q * bytes, count, dt, q, comm, st);
        }
        nccl.group_end();
        break;
    }
    case GATHER: case SCATTER: { /* the root's pairs: one block each way (its own included, as nccl-tests) */
        const size_t bytes = count * (use_char ? 1 : sizeof(float));
        nccl.group_start();
        if (coll == GATHER) {
            nccl.send(s, count, dt, 0, comm, st);
            for (int q = 0; q < nranks && me == 0; ++q) nccl.recv((char *)r + (size_t)q * bytes, count, dt, q, comm, st);
        } else {
            for (int q = 0; q < nranks && me == 0; ++q) nccl.send((const char *)s + (size_t)q * bytes, count, dt, q, comm, st);
            nccl.recv(r, count, dt, 0, comm, st);
        }
        nccl.group_end();
        break;
    }
    case ALLTOALLV: case GATHERV: case SCATTERV: { /* the same pairs as loom's call, grouped */
        const size_t es = use_char ? 1 : sizeof(float);
        nccl.group_start();
        for (int q = 0; q < nranks; ++q) {
            if (coll == ALLTOALLV) {
                nccl.send((const char *)s + (size_t)sd[q] * es, (size_t)sc[q], dt, q, comm, st);
                nccl.recv((char *)r + (size_t)rd[q] * es, (size_t)rc_[q], dt, q, comm, st);
            } else if (me == 0 && coll == GATHERV) {
                nccl.recv((char *)r + (size_t)vdispls[q] * es, (size_t)vcounts[q], dt, q, comm, st);
            } else if (me == 0) {
                nccl.send((const char *)s + (size_t)vdispls[q] * es, (size_t)vcounts[q], dt, q, comm, st);
            }
        }
        if (coll == GATHERV) nccl.send(s, (size_t)vcounts[me], dt, 0, comm, st);
        if (coll == SCATTERV) nccl.recv(r, (size_t)vcounts[me], dt, 0, comm, st);
        nccl.group_end();
        break;
    }
    default: nccl.reduce_scatter(s, r, count, dt, NCCL_SUM, comm, st); break;
    }
}

/* Seconds per blocking call, the slowest rank's. */
static double time_loom(const void *s, void *r, size_t count, int iters, int warmup)
{
    for (int i = 0; i < warmup; ++i) loom_call(s, r, count);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) loom_call(s, r, count);
    double t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

static double time_nccl(nccl_comm_t comm, cudaStream_t st, const void *s, void *r, size_t count, int iters,
                        int warmup)
{
    for (int i = 0; i < warmup; ++i) {
        nccl_call(comm, st, s, r, count);
        CUDA(cudaStreamSynchronize(st));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        nccl_call(comm, st, s, r, count);
        CUDA(cudaStreamSynchronize(st));
    }
    double t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

/* Small values: sums are exact in float and in char for up to 8 ranks. */
static int value(int rank, size_t i) { return (rank + 1) * (int)(i % 7) - 3; }
static double get(const void *p, size_t i) { return use_char ? ((const signed char *)p)[i] : ((const float *)p)[i]; }
static void put(void *p, size_t i, int v)
{
    if (use_char) ((signed char *)p)[i] = (signed char)v;
    else ((float *)p)[i] = (float)v;
}

/* Wrong elements of loom's result (all ranks summed). */
static long check(void *s, void *r, char *host, size_t count, int rank, int size)
{
    const size_t esize = use_char ? 1 : sizeof(float);
    const size_t v_all = (size_t)vdispls[size - 1] + (size_t)vcounts[size - 1];
    const size_t in_n = coll == REDUCE_SCATTER || coll == ALLTOALL || (coll == SCATTER && rank == 0) ? count * size
                      : coll == ALLGATHERV || coll == GATHERV ? (size_t)vcounts[rank]
                      : coll == SCATTERV ? (rank == 0 ? v_all : 0)
                      : coll == ALLTOALLV ? (size_t)sd[size - 1] + (size_t)sc[size - 1] : count;
    const size_t out_n = coll == ALLGATHER || coll == ALLTOALL || (coll == GATHER && rank == 0) ? count * size
                       : coll == ALLGATHERV || (coll == GATHERV && rank == 0) ? v_all
                       : coll == GATHERV ? 0
                       : coll == SCATTERV ? (size_t)vcounts[rank]
                       : coll == ALLTOALLV ? (size_t)rd[size - 1] + (size_t)rc_[size - 1] : count;
    for (size_t i = 0; i < in_n; ++i) put(host, i, value(rank, i));
    CUDA(cudaMemcpy(coll == BCAST ? r : s, host, in_n * esize, cudaMemcpyHostToDevice));
    if (coll != BCAST || rank != 0) CUDA(cudaMemset(r, 0x7f, out_n * esize));
    loom_call(s, r, count);
    CUDA(cudaMemcpy(host, r, out_n * esize, cudaMemcpyDeviceToHost));
    long bad = 0;
    /* The ragged forms: blk, the block element i lies in (blocks back to back
     * in rank order, so it only moves forward), and for alltoallv where that
     * block starts in its sender's buffer. */
    const int *starts = coll == ALLTOALLV ? rd : vdispls;
    int blk = 0;
    size_t from_displ = coll == ALLTOALLV ? pair_send_displ(count, 0, rank) : 0;
    for (size_t i = 0; i < out_n && ((coll != REDUCE && coll != GATHER) || rank == 0); ++i) {
        while (ragged() && blk + 1 < size && (size_t)starts[blk + 1] <= i) {
            ++blk;
            if (coll == ALLTOALLV) from_displ = pair_send_displ(count, blk, rank);
        }
        double want = 0;
        if (coll == BCAST) want = value(0, i);
        else if (coll == ALLGATHER) want = value((int)(i / count), i % count);
        else if (coll == ALLTOALL) want = value((int)(i / count), (size_t)rank * count + i % count);
        else if (coll == GATHER) want = value((int)(i / count), i % count);
        else if (coll == SCATTER) want = value(0, (size_t)rank * count + i);
        else if (coll == ALLGATHERV || coll == GATHERV) want = value(blk, i - (size_t)vdispls[blk]);
        else if (coll == SCATTERV) want = value(0, (size_t)vdispls[rank] + i);
        else if (coll == ALLTOALLV) want = value(blk, from_displ + i - (size_t)rd[blk]);
        else
            for (int q = 0; q < size; ++q) want += value(q, coll == REDUCE_SCATTER ? (size_t)rank * count + i : i);
        bad += get(host, i) != want;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t minb = 8, maxb = 1ul << 30;
    int factor = 2, iters = 0, warmup = 5, do_check = 0, use_nccl = 1;
    const char *csv = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc) minb = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc) maxb = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) factor = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c")) do_check = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
        else if (!strcmp(argv[i], "--no-nccl")) use_nccl = 0;
        else if (!strcmp(argv[i], "-I")) nonblocking = 1;
        else if (!strcmp(argv[i], "-P")) persistent = 1;
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) use_char = !strcmp(argv[++i], "char");
        else if (!strcmp(argv[i], "-C") && i + 1 < argc) {
            ++i;
            for (coll = 0; coll < NCOLLS && strcmp(argv[i], coll_names[coll]); ++coll) {}
            if (coll == NCOLLS) coll = -1;
        }
        else {
            if (rank == 0) fprintf(stderr, "usage: loom-bench [-C allreduce|bcast|reduce|allgather|reduce_scatter|allgatherv|alltoall|gather|scatter|alltoallv|gatherv|scatterv] [-T float|char] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c] [-I|-P] [--csv FILE] [--no-nccl]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (coll < 0) {
        if (rank == 0) fprintf(stderr, "loom-bench: -C takes allreduce, bcast, reduce, allgather, reduce_scatter, allgatherv, alltoall, gather, scatter, alltoallv, gatherv or scatterv\n");
        MPI_Finalize();
        return 2;
    }
    if (persistent && nonblocking) {
        if (rank == 0) fprintf(stderr, "loom-bench: -I and -P exclude each other\n");
        MPI_Finalize();
        return 2;
    }
    if (persistent && !HAVE_PERSISTENT) {
        if (rank == 0) fprintf(stderr, "loom-bench: -P: this Open MPI has no persistent collectives (neither MPI-4 MPI_*_init nor 4.1's pcollreq)\n");
        MPI_Finalize();
        return 77;
    }
    nranks = size;
    me = rank;
    if (size > 1024) coll = ALLREDUCE; /* the ragged tables' bound */
    if (factor < 2) factor = 2;
    if (minb < 4) minb = 4;

    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    CUDA(cudaGetDeviceCount(&ndev));
    CUDA(cudaSetDevice((lr ? atoi(lr) : rank) % ndev));
    void *s, *r;
    char *host = malloc(maxb);
    CUDA(cudaMalloc((void **)&s, maxb));
    CUDA(cudaMalloc((void **)&r, maxb));
    CUDA(cudaMemset(s, 0, maxb));
    cudaStream_t st;
    CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    /* First device-buffer call: includes creating loom's communicator. */
    MPI_Barrier(MPI_COMM_WORLD);
    double f0 = MPI_Wtime();
    if (ragged()) ragged_layout(2);
    loom_call(s, r, 2);
    double first_loom = MPI_Wtime() - f0, first_nccl = 0;
    MPI_Allreduce(MPI_IN_PLACE, &first_loom, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    nccl_comm_t ncomm = NULL;
    if (use_nccl) {
        MPI_Barrier(MPI_COMM_WORLD);
        f0 = MPI_Wtime();
        int ok = load_nccl(), all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (all) {
            nccl_id_t id;
            if (rank == 0) nccl.get_unique_id(&id);
            MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
            int rc = nccl.comm_init_rank(&ncomm, size, id, rank);
            if (rc != 0) {
                fprintf(stderr, "loom-bench: ncclCommInitRank: %s\n", nccl.error_string ? nccl.error_string(rc) : "?");
                ncomm = NULL;
            } else {
                nccl_call(ncomm, st, s, r, 2);
                CUDA(cudaStreamSynchronize(st));
                first_nccl = MPI_Wtime() - f0;
                MPI_Allreduce(MPI_IN_PLACE, &first_nccl, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            }
        } else if (rank == 0) {
            printf("# libnccl.so.2 not found: loom only\n");
        }
    }
    FILE *out = rank == 0 && csv ? fopen(csv, "w") : NULL;
    if (out) fprintf(out, "bytes,loom_us,loom_busbw_GBs,nccl_us,nccl_busbw_GBs,ratio,check\n");
    if (rank == 0) {
        printf("# loom-bench: %s (%s, sum, root 0) through loom vs NCCL, %d ranks, %s calls\n", coll_names[coll],
               use_char ? "MPI_CHAR / ncclInt8" : "MPI_FLOAT / ncclFloat32", size,
               persistent    ? "loom persistent (MPI_..._init once, MPI_Start + MPI_Wait), NCCL blocking"
               : nonblocking ? "loom non-blocking (MPI_I... + MPI_Wait), NCCL blocking"
                             : "blocking");
        printf("# first call incl. communicator creation: loom %.3f s, NCCL (init + first allreduce) %.3f s\n",
               first_loom, first_nccl);
        printf("%12s %10s %10s %10s %10s %8s %6s\n", "bytes", "loom_us", "loom_GB/s", "nccl_us", "nccl_GB/s",
               "ratio", "check");
    }
    const double bus = coll == ALLREDUCE ? 2.0 * (size - 1) / size
                     : coll == BCAST || coll == REDUCE ? 1.0
                     : (double)(size - 1) / size;
    long total_bad = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes *= factor) {
        size_t count = elems(bytes);
        if (!count) continue;
        if (ragged()) ragged_layout(count);
        int n = iters ? iters : (int)(bytes >= (64u << 20) ? 20 : bytes >= (1u << 20) ? 100 : 1000);
        long bad = do_check ? check(s, r, host, count, rank, size) : -1;
        if (bad > 0) total_bad += bad;
        double tl = time_loom(s, r, count, n, warmup);
        double tn = ncomm ? time_nccl(ncomm, st, s, r, count, n, warmup) : 0;
        double bl = bytes / tl * bus / 1e9, bn = ncomm ? bytes / tn * bus / 1e9 : 0;
        const char *verdict = bad < 0 ? "-" : bad ? "FAIL" : "ok";
        if (rank == 0) {
            printf("%12zu %10.2f %10.2f %10.2f %10.2f %8.3f %6s\n", bytes, tl * 1e6, bl, tn * 1e6, bn,
                   ncomm ? bl / bn : 0.0, verdict);
            fflush(stdout);
        }
        if (out) fprintf(out, "%zu,%.3f,%.3f,%.3f,%.3f,%.4f,%s\n", bytes, tl * 1e6, bl, tn * 1e6, bn,
                         ncomm ? bl / bn : 0.0, verdict);
    }
    if (out) fclose(out);
    if (ncomm) nccl.comm_destroy(ncomm);
    persistent_free();
    cudaFree(s);
    cudaFree(r);
    free(host);
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
