/*
 * Non-blocking collectives return without waiting for the other ranks, on
 * every path loom has: every rank but 0 posts the call, frees its derived
 * datatype and sends rank 0 a token; rank 0 posts only once it holds every
 * token, then all wait and check every element. A call that waited inside
 * for the others' part never lets its rank send the token: rank 0 blocks,
 * and the alarm fails the test with the call's name instead of a hang.
 *
 * Run with coll_loom_stage_host_buffers=1 on a machine without GPU, the
 * calls are staged (host copies, the previous module's non-blocking call):
 * loom finished those inside the call before its requests followed the
 * previous module's. Without it they are delegated (the previous module's
 * requests as they are). With -f a second round frees each request before
 * it completes (MPI_Request_free, which MPI calls erroneous for
 * non-blocking collectives and Open MPI's libnbc refuses; loom's requests
 * allow it, as the non-blocking issue asks); a blocking call on the
 * communicator must still work after it, and their results are checked
 * after MPI_Finalize.
 *
 * Then two pending calls whose receive spans interleave (interleaved()).
 * With -o, last, a large MPI_Ialltoallw then a small MPI_Iallreduce must
 * complete in that order (in_issue_order()).
 *
 *   nb_posted_first [-c COUNT] [-f] [-o]   (default 1000 ints per rank)
 */
#include "mpi4_persistent.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "issue_order.h"

/* Built twice: here on host buffers, and as test/gpu/nb_posted_first_gpu
 * (NB_ON_GPU) on device buffers, where the same calls take loom's kernels.
 * The checks read a host copy either way. */
#ifdef NB_ON_GPU
#include "../gpu/device_checks.h"
static void *buf_new(size_t bytes) { return dalloc(bytes); }
static void buf_free(void *p) { cudaFree(p); }
static void buf_put(void *dst, const void *src, size_t bytes) { cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); }
#else
static void *buf_new(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void buf_free(void *p) { free(p); }
static void buf_put(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
#endif


static int me, np;
static long bad;
static const char *volatile phase = "start";
/* A freed request's buffers: checked and freed after MPI_Finalize, which is
 * the only point where MPI says the operation is done. */
static struct {
    int *dsend, *drecv, *want;
    size_t len;
    const char *what;
} later[8];
static int nlater;

static void stuck(int sig)
{
    (void)sig;
    char msg[160];
    const int k = snprintf(msg, sizeof(msg), "FAIL rank %d: no progress for 60 s in %s\n", me, phase);
    if (write(2, msg, (size_t)k) < 0) _exit(3);
    _exit(2);
}

static int val(int q, int i, int call) { return q * 100003 + i * 7 + call; }

static void expect(const char *what, const int *got, const int *want, size_t n)
{
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i] && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d %s: %ld wrong of %zu, first at %zu: %d, want %d\n", me, what, wrong, n, first,
                got[first], want[first]);
    bad += wrong;
}

enum { IALLREDUCE, IBCAST, IALLGATHERV, IALLTOALLW, NCOLLS };
static const char *const names[NCOLLS] = {"iallreduce", "ibcast", "iallgatherv", "ialltoallw"};

/* One collective posted by rank 0 last. c ints per rank (per peer for
 * alltoallw); iallgatherv receives pairs of ints through a derived type
 * that the caller frees before the wait. */
