/*
 * Broadcast, allgather and allgatherv on device buffers whose datatypes and
 * displacements differ between ranks, as MPI allows (each rank's type
 * signature matches; layouts are its own). Every rank must still take the
 * same path: a rank that decided on its own datatype alone ("not
 * contiguous": staged through the previous module) while the others ran
 * loom's kernels hung until the peer timeout (MPICH's coll/bcast with its
 * derived-type pools, 1x H200). Each rank's form is rank % 3:
 *   0: MPI_INT, blocks back to back;
 *   1: a strided vector (every other int; the ints between keep a sentinel);
 *   2: MPI_Type_contiguous, and for allgatherv the blocks in reverse order.
 * Every element is checked against a host reference, and every hole must
 * keep its sentinel. Blocking and non-blocking, small (one-shot) and large
 * (ring) counts, roots everywhere, in place. Non-blocking calls must return
 * before the other ranks post theirs, packed ones included (posted_before_peers).
 *
 *   coll_type_mix [-c INTS]   (default: 1000 and 300000 per block)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

static int me, np, form;
static long bad;
static const int kHole = -7;

/* Element i of rank q's data in call `call`. */
static int val(int q, int i, int call) { return q * 100003 + i * 7 + call; }

/* One rank's view of `blocks` blocks of c ints: its datatype, count per
 * block, where block b and its element i live (in ints), and the buffer's
 * length in ints. Form 1 strides by 2; form 2 reverses allgatherv's blocks. */
typedef struct {
    MPI_Datatype type;
    int per_block;  /* count of `type` per block */
    int stride;     /* ints between elements */
    int block_ints; /* ints a block spans */
} view_t;

static view_t view_of(int f, int c)
{
    view_t v = {MPI_INT, c, 1, c};
    if (f == 1) {
        MPI_Datatype vec;
        MPI_Type_vector(c, 1, 2, MPI_INT, &vec);
        MPI_Type_create_resized(vec, 0, (MPI_Aint)(2 * (size_t)c * sizeof(int)), &v.type);
        MPI_Type_free(&vec);
        MPI_Type_commit(&v.type);
        v.per_block = 1, v.stride = 2, v.block_ints = 2 * c;
    } else if (f == 2) {
        MPI_Type_contiguous(c, MPI_INT, &v.type);
        MPI_Type_commit(&v.type);
        v.per_block = 1;
    }
    return v;
}

static void view_free(view_t *v)
{
    if (v->type != MPI_INT) MPI_Type_free(&v->type);
}

static int *upload(const int *h, size_t n)
{
    int *d = dalloc(n * sizeof(int));
    cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice);
    return d;
}

/* h (n ints, downloaded from d) must equal want; reports the first miss. */
static void check(const char *what, const int *d, const int *want, size_t n, int c)
{
    int *h = malloc(n * sizeof(int) + 1);
    cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; ++i)
        if (h[i] != want[i] && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d (form %d) %s, %d ints per block: %ld wrong, first at %zu: %d, want %d\n", me,
                form, what, c, wrong, first, h[first], want[first]);
    bad += wrong;
    free(h);
}

static int wait_or(int rc, MPI_Request *r)
{
    return rc == MPI_SUCCESS && r ? MPI_Wait(r, MPI_STATUS_IGNORE) : rc;
}

static void bcasts(int c, int nonblocking, int *call)
{
    view_t v = view_of(form, c);
    const size_t len = (size_t)v.block_ints;
    int *h = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int));
    for (int root = 0; root < np; ++root, ++*call) {
        for (size_t k = 0; k < len; ++k) h[k] = want[k] = kHole;
        for (int i = 0; i < c; ++i) {
            want[(size_t)i * v.stride] = val(root, i, *call);
            if (me == root) h[(size_t)i * v.stride] = want[(size_t)i * v.stride];
        }
        int *d = upload(h, len);
        MPI_Request r;
        int rc = nonblocking ? MPI_Ibcast(d, v.per_block, v.type, root, MPI_COMM_WORLD, &r)
                             : MPI_Bcast(d, v.per_block, v.type, root, MPI_COMM_WORLD);
        if (wait_or(rc, nonblocking ? &r : NULL) != MPI_SUCCESS) ++bad;
        check(nonblocking ? "ibcast" : "bcast", d, want, len, c);
        cudaFree(d);
    }
    free(h), free(want);
    view_free(&v);
}

