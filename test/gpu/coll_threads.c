/*
 * MPI_THREAD_MULTIPLE: several threads of each rank run collectives on
 * device buffers at once, each on a communicator of its own (MPI orders
 * collectives per communicator only): blocking MPI_Allreduce (small calls
 * take the resident kernel, larger ones launch), MPI_Iallreduce and
 * MPI_Ibcast in flight together and waited in reverse order, MPI_Test
 * polling (one thread's progress completes or skips other threads'
 * requests), a request freed before it completes. Every element is checked
 * against a host reference.
 *
 * The threads copy on streams of their own (cudaStreamNonBlocking), never
 * on the legacy default stream: loom's streams are blocking streams by
 * default (that is how a call orders after the application's legacy-stream
 * work; LOOM_STREAM_BLOCKING=0 orders through an event instead), so a
 * legacy-stream copy in one thread waits for every communicator's kernel in
 * flight, and ranks whose threads interleave differently then wait on each
 * other in a cycle (docs/routing.md: MPI_THREAD_MULTIPLE).
 *
 *   coll_threads [-t THREADS] [-n ITERATIONS]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

static int me, np, ndev, iters = 200;

typedef struct {
    int id;
    MPI_Comm comm;
    long bad;
    void *bufs[3];
} worker_t;

static _Thread_local cudaStream_t copies; /* this thread's */

static void copy(void *dst, const void *src, size_t bytes)
{
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copies);
    cudaStreamSynchronize(copies);
}

/* in[i] = rank + (i + seed) % 11: the sum over ranks is n(n-1)/2 + n((i + seed) % 11). */
static void fill(int *d, int *h, size_t count, int seed)
{
    for (size_t i = 0; i < count; ++i) h[i] = me + (int)((i + (size_t)seed) % 11);
    copy(d, h, count * sizeof(int));
}

static long check_sum(const int *d, int *h, size_t count, int seed)
{
    copy(h, d, count * sizeof(int));
    long bad = 0;
    for (size_t i = 0; i < count; ++i) bad += h[i] != np * (np - 1) / 2 + np * (int)((i + (size_t)seed) % 11);
    return bad;
}

static void *work(void *arg)
{
    worker_t *w = (worker_t *)arg;
    cudaSetDevice(me % ndev); /* the current device is per thread */
    cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking);
    const size_t max = (size_t)1 << 18; /* ints: 1 MiB */
    int *a = (int *)dalloc(max * sizeof(int)), *b = (int *)dalloc(max * sizeof(int));
    int *c = (int *)dalloc(max * sizeof(int)), *h = (int *)malloc(max * sizeof(int));
    for (int it = 0; it < iters; ++it) {
        const size_t count = (size_t)1 << ((it * 7 + w->id * 3) % 19); /* 1 .. 2^18 ints */
        const int seed = it + 100 * w->id;
        /* blocking */
        fill(a, h, count, seed);
        if (MPI_SUCCESS != MPI_Allreduce(MPI_IN_PLACE, a, (int)count, MPI_INT, MPI_SUM, w->comm)) ++w->bad;
        w->bad += check_sum(a, h, count, seed);
        /* two in flight, waited in reverse order; the bcast's root moves */
        fill(a, h, count, seed + 1);
        const int root = it % np;
        for (size_t i = 0; i < count; ++i) h[i] = me == root ? (int)(i * 3 + (size_t)seed) : -1;
        copy(b, h, count * sizeof(int));
        MPI_Request r[2];
        MPI_Iallreduce(a, c, (int)count, MPI_INT, MPI_SUM, w->comm, &r[0]);
        MPI_Ibcast(b, (int)count, MPI_INT, root, w->comm, &r[1]);
        if (it % 2) {
            int done = 0;
            while (!done) MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE);
        } else {
            MPI_Wait(&r[1], MPI_STATUS_IGNORE);
            MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        }
        w->bad += check_sum(c, h, count, seed + 1);
        copy(h, b, count * sizeof(int));
        for (size_t i = 0; i < count; ++i) w->bad += h[i] != (int)(i * 3 + (size_t)seed);
        /* freed before it completes: it still completes. Reading its output
         * after the next blocking call relies on loom (one stream per
         * communicator, calls in issue order), not on MPI. */
        fill(a, h, count, seed + 2);
        MPI_Request f;
        MPI_Iallreduce(a, c, (int)count, MPI_INT, MPI_SUM, w->comm, &f);
        MPI_Request_free(&f);
        if (MPI_SUCCESS != MPI_Allreduce(MPI_IN_PLACE, b, 1, MPI_INT, MPI_MAX, w->comm)) ++w->bad;
        w->bad += check_sum(c, h, count, seed + 2);
    }
    cudaStreamDestroy(copies);
    free(h);
    /* a, b and c are freed after every thread is done: cudaFree waits for the whole device */
    w->bufs[0] = a, w->bufs[1] = b, w->bufs[2] = c;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 3, provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (me == 0) printf("SKIP: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
        MPI_Finalize();
        return 77;
    }
    cudaGetDeviceCount(&ndev);
    if (ndev == 0) {
        if (me == 0) printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(me % ndev);
    if (threads < 1 || threads > 16) threads = 3;
    worker_t w[16];
    pthread_t tid[16];
    for (int t = 0; t < threads; ++t) {
        w[t].id = t;
        w[t].bad = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        /* a blocking device call makes the loom communicator (non-blocking calls need it) */
        w[t].bad += still_usable(w[t].comm);
    }
    for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, work, &w[t]);
    long bad = 0;
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        bad += w[t].bad;
    }
    for (int t = 0; t < threads; ++t)
        for (int k = 0; k < 3; ++k) cudaFree(w[t].bufs[k]);
    for (int t = 0; t < threads; ++t) MPI_Comm_free(&w[t].comm);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("coll_threads: %d ranks x %d threads x %d iterations: %ld wrong elements or errors\n", np, threads, iters,
               bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