static void posted_first(int coll, int c, int freed, int call)
{
    phase = names[coll];
    const size_t n = (size_t)c * np;
    int *send = malloc(n * sizeof(int)), *recv = malloc(n * sizeof(int)), *want = malloc(n * sizeof(int));
    int *dsend = buf_new(n * sizeof(int)), *drecv = buf_new(n * sizeof(int));
    int *counts = malloc(np * sizeof(int)), *displs = malloc(np * sizeof(int)), *bdispls = malloc(np * sizeof(int));
    MPI_Datatype *types = malloc(np * sizeof(MPI_Datatype));
    MPI_Datatype pair = MPI_DATATYPE_NULL;
    for (size_t k = 0; k < n; ++k) send[k] = recv[k] = want[k] = -1;
    size_t len = 0; /* elements compared */
    for (int q = 0; q < np; ++q) {
        counts[q] = c, displs[q] = q * c, bdispls[q] = (int)(q * c * sizeof(int)), types[q] = MPI_INT;
    }
    if (coll == IALLREDUCE) {
        len = (size_t)c;
        for (int i = 0; i < c; ++i) send[i] = val(me, i, call), want[i] = 0;
        for (int q = 0; q < np; ++q)
            for (int i = 0; i < c; ++i) want[i] += val(q, i, call);
    } else if (coll == IBCAST) {
        len = (size_t)c;
        for (int i = 0; i < c; ++i) want[i] = val(0, i, call);
        if (me == 0) memcpy(recv, want, len * sizeof(int));
    } else if (coll == IALLGATHERV) { /* c / 2 pairs from each rank */
        MPI_Type_contiguous(2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        len = n;
        for (int q = 0; q < np; ++q) counts[q] = c / 2, displs[q] = q * (c / 2);
        for (int q = 0; q < np; ++q)
            for (int i = 0; i < 2 * (c / 2); ++i) want[(size_t)q * c + i] = val(q, i, call);
        for (int i = 0; i < 2 * (c / 2); ++i) send[i] = val(me, i, call);
    } else { /* ialltoallw: block q to rank q */
        len = n;
        for (int q = 0; q < np; ++q)
            for (int i = 0; i < c; ++i) {
                send[(size_t)q * c + i] = val(me * np + q, i, call);
                want[(size_t)q * c + i] = val(q * np + me, i, call);
            }
    }
    buf_put(dsend, send, n * sizeof(int));
    buf_put(drecv, recv, n * sizeof(int));
    if (me == 0)
        for (int q = 1; q < np; ++q) MPI_Recv(NULL, 0, MPI_BYTE, q, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = coll == IALLREDUCE ? MPI_Iallreduce(dsend, drecv, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r)
           : coll == IBCAST     ? MPI_Ibcast(drecv, c, MPI_INT, 0, MPI_COMM_WORLD, &r)
           : coll == IALLGATHERV
               ? MPI_Iallgatherv(dsend, c / 2, pair, drecv, counts, displs, pair, MPI_COMM_WORLD, &r)
               : MPI_Ialltoallw(dsend, counts, bdispls, types, drecv, counts, bdispls, types, MPI_COMM_WORLD, &r);
    if (rc != MPI_SUCCESS) ++bad;
    if (pair != MPI_DATATYPE_NULL) MPI_Type_free(&pair); /* MPI lets it go while the call is pending */
    if (me != 0) MPI_Send(NULL, 0, MPI_BYTE, 0, 77, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && freed) {
        MPI_Request_free(&r);
        /* a blocking call on the same communicator still works meanwhile */
        int one = 1, sum = 0;
        if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS || sum != np) ++bad;
    } else if (rc == MPI_SUCCESS) {
        if (MPI_Wait(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad;
        buf_put(recv, drecv, len * sizeof(int));
        expect(names[coll], recv, want, len);
    }
    if (rc == MPI_SUCCESS && freed) {
        later[nlater].dsend = dsend, later[nlater].drecv = drecv, later[nlater].want = want;
        later[nlater].len = len, later[nlater++].what = names[coll];
    } else {
        buf_free(dsend), buf_free(drecv), free(want);
    }
    free(send), free(recv);
    free(counts), free(displs), free(bdispls), free(types);
}

/* Two pending iallgathervs into one buffer, interleaved: rank q's block of
 * the first at 2q x c ints, of the second at (2q + 1) x c. Each call's span
 * holds the other's blocks in its gaps; a staged call copies back at
 * completion, and a copy back of the whole span would put older bytes over
 * the other's blocks (each copies back only the bytes it changed). Posted
 * first by the ranks but 0, as above, and waited in reverse order. On a
 * GPU both run on loom's kernels, which write blocks only. strided: the
 * same with every other int (c one-int runs per block: staged, or packed on
 * a GPU, each laid over a fresh copy of the span at completion). blocking:
 * the second is a blocking allgatherv, whose wait progresses the first: a
 * staged copy back of its whole span after that put older bytes over the
 * first one's blocks (a helper's review). */
static void interleaved(int c, int call, int strided, int blocking)
{
    phase = strided ? "interleaved strided iallgathers"
          : blocking ? "iallgatherv, then allgatherv into its gaps" : "interleaved iallgathervs";
    const size_t len = (size_t)2 * c * np;
    int *send = malloc(2 * (size_t)c * sizeof(int)), *recv = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int));
    int *counts = malloc(np * sizeof(int)), *even = malloc(np * sizeof(int)), *odd = malloc(np * sizeof(int));
    for (int q = 0; q < np; ++q) counts[q] = c, even[q] = 2 * q * c, odd[q] = (2 * q + 1) * c;
    for (size_t k = 0; k < len; ++k) recv[k] = -1;
    for (int q = 0; q < np; ++q)
        for (int i = 0; i < 2 * c; ++i) want[(size_t)2 * q * c + i] = val(q, i, call);
    for (int i = 0; i < 2 * c; ++i) send[i] = val(me, i, call);
    int *dsend = buf_new(2 * (size_t)c * sizeof(int)), *drecv = buf_new(len * sizeof(int));
    buf_put(dsend, send, 2 * (size_t)c * sizeof(int));
    buf_put(drecv, recv, len * sizeof(int));
    MPI_Request r[2];
    MPI_Datatype every_other = MPI_DATATYPE_NULL; /* strided: c ints, every other one, a block's extent 2c */
    if (strided) {
        MPI_Datatype v;
        MPI_Type_vector(c, 1, 2, MPI_INT, &v);
        MPI_Type_create_resized(v, 0, (MPI_Aint)(2 * (size_t)c * sizeof(int)), &every_other);
        MPI_Type_free(&v);
        MPI_Type_commit(&every_other);
        for (int q = 0; q < np; ++q)
            for (int i = 0; i < c; ++i) {
                want[(size_t)2 * q * c + 2 * i] = val(q, i, call);
                want[(size_t)2 * q * c + 2 * i + 1] = val(q, c + i, call);
            }
    }
    if (me == 0)
        for (int q = 1; q < np; ++q) MPI_Recv(NULL, 0, MPI_BYTE, q, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const int rc0 =
        strided ? MPI_Iallgather(dsend, c, MPI_INT, drecv, 1, every_other, MPI_COMM_WORLD, &r[0])
                : MPI_Iallgatherv(dsend, c, MPI_INT, drecv, counts, even, MPI_INT, MPI_COMM_WORLD, &r[0]);
    /* blocking: the second call waits for rank 0, so the token goes first */
    if (me != 0 && blocking) MPI_Send(NULL, 0, MPI_BYTE, 0, 79, MPI_COMM_WORLD);
    r[1] = MPI_REQUEST_NULL;
    const int rc1 =
        strided    ? MPI_Iallgather(dsend + c, c, MPI_INT, drecv + 1, 1, every_other, MPI_COMM_WORLD, &r[1])
        : blocking ? MPI_Allgatherv(dsend + c, c, MPI_INT, drecv, counts, odd, MPI_INT, MPI_COMM_WORLD)
                   : MPI_Iallgatherv(dsend + c, c, MPI_INT, drecv, counts, odd, MPI_INT, MPI_COMM_WORLD, &r[1]);
    if (strided) MPI_Type_free(&every_other);
    if (me != 0 && !blocking) MPI_Send(NULL, 0, MPI_BYTE, 0, 79, MPI_COMM_WORLD);
    if (rc0 != MPI_SUCCESS || rc1 != MPI_SUCCESS) {
        ++bad;
    } else {
        if (MPI_Wait(&r[1], MPI_STATUS_IGNORE) != MPI_SUCCESS || MPI_Wait(&r[0], MPI_STATUS_IGNORE) != MPI_SUCCESS)
            ++bad;
        buf_put(recv, drecv, len * sizeof(int));
        expect(phase, recv, want, len);
    }
    buf_free(dsend), buf_free(drecv);
    free(send), free(recv), free(want), free(counts), free(even), free(odd);
}

/* A communicator's requests complete in issue order (loom's promise, not
 * MPI's): a large ialltoallw (persistent: MPI_Alltoallw_init and
 * MPI_Start), then a one-int iallreduce, which alone would finish long
 * before (on the CPU both are staged: the previous module's requests; on a
 * GPU loom's kernels): the second may not be complete while the first is
 * not (issue_order.h). */
static void in_issue_order(int call, int persistent)
{
    phase = persistent ? "started alltoallw_init, then iallreduce: completion order"
                       : "ialltoallw, then iallreduce: completion order";
    const int c = 1 << 18; /* ints per peer */
    const size_t n = (size_t)c * np;
    int *send = malloc(n * sizeof(int)), *want = malloc(n * sizeof(int)), *got = malloc(n * sizeof(int));
    int *counts = malloc(np * sizeof(int)), *bdispls = malloc(np * sizeof(int));
    MPI_Datatype *types = malloc(np * sizeof(MPI_Datatype));
    for (int q = 0; q < np; ++q) counts[q] = c, bdispls[q] = (int)((size_t)q * c * sizeof(int)), types[q] = MPI_INT;
    for (int q = 0; q < np; ++q)
        for (int i = 0; i < c; ++i) {
            send[(size_t)q * c + i] = val(me * np + q, i, call);
            want[(size_t)q * c + i] = val(q * np + me, i, call);
        }
    int *dsend = buf_new(n * sizeof(int)), *drecv = buf_new(n * sizeof(int)), *done = buf_new(2 * sizeof(int));
    buf_put(dsend, send, n * sizeof(int));
    const int one[2] = {1, 0};
    buf_put(done, one, sizeof(one));
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc;
#if HAVE_PERSISTENT_COLLS
    if (persistent) {
        rc = MPI_Alltoallw_init(dsend, counts, bdispls, types, drecv, counts, bdispls, types, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &r[0]);
        if (rc == MPI_SUCCESS) rc = MPI_Start(&r[0]);
    } else
#endif
        rc = MPI_Ialltoallw(dsend, counts, bdispls, types, drecv, counts, bdispls, types, MPI_COMM_WORLD, &r[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Iallreduce(done, done + 1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]);
    if (rc != MPI_SUCCESS) {
        ++bad;
    } else {
        bad += completes_last(r, 2, me, phase);
        int sum[2];
        buf_put(got, drecv, n * sizeof(int));
        expect(phase, got, want, n);
        buf_put(sum, done, sizeof(sum));
        if (sum[1] != np) ++bad;
    }
    if (r[0] != MPI_REQUEST_NULL) MPI_Request_free(&r[0]); /* the persistent one, inactive */
    buf_free(dsend), buf_free(drecv), buf_free(done);
    free(send), free(want), free(got), free(counts), free(bdispls), free(types);
}

int main(int argc, char **argv)
{
    int c = 1000, rounds = 1, order = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "-c") && i + 1 < argc) c = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-f")) rounds = 2;
        else if (!strcmp(argv[i], "-o")) order = 1;
#ifdef NB_ON_GPU
    if (!use_gpu_or_finalize(me)) return 77;
    bad += still_usable(MPI_COMM_WORLD); /* loom's communicator and its pairs, by blocking calls */
    {
        int *a = buf_new((size_t)np * sizeof(int)), *b = buf_new((size_t)np * sizeof(int));
        if (MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS) ++bad;
        buf_free(a), buf_free(b);
    }
#endif
    signal(SIGALRM, stuck);
    alarm(60);
    int call = 0;
    for (int freed = 0; freed < rounds; ++freed)
        for (int coll = 0; coll < NCOLLS; ++coll) posted_first(coll, c, freed, call++);
    interleaved(c, call++, 0, 0);
    interleaved(c, call++, 1, 0);
    interleaved(c, call++, 0, 1);
    if (order) in_issue_order(call++, 0);
#if HAVE_PERSISTENT_COLLS
    if (order) in_issue_order(call++, 1);
#endif
    phase = "the final check";
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    alarm(0);
    if (me == 0) printf("nb_posted_first: %d ranks, %d calls: %ld wrong elements or errors\n", np, call, bad);
    MPI_Finalize();
    for (int i = 0; i < nlater; ++i) {
        int *got = malloc(later[i].len * sizeof(int) + 1);
        buf_put(got, later[i].drecv, later[i].len * sizeof(int));
        char what[48];
        snprintf(what, sizeof(what), "%s, request freed", later[i].what);
        expect(what, got, later[i].want, later[i].len);
        free(got), free(later[i].want);
        buf_free(later[i].dsend), buf_free(later[i].drecv);
    }
    return bad ? 1 : 0;
}