/* allgather: this rank sends in its form and receives every block in it. */
static void allgathers(int c, int nonblocking, int in_place, int *call)
{
    view_t v = view_of(form, c);
    const size_t len = (size_t)v.block_ints * np;
    int *h = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int));
    for (size_t k = 0; k < len; ++k) h[k] = want[k] = kHole;
    for (int q = 0; q < np; ++q)
        for (int i = 0; i < c; ++i) want[(size_t)q * v.block_ints + (size_t)i * v.stride] = val(q, i, *call);
    int *send = NULL;
    if (in_place) { /* its own block already in place */
        for (int i = 0; i < c; ++i) h[(size_t)me * v.block_ints + (size_t)i * v.stride] = val(me, i, *call);
    } else {
        int *hs = malloc((size_t)v.block_ints * sizeof(int));
        for (int k = 0; k < v.block_ints; ++k) hs[k] = kHole;
        for (int i = 0; i < c; ++i) hs[(size_t)i * v.stride] = val(me, i, *call);
        send = upload(hs, (size_t)v.block_ints);
        free(hs);
    }
    int *d = upload(h, len);
    MPI_Request r;
    const void *sb = in_place ? MPI_IN_PLACE : (const void *)send;
    int rc = nonblocking ? MPI_Iallgather(sb, v.per_block, v.type, d, v.per_block, v.type, MPI_COMM_WORLD, &r)
                         : MPI_Allgather(sb, v.per_block, v.type, d, v.per_block, v.type, MPI_COMM_WORLD);
    if (wait_or(rc, nonblocking ? &r : NULL) != MPI_SUCCESS) ++bad;
    check(in_place ? "allgather in place" : nonblocking ? "iallgather" : "allgather", d, want, len, c);
    cudaFree(d);
    if (send) cudaFree(send);
    free(h), free(want);
    view_free(&v);
    ++*call;
}

/* allgatherv of MPI_INT blocks: ragged (c + q ints from rank q) or equal, at
 * this rank's own displacements: form 0 back to back, form 1 with a gap of
 * 3 ints after each block, form 2 in reverse rank order. */
static void allgathervs(int c, int ragged, int *call)
{
    int *counts = calloc((size_t)np, sizeof(int)), *displs = calloc((size_t)np, sizeof(int));
    size_t len = 0;
    for (int q = 0; q < np; ++q) counts[q] = ragged ? c + q : c;
    for (int k = 0; k < np; ++k) {
        const int q = form == 2 ? np - 1 - k : k;
        displs[q] = (int)len;
        len += (size_t)counts[q] + (form == 1 ? 3 : 0);
    }
    int *h = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int)), *hs = malloc(counts[me] * sizeof(int));
    for (size_t k = 0; k < len; ++k) h[k] = want[k] = kHole;
    for (int q = 0; q < np; ++q)
        for (int i = 0; i < counts[q]; ++i) want[(size_t)displs[q] + i] = val(q, i, *call);
    for (int i = 0; i < counts[me]; ++i) hs[i] = val(me, i, *call);
    int *d = upload(h, len), *send = upload(hs, (size_t)counts[me]);
    if (MPI_Allgatherv(send, counts[me], MPI_INT, d, counts, displs, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS) ++bad;
    check(ragged ? "allgatherv (ragged)" : "allgatherv (equal counts)", d, want, len, c);
    cudaFree(d), cudaFree(send);
    free(h), free(want), free(hs), free(counts), free(displs);
    ++*call;
}

