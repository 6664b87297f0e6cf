/*
 * Two communicators whose non-blocking calls are issued in opposite orders
 * on alternate ranks: even ranks start comm A's call first, odd ranks comm
 * B's (legal: MPI orders collectives per communicator only). So on every
 * rank the second call is issued while the first one's kernel waits for
 * peers that have not issued it yet. Each round pairs kernels this process
 * has not launched before (ring allreduce and broadcast, reduce_scatter and
 * allgather, exchange and scan, reduce and gather): under CUDA's lazy
 * loading such a first launch synchronized the device, waited for the
 * other communicator's kernel, and every rank hung inside cudaLaunchKernel
 * (device/kernel_load.h). A last round crosses a staged call (a
 * user-defined op: copied through host memory) with the other
 * communicator's kernel: a staging copy on the legacy default stream waited
 * for that kernel, whose peer was still inside the staged call. The last
 * round crosses blocking alltoalls that read peers' inputs in place (direct
 * pairs), each on a new allocation once the mapping cache is full, with the
 * other communicator's kernel: evicting a mapping closed it inside the call
 * (cudaIpcCloseMemHandle waits for every kernel the process runs). Every
 * element is checked against a host reference.
 *
 *   coll_cross_order [-n FLOATS]   (default 1M floats per call)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

static int me, np;
static long bad;

static float value(int r, size_t i, int round) { return (float)((i * 5 + (size_t)r * 3 + (size_t)round) % 13); }

static float *upload(size_t n, int r, int round)
{
    float *h = malloc(n * sizeof(float) + 1), *d = dalloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) h[i] = value(r, i, round);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

/* d[i] must be want(i) for i < n; reports the first wrong element. */
static void expect(const char *what, const float *d, size_t n, float (*want)(size_t, int), int round)
{
    float *h = malloc(n * sizeof(float) + 1);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < n; ++i)
        if (h[i] != want(i, round) && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d %s (%zu floats): %ld wrong, first at %zu: %g, want %g\n", me, what, n, wrong,
                first, h[first], want(first, round));
    bad += wrong;
    free(h);
}

static size_t slice; /* elements per rank in the rounds that split the buffer */
static float sum_of(size_t i, int round)
{
    float s = 0;
    for (int r = 0; r < np; ++r) s += value(r, i, round);
    return s;
}
static float sum_of_mine(size_t i, int round) { return sum_of((size_t)me * slice + i, round); }
static float from_root1(size_t i, int round) { return value(1 % np, i, round); }
static float gathered(size_t i, int round) { return value((int)(i / slice), i % slice, round); }
/* the alltoall's block from q holds q's elements me*slice .. */
static float exchanged(size_t i, int round) { return value((int)(i / slice), (size_t)me * slice + i % slice, round); }
static float prefix(size_t i, int round)
{
    float s = 0;
    for (int r = 0; r <= me; ++r) s += value(r, i, round);
    return s;
}

/* Issues first(a) and second(b) on even ranks, the other way on odd ones. */
typedef void (*issue_fn)(MPI_Comm, MPI_Request *, void *);
static void crossed(MPI_Comm a, issue_fn fa, void *xa, MPI_Comm b, issue_fn fb, void *xb)
{
    MPI_Request r[2];
    if (me % 2 == 0) {
        fa(a, &r[0], xa);
        fb(b, &r[1], xb);
    } else {
        fb(b, &r[1], xb);
        fa(a, &r[0], xa);
    }
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
}

typedef struct {
    float *in, *out;
    size_t n;
} bufs_t;

static void iallreduce(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Iallreduce(b->in, b->out, (int)b->n, MPI_FLOAT, MPI_SUM, c, r);
}
static void ibcast(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Ibcast(b->in, (int)b->n, MPI_FLOAT, 1 % np, c, r);
}
static void ireduce_scatter(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Ireduce_scatter_block(b->in, b->out, (int)slice, MPI_FLOAT, MPI_SUM, c, r);
}
static void iallgather(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Iallgather(b->in, (int)slice, MPI_FLOAT, b->out, (int)slice, MPI_FLOAT, c, r);
}
static void ialltoall(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Ialltoall(b->in, (int)slice, MPI_FLOAT, b->out, (int)slice, MPI_FLOAT, c, r);
}
static void iscan(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Iscan(b->in, b->out, (int)b->n, MPI_FLOAT, MPI_SUM, c, r);
}
static void ireduce(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Ireduce(b->in, b->out, (int)b->n, MPI_FLOAT, MPI_SUM, 0, c, r);
}
static void igather(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    MPI_Igather(b->in, (int)slice, MPI_FLOAT, b->out, (int)slice, MPI_FLOAT, np - 1, c, r);
}

/* A blocking alltoall of `direct_block` floats per peer: read in place from
 * peers' inputs (LOOM_EXCHANGE_DIRECT_BYTES is 256 KiB by default; 2 MiB
 * blocks are past the one-shot exchange too). */
static size_t direct_block = (size_t)512 << 10;
static void direct_alltoall(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    if (MPI_SUCCESS != MPI_Alltoall(b->in, (int)direct_block, MPI_FLOAT, b->out, (int)direct_block, MPI_FLOAT, c))
        ++bad;
    *r = MPI_REQUEST_NULL;
}
static float direct_exchanged(size_t i, int round)
{
    return value((int)(i / direct_block), (size_t)me * direct_block + i % direct_block, round);
}

