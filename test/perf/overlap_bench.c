/*
 * overlap_bench: what a collective in flight costs an application's compute,
 * and what the compute costs the collective (issue 14's overlap benchmark).
 * Every rank runs GEMMs (test/perf/gemm.cu; the GPU hosts have no cuBLAS) on
 * an application stream (cudaStreamNonBlocking) while collectives run back
 * to back beside them: loom's MPI_Iallreduce / MPI_Ialltoall / MPI_Iallgather
 * / MPI_Ibcast (root 0) + MPI_Wait on device buffers through the component,
 * then NCCL's twin (the system libnccl.so.2; ncclAllReduce, grouped
 * ncclSend/ncclRecv per peer, ncclAllGather, ncclBroadcast) on a stream of
 * its own, in the same run. BYTES: the whole buffer (allgather's output).
 *
 *   overlap_bench [-C allreduce|alltoall|allgather|bcast] [-s BYTES] [-m N] [-g GEMMS] [-p] [-b] [-v] [-L] [--no-nccl]
 *
 * Per library: a GEMM's time alone and with collectives beside it (slowdown
 * = loaded / alone), a collective's time alone and beside the GEMMs (only
 * the collectives that started while every rank's GEMMs still ran count:
 * the ranks agree before each one, outside the timed part), and the share of
 * the GEMMs' time a collective was in flight. With -p, NCCL's stream has the
 * device's greatest priority (give loom's the same with
 * LOOM_STREAM_PRIORITY=1): a GEMM grid fills the GPU, and without priority a
 * collective's CTAs start only as the GEMM's last ones are dispatched. The
 * knobs that trade one against the other are the libraries' own
 * environment: LOOM_MAX_CTAS (loom), NCCL_MAX_CTAS / NCCL_MIN_CTAS (NCCL).
 * -b: loom's calls are the blocking ones (what the GPU runs is the same;
 * blocking exchanges may move blocks in place, and so by copy engines with
 * LOOM_EXCHANGE_COPY_ENGINES=1, which takes allgather and bcast too). Times are the slowest rank's. -v: rank 0 prints each loaded step (the
 * collective's time, the agreement's, and what the GEMMs' event said).
 * -L: also an application loop on the legacy default stream (legacy_loop).
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_dl.h"

cudaError_t perfGemm(int n, const float *a, const float *b, float *c, cudaStream_t stream);

#define CUDA(call)                                                                  \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "overlap_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                           \
        }                                                                           \
    } while (0)

enum { ALLREDUCE, ALLTOALL, ALLGATHER, BCAST };
static const char *const coll_names[] = {"allreduce", "alltoall", "allgather", "bcast"};
static int me, np, coll, blocking; /* blocking: loom's call is the blocking one (-b) */
static size_t bytes = 64u << 20;
static void *sendbuf, *recvbuf;
static nccl_comm_t ncomm;
/* The host-buffer calls (agreement, timing, barriers) run on a communicator
 * of their own: on one that carries device-buffer collectives, loom takes
 * host-buffer calls too (through its device scratch, for ranks that mix
 * memory kinds), and those wait for SMs behind the GEMMs like any kernel. */
static MPI_Comm ctl;
static cudaStream_t nstream;

