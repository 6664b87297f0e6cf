/* The resident kernel (core/stream/resident.h) through MPI: blocking small calls on
 * device buffers, each checked element by element against a host reference,
 * with what may meet the kernel between them:
 *  - reductions of other types and ops (the kernel leaves for another
 *    instance), broadcasts, allgathers, alltoalls (any instance moves data);
 *  - the application's work still running on the legacy default stream when
 *    the call starts (a long copy, then a memset of the input): the call
 *    must see the memset's values (the rank takes the launched path then);
 *  - cudaDeviceSynchronize, cudaFree and cudaMalloc between calls (new
 *    addresses; a device-wide wait must end within the idle time);
 *  - pauses longer than the idle time (the kernel leaves and comes back),
 *    and about as long (a call posted while the kernel announces it leaves);
 *  - a second communicator used in turns with the first, then freed.
 *   resident_calls [-n CALLS] [-o RANK]   (-o: that rank launches every call)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXN 8192 /* elements: up to 32 KiB of ints */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) MPI_Abort(MPI_COMM_WORLD, 2);
    return p;
}

static int me, np;
static int32_t hin[MAXN * 8], hout[MAXN * 8], want[MAXN * 8];
static void *din, *dout, *big;

static int32_t value(int rank, int i, int k) { return (int32_t)((rank + 1) * 7 + i * 3 + k % 11); }

/* One call of kind k % 6 on comm (size n, rank r); returns wrong elements. */
static long one_call(MPI_Comm comm, int k, int count)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    const int kind = k % 6, root = k % n;
    size_t outn = (size_t)count;
    for (int i = 0; i < count * n; ++i) hin[i] = value(r, i, k);
    if (kind == 4) { /* input written on the legacy stream after a long copy still running */
        cudaMemcpyAsync(big, (char *)big + (128 << 20), 128 << 20, cudaMemcpyDeviceToDevice, 0);
        cudaMemsetAsync(din, r + 1 + k % 5, (size_t)count * 4, 0);
        for (int i = 0; i < count; ++i) hin[i] = (int32_t)(0x01010101u * (uint32_t)(r + 1 + k % 5));
    } else {
        cudaMemcpy(din, hin, (size_t)count * n * 4, cudaMemcpyHostToDevice);
    }
    const int inplace = k % 3 == 0 && (kind == 0 || kind == 1);
    void *sb = inplace ? MPI_IN_PLACE : din, *rb = inplace ? din : dout;
    switch (kind) {
    case 0: case 4: /* int sum */
        MPI_Allreduce(sb, rb, count, MPI_INT, MPI_SUM, comm);
        for (int i = 0; i < count; ++i) {
            uint32_t s = 0;
            for (int q = 0; q < n; ++q)
                s += kind == 4 ? 0x01010101u * (uint32_t)(q + 1 + k % 5) : (uint32_t)value(q, i, k);
            want[i] = (int32_t)s;
        }
        break;
    case 1: /* float max */
        for (int i = 0; i < count; ++i) ((float *)hin)[i] = (float)value(r, i, k) * ((i + r) % 2 ? 1.f : -1.f);
        cudaMemcpy(din, hin, (size_t)count * 4, cudaMemcpyHostToDevice);
        MPI_Allreduce(sb, rb, count, MPI_FLOAT, MPI_MAX, comm);
        for (int i = 0; i < count; ++i) {
            float m = -1e30f;
            for (int q = 0; q < n; ++q) {
                const float v = (float)value(q, i, k) * ((i + q) % 2 ? 1.f : -1.f);
                m = v > m ? v : m;
            }
            memcpy(&want[i], &m, 4);
        }
        break;
    case 2: /* MPI_CHAR sum, as OSU sends */
        MPI_Allreduce(din, dout, count * 4, MPI_CHAR, MPI_SUM, comm);
        for (int i = 0; i < count * 4; ++i) {
            unsigned s = 0;
            for (int q = 0; q < n; ++q) {
                int32_t v = value(q, i / 4, k);
                s += ((unsigned char *)&v)[i % 4];
            }
            ((unsigned char *)want)[i] = (unsigned char)s;
        }
        break;
    case 3: /* broadcast from root */
        MPI_Bcast(din, count, MPI_INT, root, comm);
        cudaMemcpy(hout, din, (size_t)count * 4, cudaMemcpyDeviceToHost);
        for (int i = 0; i < count; ++i) want[i] = value(root, i, k);
        goto check;
    case 5: /* allgather, then alltoall of the same blocks */
        MPI_Allgather(din, count, MPI_INT, dout, count, MPI_INT, comm);
        outn = (size_t)count * n;
        for (int q = 0; q < n; ++q)
            for (int i = 0; i < count; ++i) want[q * count + i] = value(q, i, k);
        cudaMemcpy(hout, dout, outn * 4, cudaMemcpyDeviceToHost);
        {
            long bad = 0;
            for (size_t i = 0; i < outn; ++i) bad += hout[i] != want[i];
            if (bad) return bad;
        }
        MPI_Alltoall(din, count, MPI_INT, dout, count, MPI_INT, comm);
        for (int q = 0; q < n; ++q)
            for (int i = 0; i < count; ++i) want[q * count + i] = value(q, r * count + i, k);
        break;
    }
    cudaMemcpy(hout, rb, outn * 4, cudaMemcpyDeviceToHost);