/* A sum loom does not reduce on the GPU (a user-defined op): the call is staged. */
static void host_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; ++i) ((float *)inout)[i] += ((const float *)in)[i];
}
static MPI_Op user_sum;
static void staged_allreduce(MPI_Comm c, MPI_Request *r, void *x)
{
    bufs_t *b = x;
    if (MPI_SUCCESS != MPI_Allreduce(b->in, b->out, (int)b->n, MPI_FLOAT, user_sum, c)) ++bad;
    *r = MPI_REQUEST_NULL;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)1 << 20;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = (size_t)atol(argv[++i]);
    if (!use_gpu_or_finalize(me)) return 77;
    slice = n / (size_t)np;
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    /* One small blocking call each: both loom communicators exist before the rounds. */
    bad += still_usable(a) + still_usable(b);

    int round = 1;
    { /* ring allreduce on A, broadcast on B */
        bufs_t x = {upload(n, me, round), dalloc(n * sizeof(float)), n};
        bufs_t y = {upload(n, me, round), NULL, n};
        crossed(a, iallreduce, &x, b, ibcast, &y);
        expect("iallreduce (crossed with ibcast)", x.out, n, sum_of, round);
        expect("ibcast (crossed with iallreduce)", y.in, n, from_root1, round);
        cudaFree(x.in), cudaFree(x.out), cudaFree(y.in);
    }
    ++round;
    { /* reduce_scatter on A, allgather on B */
        bufs_t x = {upload(slice * np, me, round), dalloc(slice * sizeof(float)), n};
        bufs_t y = {upload(slice, me, round), dalloc(slice * np * sizeof(float)), n};
        crossed(a, ireduce_scatter, &x, b, iallgather, &y);
        expect("ireduce_scatter_block (crossed with iallgather)", x.out, slice, sum_of_mine, round);
        expect("iallgather (crossed with ireduce_scatter_block)", y.out, slice * np, gathered, round);
        cudaFree(x.in), cudaFree(x.out), cudaFree(y.in), cudaFree(y.out);
    }
    ++round;
    { /* exchange on A, scan on B: their pairs connected by a blocking call each first */
        float *t = dalloc(np * sizeof(float)), *u = dalloc(np * sizeof(float));
        MPI_Alltoall(t, 1, MPI_FLOAT, u, 1, MPI_FLOAT, a);
        MPI_Scan(t, u, 1, MPI_FLOAT, MPI_SUM, b);
        cudaFree(t), cudaFree(u);
        bufs_t x = {upload(slice * np, me, round), dalloc(slice * np * sizeof(float)), n};
        bufs_t y = {upload(n, me, round), dalloc(n * sizeof(float)), n};
        crossed(a, ialltoall, &x, b, iscan, &y);
        expect("ialltoall (crossed with iscan)", x.out, slice * np, exchanged, round);
        expect("iscan (crossed with ialltoall)", y.out, n, prefix, round);
        cudaFree(x.in), cudaFree(x.out), cudaFree(y.in), cudaFree(y.out);
    }
    ++round;
    { /* reduce on A (root 0), gather on B (root np - 1) */
        bufs_t x = {upload(n, me, round), dalloc(n * sizeof(float)), n};
        bufs_t y = {upload(slice, me, round), dalloc(slice * np * sizeof(float)), n};
        crossed(a, ireduce, &x, b, igather, &y);
        if (me == 0) expect("ireduce (crossed with igather)", x.out, n, sum_of, round);
        if (me == np - 1) expect("igather (crossed with ireduce)", y.out, slice * np, gathered, round);
        cudaFree(x.in), cudaFree(x.out), cudaFree(y.in), cudaFree(y.out);
    }
    ++round;
    { /* staged allreduce (user op) on A, ring allreduce on B */
        MPI_Op_create(host_sum, 1, &user_sum);
        bufs_t x = {upload(n, me, round), dalloc(n * sizeof(float)), n};
        bufs_t y = {upload(n, me, round), dalloc(n * sizeof(float)), n};
        crossed(a, staged_allreduce, &x, b, iallreduce, &y);
        expect("staged allreduce (crossed with iallreduce)", x.out, n, sum_of, round);
        expect("iallreduce (crossed with a staged allreduce)", y.out, n, sum_of, round);
        cudaFree(x.in), cudaFree(x.out), cudaFree(y.in), cudaFree(y.out);
        MPI_Op_free(&user_sum);
    }
    ++round;
    { /* direct-pair alltoalls on B, each on a new input once the cache is full, crossed with iallreduce on A */
        /* kept: core/ipc/direct_buffers.h's kMappedPerPeer; the mpitest checks that evictions happened */
        enum { kept = 8, crossings = 3 };
        const size_t total = direct_block * np;
        float *ins[kept + crossings], *out = dalloc(total * sizeof(float));
        for (int k = 0; k < kept + crossings; ++k) {
            const int data = round * 16 + k; /* each input its own contents: a stale mapping shows */
            bufs_t y = {ins[k] = upload(total, me, data), out, total};
            cudaMemset(out, 0xff, total * sizeof(float)); /* NaN: a block not copied shows */
            if (k < kept) { /* fills the cache: one mapping per peer and input */
                direct_alltoall(b, &(MPI_Request){0}, &y);
            } else { /* evicts one while A's kernel waits for a peer still in this call */
                bufs_t x = {upload(n, me, round), dalloc(n * sizeof(float)), n};
                crossed(a, iallreduce, &x, b, direct_alltoall, &y);
                expect("iallreduce (crossed with a direct alltoall)", x.out, n, sum_of, round);
                cudaFree(x.in), cudaFree(x.out);
            }
            expect("direct alltoall", out, total, direct_exchanged, data);
        }
        for (int k = 0; k < kept + crossings; ++k) cudaFree(ins[k]);
        cudaFree(out);
    }
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("coll_cross_order: %d ranks, %zu floats: %ld wrong elements or errors\n", np, n, bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