/* loom's call through MPI: blocking (req NULL) or not. */
static void loom_call(MPI_Request *req)
{
    const int block = (int)(bytes / np);
    switch (coll) {
    case ALLTOALL:
        if (req) MPI_Ialltoall(sendbuf, block, MPI_BYTE, recvbuf, block, MPI_BYTE, MPI_COMM_WORLD, req);
        else MPI_Alltoall(sendbuf, block, MPI_BYTE, recvbuf, block, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        if (req) MPI_Iallgather(sendbuf, block, MPI_BYTE, recvbuf, block, MPI_BYTE, MPI_COMM_WORLD, req);
        else MPI_Allgather(sendbuf, block, MPI_BYTE, recvbuf, block, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case BCAST:
        if (req) MPI_Ibcast(recvbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, req);
        else MPI_Bcast(recvbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    default:
        if (req) MPI_Iallreduce(sendbuf, recvbuf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
        else MPI_Allreduce(sendbuf, recvbuf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

/* Starts one collective: loom's non-blocking call (*r), or NCCL's on its stream. */
static void collective_start(int use_nccl, MPI_Request *r)
{
    if (!use_nccl) {
        loom_call(r);
        return;
    }
    const size_t block = bytes / np;
    if (ALLTOALL == coll) {
        nccl.group_start();
        for (int q = 0; q < np; ++q) {
            nccl.send((char *)sendbuf + q * block, block, NCCL_INT8, q, ncomm, nstream);
            nccl.recv((char *)recvbuf + q * block, block, NCCL_INT8, q, ncomm, nstream);
        }
        nccl.group_end();
    } else if (ALLGATHER == coll) {
        nccl.all_gather(sendbuf, recvbuf, block, NCCL_INT8, ncomm, nstream);
    } else if (BCAST == coll) {
        nccl.broadcast(recvbuf, recvbuf, bytes, NCCL_INT8, 0, ncomm, nstream);
    } else {
        nccl.all_reduce(sendbuf, recvbuf, bytes / 4, NCCL_FLOAT32, NCCL_SUM, ncomm, nstream);
    }
}

static void collective_finish(int use_nccl, MPI_Request *r)
{
    if (!use_nccl) MPI_Wait(r, MPI_STATUS_IGNORE);
    else CUDA(cudaStreamSynchronize(nstream));
}

/* One collective, finished when it returns. */
static void collective(int use_nccl)
{
    if (!use_nccl && blocking) { /* the GPU sees the same; per-call buffer descriptions are allowed (direct pairs) */
        if (BCAST == coll && bytes > INT_MAX) {
            if (me == 0) fprintf(stderr, "overlap_bench: bcast takes at most %d bytes (one MPI count of MPI_BYTE)\n", INT_MAX);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        loom_call(NULL);
        return;
    }
    MPI_Request r;
    collective_start(use_nccl, &r);
    collective_finish(use_nccl, &r);
}

static double slowest(double t)
{
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, ctl);
    return t;
}

/* -L: an application's loop on the legacy default stream, as codes that
 * never make a stream of their own write it: per step, start the
 * collective, a GEMM on the default stream, wait for the collective, then
 * for the GEMM. overlap: how much of the shorter of the two (each timed
 * alone the same way) the step hid; 0 when they ran one after the other. */
static void legacy_loop(int lib, int n, const float *a, const float *b, float *c, int steps)
{
    MPI_Barrier(ctl);
    double t = MPI_Wtime();
    for (int i = 0; i < steps; ++i) {
        CUDA(perfGemm(n, a, b, c, 0));
        CUDA(cudaStreamSynchronize(0));
    }
    const double gemm = slowest((MPI_Wtime() - t) / steps * 1e6);
    MPI_Barrier(ctl);
    t = MPI_Wtime();
    for (int i = 0; i < steps; ++i) collective(lib);
    const double alone = slowest((MPI_Wtime() - t) / steps * 1e6);
    MPI_Barrier(ctl);
    t = MPI_Wtime();
    for (int i = 0; i < steps; ++i) {
        MPI_Request r;
        collective_start(lib, &r);
        CUDA(perfGemm(n, a, b, c, 0));
        collective_finish(lib, &r);
        CUDA(cudaStreamSynchronize(0));
    }
    const double step = slowest((MPI_Wtime() - t) / steps * 1e6);
    const double shorter = gemm < alone ? gemm : alone;
    double overlap = (gemm + alone - step) / shorter;
    overlap = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
    if (me == 0)
        printf("# legacy-stream loop, %s: GEMM alone %.1f us, collective alone %.1f us, step (collective started, "
               "GEMM on the default stream, both waited) %.1f us: overlap %.0f%%\n",
               lib ? "nccl" : "loom", gemm, alone, step, overlap * 100);
}

int main(int argc, char **argv)
{
    int n = 4096, gemms = 20, use_nccl = 1, priority = 0, verbose = 0, legacy = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-C") && i + 1 < argc) {
            const char *name = argv[++i];
            coll = -1;
            for (int k = 0; k < 4; ++k)
                if (!strcmp(name, coll_names[k])) coll = k;
            if (coll < 0) {
                if (me == 0) fprintf(stderr, "overlap_bench: -C takes allreduce, alltoall, allgather or bcast\n");
                MPI_Finalize();
                return 2;
            }
        }
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) bytes = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) n = atoi(argv[++i]) / 64 * 64;
        else if (!strcmp(argv[i], "-p")) priority = 1;
        else if (!strcmp(argv[i], "-b")) blocking = 1;
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "-L")) legacy = 1;
        else if (!strcmp(argv[i], "-g") && i + 1 < argc) gemms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-nccl")) use_nccl = 0;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (me == 0) printf("overlap_bench: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    CUDA(cudaSetDevice(me % ndev));
    bytes = bytes / (4 * (size_t)np) * 4 * (size_t)np; /* whole floats, whole blocks */
    if (n < 64) n = 64;
    if (bytes == 0 || bytes / 4 > INT_MAX) {
        if (me == 0) fprintf(stderr, "overlap_bench: -s must give 1 .. INT_MAX floats\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *a, *b, *c;
    CUDA(cudaMalloc((void **)&a, (size_t)n * n * 4));
    CUDA(cudaMalloc((void **)&b, (size_t)n * n * 4));
    CUDA(cudaMalloc((void **)&c, (size_t)n * n * 4));
    CUDA(cudaMemset(a, 0, (size_t)n * n * 4));
    CUDA(cudaMemset(b, 0, (size_t)n * n * 4));
    CUDA(cudaMalloc(&sendbuf, bytes));
    CUDA(cudaMalloc(&recvbuf, bytes));
    CUDA(cudaMemset(sendbuf, 0, bytes));
    cudaStream_t app;
    CUDA(cudaStreamCreateWithFlags(&app, cudaStreamNonBlocking));
    int least = 0, greatest = 0;
    CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA(cudaStreamCreateWithPriority(&nstream, cudaStreamNonBlocking, priority ? greatest : 0));
    cudaEvent_t e0, e1;
    CUDA(cudaEventCreate(&e0));
    CUDA(cudaEventCreate(&e1));
    if (use_nccl) use_nccl = load_nccl();
    MPI_Allreduce(MPI_IN_PLACE, &use_nccl, 1, MPI_INT, MPI_MIN, ctl); /* every rank alike */
    if (!use_nccl && me == 0) printf("overlap_bench: no NCCL (libnccl.so.2) on every rank, or --no-nccl: loom only\n");
    if (use_nccl) {
        nccl_id_t id;
        if (me == 0) nccl.get_unique_id(&id);
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, ctl);
        if (nccl.comm_init_rank(&ncomm, np, id, me)) {
            fprintf(stderr, "overlap_bench: rank %d: ncclCommInitRank failed\n", me);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    /* A blocking call first: it makes loom's communicator (non-blocking calls take loom's kernels once it exists). */
    loom_call(NULL);
    for (int i = 0; i < 2; ++i) CUDA(perfGemm(n, a, b, c, app));
    CUDA(cudaStreamSynchronize(app));
    if (me == 0)
        printf("# %s of %zu B on %d ranks beside %d GEMMs of %d x %d floats; LOOM_MAX_CTAS=%s NCCL_MAX_CTAS=%s\n"
               "# library  gemm_alone_ms  gemm_loaded_ms  slowdown  coll_alone_us  coll_loaded_us  colls_beside  "
               "coll_share\n",
               coll_names[coll], bytes, np, gemms, n, n,
               getenv("LOOM_MAX_CTAS") ? getenv("LOOM_MAX_CTAS") : "-",
               getenv("NCCL_MAX_CTAS") ? getenv("NCCL_MAX_CTAS") : "-");
    for (int lib = 0; lib <= use_nccl; ++lib) {
        /* GEMMs alone. */
        MPI_Barrier(ctl);
        CUDA(cudaEventRecord(e0, app));
        for (int i = 0; i < gemms; ++i) CUDA(perfGemm(n, a, b, c, app));
        CUDA(cudaEventRecord(e1, app));
        CUDA(cudaEventSynchronize(e1));
        float ms;
        CUDA(cudaEventElapsedTime(&ms, e0, e1));
        const double gemmAlone = slowest(ms / gemms);
        /* Collectives alone. */
        for (int i = 0; i < 3; ++i) collective(lib);
        MPI_Barrier(ctl);
        const int reps = 20;
        double t = MPI_Wtime();
        for (int i = 0; i < reps; ++i) collective(lib);
        const double collAlone = slowest((MPI_Wtime() - t) / reps * 1e6);
        /* Both: collectives back to back while every rank's GEMMs run (the
         * ranks agree before each one; that host allreduce is not timed). */
        MPI_Barrier(ctl);
        CUDA(cudaEventRecord(e0, app));
        for (int i = 0; i < gemms; ++i) CUDA(perfGemm(n, a, b, c, app));
        CUDA(cudaEventRecord(e1, app));
        double busy = 0;
        int count = 0;
        for (;;) {
            const double t0 = MPI_Wtime();
            const cudaError_t q = cudaEventQuery(e1);
            int running = q == cudaErrorNotReady;
            MPI_Allreduce(MPI_IN_PLACE, &running, 1, MPI_INT, MPI_MIN, ctl);
            const double agreed = MPI_Wtime() - t0;
            if (verbose && me == 0) printf("#   %s step %d: GEMMs' event %s, agreement %.1f us\n", lib ? "nccl" : "loom",
                                           count, cudaGetErrorName(q), agreed * 1e6);
            if (!running) break;
            t = MPI_Wtime();
            collective(lib);
            busy += MPI_Wtime() - t;
            if (verbose && me == 0) printf("#   %s step %d: collective %.1f us\n", lib ? "nccl" : "loom", count, (MPI_Wtime() - t) * 1e6);
            ++count;
        }
        const double collLoaded = count ? slowest(busy / count * 1e6) : -1;
        CUDA(cudaEventSynchronize(e1));
        CUDA(cudaEventElapsedTime(&ms, e0, e1));
        const double gemmLoaded = slowest(ms / gemms);
        const double share = slowest(busy * 1e3 / ms);
        if (me == 0)
            printf("%-8s  %13.3f  %14.3f  %8.3f  %13.1f  %14.1f  %12d  %10.2f\n", lib ? "nccl" : "loom", gemmAlone,
                   gemmLoaded, gemmLoaded / gemmAlone, collAlone, collLoaded, count, share);
    }
    if (legacy && !blocking)
        for (int lib = 0; lib <= use_nccl; ++lib) legacy_loop(lib, n, a, b, c, gemms);
    /* Small blocking MPI_Allreduces on the collectives' communicator (an
     * application's convergence check), alone and beside the GEMMs: a host
     * int in place, a host int, and a device int in place. loom runs the host
     * ones on the GPU too (ranks may mix memory kinds) unless
     * coll_loom_uniform_memory lets them go to the host component. */
    {
        int *dv;
        CUDA(cudaMalloc((void **)&dv, sizeof(int)));
        CUDA(cudaMemset(dv, 0, sizeof(int)));
        const char *names[3] = {"host int, in place", "host int", "device int, in place"};
        for (int kind = 0; kind < 3; ++kind) {
            int v = me, w = 0, reps = 50;
            double us[2];
            for (int loaded = 0; loaded <= 1; ++loaded) {
                MPI_Barrier(ctl);
                if (loaded) {
                    for (int i = 0; i < gemms; ++i) CUDA(perfGemm(n, a, b, c, app));
                    CUDA(cudaEventRecord(e1, app));
                }
                const double t0 = MPI_Wtime();
                for (int i = 0; i < reps; ++i) {
                    if (kind == 0) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    else if (kind == 1) MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    else MPI_Allreduce(MPI_IN_PLACE, dv, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                }
                us[loaded] = slowest((MPI_Wtime() - t0) / reps * 1e6);
                if (loaded) CUDA(cudaEventSynchronize(e1));
            }
            if (me == 0)
                printf("# MPI_Allreduce of 1 %s on the same communicator: %.1f us alone, %.1f us beside the GEMMs\n",
                       names[kind], us[0], us[1]);
        }
        cudaFree(dv);
    }
    if (use_nccl) nccl.comm_destroy(ncomm);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(sendbuf);
    cudaFree(recvbuf);
    MPI_Comm_free(&ctl);
    MPI_Finalize();
    return 0;
}