check:;
    long bad = 0;
    for (size_t i = 0; i < outn; ++i) bad += hout[i] != want[i];
    if (bad) fprintf(stderr, "rank %d: call %d (kind %d, %d elements): %ld wrong, first %d vs %d\n", me, k, kind,
                     count, bad, hout[0], want[0]);
    return bad;
}

int main(int argc, char **argv)
{
    int calls = 3000, slow = -1, c;
    while ((c = getopt(argc, argv, "n:o:")) != -1) {
        if (c == 'n') calls = atoi(optarg);
        if (c == 'o') slow = atoi(optarg);
    }
    const char *wr = getenv("OMPI_COMM_WORLD_RANK");
    if (slow >= 0 && wr && atoi(wr) == slow) setenv("LOOM_RESIDENT_IDLE_US", "0", 1); /* before loom reads it */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (me == 0) printf("resident_calls: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(me % ndev);
    din = dalloc(MAXN * 8 * 4);
    dout = dalloc(MAXN * 8 * 4);
    big = dalloc(256 << 20);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    srand(12345); /* the same sizes on every rank */
    long wrong = 0;
    double worstSync = 0;
    for (int k = 0; k < calls; ++k) {
        const int count = 1 + rand() % (rand() % 4 ? 256 : MAXN); /* mostly tiny, up to 32 KiB */
        wrong += one_call(k % 7 == 6 ? other : MPI_COMM_WORLD, k, count);
        if (k % 97 == 0) { /* the device-wide waits the kernel must not hold up for long */
            const double t0 = now();
            cudaDeviceSynchronize();
            const double t = now() - t0;
            worstSync = t > worstSync ? t : worstSync;
            cudaFree(din);
            cudaFree(dout);
            din = dalloc(MAXN * 8 * 4 + 256 * (k % 5));
            dout = dalloc(MAXN * 8 * 4);
        }
        if (k % 211 == 0) usleep(3000); /* longer than the idle time: the kernel leaves */
        else if (k % 13 == 0) usleep(900 + rand() % 200); /* about the idle time: a call may meet the kernel leaving */
        if (k == calls / 2) { /* the second communicator goes with its kernel; a new one comes */
            MPI_Comm_free(&other);
            MPI_Comm_split(MPI_COMM_WORLD, 0, np - me, &other);
        }
    }
    MPI_Comm_free(&other);
    long all = 0;
    double worst = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&worstSync, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0)
        printf("resident_calls: %d calls on %d ranks, %ld wrong elements; slowest cudaDeviceSynchronize after a "
               "call %.2f ms\n", calls, np, all, worst * 1e3);
    int rc = all != 0;
    if (worst > 0.5) { /* the idle time is 1 ms by default: a wait this long means the kernel did not leave */
        if (me == 0) printf("resident_calls: FAIL: a device-wide wait took %.1f ms\n", worst * 1e3);
        rc = 1;
    }
    cudaFree(big);
    MPI_Finalize();
    return rc;
}