/* Non-blocking calls return at once on every rank, packed ones too (form
 * 1's strided vector): every rank but 0 posts the call, frees its datatype
 * and sends rank 0 a token; rank 0 posts only once it holds every token. A
 * rank that waited inside its call for rank 0's part (a packed receive that
 * finished in the call, as loom did before) never sends its token: rank 0
 * waits and the others end in loom's time-out error. Then the same for a
 * request freed before completion (MPI_Request_free), whose result must be
 * in place after a later blocking call on loom's kernels on the
 * communicator. Both are loom's promises, not MPI's (MPI calls freeing a
 * non-blocking collective's request erroneous; Open MPI's libnbc refuses
 * it), kept because the non-blocking issue asks for them. Collectives:
 * ibcast from rank 0, iallgather, ialltoall (after a blocking alltoall,
 * which connects the pairs a non-blocking exchange needs). */
static void posted_before_peers(int c, int *call)
{
    for (int coll = 0; coll < 3; ++coll)
        for (int freed = 0; freed < 2; ++freed, ++*call) {
            view_t v = view_of(form, c);
            const int blocks = coll == 0 ? 1 : np;
            const size_t len = (size_t)v.block_ints * blocks;
            int *h = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int));
            int *hs = malloc(len * sizeof(int));
            for (size_t k = 0; k < len; ++k) h[k] = want[k] = hs[k] = kHole;
            for (int q = 0; q < blocks; ++q)
                for (int i = 0; i < c; ++i) {
                    const size_t at = (size_t)q * v.block_ints + (size_t)i * v.stride;
                    /* ibcast: rank 0's data; iallgather: rank q's; ialltoall: from q to this rank */
                    want[at] = coll == 0 ? val(0, i, *call) : coll == 1 ? val(q, i, *call) : val(q * np + me, i, *call);
                    hs[at] = coll == 2 ? val(me * np + q, i, *call) : coll == 1 && q == 0 ? val(me, i, *call)
                                                                                          : want[at];
                }
            if (coll == 0 && me == 0) memcpy(h, want, len * sizeof(int));
            int *d = upload(h, len), *send = upload(hs, len);
            if (coll == 2) { /* blocking first: the pairs connected, the path checked too */
                if (MPI_Alltoall(send, v.per_block, v.type, d, v.per_block, v.type, MPI_COMM_WORLD) != MPI_SUCCESS)
                    ++bad;
                check("alltoall", d, want, len, c);
                cudaMemcpy(d, h, len * sizeof(int), cudaMemcpyHostToDevice);
            }
            if (me == 0)
                for (int q = 1; q < np; ++q) MPI_Recv(NULL, 0, MPI_BYTE, q, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Request r;
            int rc = coll == 0 ? MPI_Ibcast(d, v.per_block, v.type, 0, MPI_COMM_WORLD, &r)
                   : coll == 1 ? MPI_Iallgather(send, v.per_block, v.type, d, v.per_block, v.type, MPI_COMM_WORLD, &r)
                               : MPI_Ialltoall(send, v.per_block, v.type, d, v.per_block, v.type, MPI_COMM_WORLD, &r);
            if (rc != MPI_SUCCESS) ++bad;
            view_free(&v); /* MPI lets the datatype go while the call is pending */
            if (me != 0) MPI_Send(NULL, 0, MPI_BYTE, 0, 77, MPI_COMM_WORLD);
            if (rc == MPI_SUCCESS && freed) MPI_Request_free(&r);
            else if (rc == MPI_SUCCESS && MPI_Wait(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad;
            if (freed) bad += still_usable(MPI_COMM_WORLD); /* a blocking call on loom's kernels: done by then */
            char what[48];
            snprintf(what, sizeof(what), "%s posted first%s", coll == 0 ? "ibcast" : coll == 1 ? "iallgather" : "ialltoall",
                     freed ? ", request freed" : "");
            check(what, d, want, len, c);
            cudaFree(d), cudaFree(send);
            free(h), free(want), free(hs);
        }
}

/* A packed receive is unpacked when its request completes, in progress,
 * maybe inside a wait on another call: its copies must not wait for the
 * application's legacy-stream work, which may wait for loom's later
 * kernels (loom's stream is a blocking stream by default; with
 * LOOM_STREAM_BLOCKING=0 it does not, and the round checks that the unpack
 * completes all the same). Every rank posts ibcast A
 * (packed on form 1); ranks but 0 then post iallreduce B, queue a memset
 * on the legacy stream (it waits for B), wait for A and only then send
 * rank 0 the token it waits for before posting B. An unpack whose copies
 * waited for the memset waited for B, which waits for rank 0: loom's
 * time-out. */
static void behind_legacy_work(int c, int *call)
{
    view_t v = view_of(form, c);
    const size_t len = (size_t)v.block_ints;
    int *h = malloc(len * sizeof(int)), *want = malloc(len * sizeof(int));
    for (size_t k = 0; k < len; ++k) h[k] = want[k] = kHole;
    for (int i = 0; i < c; ++i) {
        want[(size_t)i * v.stride] = val(0, i, *call);
        if (me == 0) h[(size_t)i * v.stride] = want[(size_t)i * v.stride];
    }
    int *d = upload(h, len), *sum = dalloc(sizeof(int)), *scratch = dalloc(64);
    const int one = 1;
    cudaMemcpy(sum, &one, sizeof(int), cudaMemcpyHostToDevice);
    MPI_Request a, b = MPI_REQUEST_NULL;
    if (MPI_Ibcast(d, v.per_block, v.type, 0, MPI_COMM_WORLD, &a) != MPI_SUCCESS) ++bad;
    if (me == 0) {
        for (int q = 1; q < np; ++q) MPI_Recv(NULL, 0, MPI_BYTE, q, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (MPI_Iallreduce(MPI_IN_PLACE, sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &b) != MPI_SUCCESS) ++bad;
        if (MPI_Wait(&a, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad;
    } else {
        if (MPI_Iallreduce(MPI_IN_PLACE, sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &b) != MPI_SUCCESS) ++bad;
        cudaMemsetAsync(scratch, 0, 64, 0); /* the legacy stream: behind B */
        if (MPI_Wait(&a, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad;
        MPI_Send(NULL, 0, MPI_BYTE, 0, 78, MPI_COMM_WORLD);
    }
    if (MPI_Wait(&b, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad;
    check("ibcast unpacked behind legacy-stream work", d, want, len, c);
    int got = 0;
    cudaMemcpy(&got, sum, sizeof(int), cudaMemcpyDeviceToHost);
    if (got != np) {
        fprintf(stderr, "FAIL rank %d: iallreduce behind the ibcast gave %d, want %d\n", me, got, np);
        ++bad;
    }
    cudaFree(d), cudaFree(sum), cudaFree(scratch);
    free(h), free(want);
    view_free(&v);
    ++*call;
}

int main(int argc, char **argv)
{
    int sizes[2] = {1000, 300000}, nsizes = 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "-c") && i + 1 < argc) sizes[0] = atoi(argv[++i]), nsizes = 1;
    if (!use_gpu_or_finalize(me)) return 77;
    form = me % 3;
    bad += still_usable(MPI_COMM_WORLD); /* loom's communicator first, by a blocking call */
    int call = 0;
    for (int s = 0; s < nsizes; ++s) {
        const int c = sizes[s];
        bcasts(c, 0, &call);
        bcasts(c, 1, &call);
        allgathers(c, 0, 0, &call);
        allgathers(c, 1, 0, &call);
        allgathers(c, 0, 1, &call);
        allgathervs(c, 1, &call);
        allgathervs(c, 0, &call);
        posted_before_peers(c, &call);
        behind_legacy_work(c, &call);
    }
    bad += still_usable(MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) printf("coll_type_mix: %d ranks, %d calls: %ld wrong elements or errors\n", np, call, bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
