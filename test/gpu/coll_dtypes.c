/*
 * Every datatype of test/mpi/dt_types.h (every constructor and nesting,
 * holes, negative bounds, resized extents, zero-size blocks) through the
 * collectives that move typed blocks, on device buffers, against the same
 * call on host buffers on a duplicate communicator that never sees a
 * device buffer (so Open MPI's own component serves it): every byte of
 * both buffers must match, holes and gaps included (both start with the
 * same pattern). bcast, ibcast, allgather (and in place), allgatherv,
 * alltoall (and in place), ialltoall, alltoallv, alltoallw (a type per
 * block: the type, or a contiguous run of it, which has the same
 * signature; the reference sends the type alike), gather (and in place),
 * gatherv, scatter, scatterv, the neighbourhood collectives on a
 * distributed graph (allgather, allgatherv, alltoall, ialltoallv,
 * alltoallw), and the persistent bcast_init, alltoallw_init and
 * neighbor_alltoall_init (MPI-4, or 4.1's MPIX_), each started twice; at a small
 * count and one of about 128 KiB per block, roots moving; then all again
 * with rank 1 passing host buffers (packed by the host convertor while the
 * others pack on the GPU).
 *
 *   coll_dtypes            the check
 *   coll_dtypes -b [F]     the throughput of MPI_Bcast, MPI_Alltoall and
 *                          MPI_Neighbor_alltoall (the distributed graph) of
 *                          a vector of 256-byte blocks against the same
 *                          bytes contiguous, and MPI_Alltoall with only
 *                          the send or only the receive side typed (the
 *                          pack or the unpack alone in the call), and
 *                          MPI_Alltoallw of the vector and of a subarray
 *                          face (a type per block) and the face's MPI_Bcast
 *                          against the same bytes as MPI_BYTE, blocks
 *                          of 64 KiB to 64 MiB, each F (4) times the last; a
 *                          benchmark: run it with --mca coll_loom_dt_gpu 0
 *                          for the host path
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi/mpi4_persistent.h"
#include "dt_coll_common.h"
#include "dt_types.h"

static int failures, calls;
static int mixed; /* rank 1 passes host buffers, the others device buffers */

typedef struct {
    MPI_Datatype t, run; /* run: contiguous(c, t), t's signature c times */
    int c;
    int root;
} args_t;

typedef void (*coll_fn)(MPI_Comm comm, char *s, char *r, const args_t *a);

static void bcast(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    (void)s;
    MPI_Bcast(r, a->c, a->t, a->root, comm);
}
static void ibcast(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    (void)s;
    MPI_Request q;
    MPI_Ibcast(r, a->c, a->t, a->root, comm, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}
static void allgather(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Allgather(s, a->c, a->t, r, a->c, a->t, comm);
}
static void allgather_in_place(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    (void)s;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, a->c, a->t, comm);
}
/* Rank q's count in the v-forms: every other rank half as many. */
static int vcount(int q, int c) { return q % 2 ? c / 2 : c; }
/* The v-forms' blocks in reverse rank order. */
static void reversed(int c, int *counts, int *displs)
{
    int at = 0;
    for (int q = np - 1; q >= 0; --q) counts[q] = vcount(q, c), displs[q] = at, at += counts[q];
}
static void allgatherv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int counts[64], displs[64];
    reversed(a->c, counts, displs);
    MPI_Allgatherv(s, counts[me], a->t, r, counts, displs, a->t, comm);
}
static void alltoall(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Alltoall(s, a->c, a->t, r, a->c, a->t, comm);
}
/* Only one side typed: the other moves the same bytes as MPI_BYTE. */
static int type_bytes(const args_t *a)
{
    int size = 0;
    MPI_Type_size(a->t, &size);
    return size * a->c;
}
static void alltoall_send_typed(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Alltoall(s, a->c, a->t, r, type_bytes(a), MPI_BYTE, comm);
}
static void alltoall_recv_typed(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Alltoall(s, type_bytes(a), MPI_BYTE, r, a->c, a->t, comm);
}
static void alltoall_in_place(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    (void)s;
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, a->c, a->t, comm);
}
static void ialltoall(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Request q;
    MPI_Ialltoall(s, a->c, a->t, r, a->c, a->t, comm, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}
/* What rank `from` sends rank `to` in alltoallv: c or half of it. */
static int pair_count(int from, int to, int c) { return (from + to) % 2 ? c / 2 : c; }
static void alltoallv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int sc[64], sd[64], rc[64], rd[64];
    for (int q = 0; q < np; ++q) {
        sc[q] = pair_count(me, q, a->c), sd[q] = q * a->c;
        rc[q] = pair_count(q, me, a->c), rd[q] = (np - 1 - q) * a->c;
    }
    MPI_Alltoallv(s, sc, sd, a->t, r, rc, rd, a->t, comm);
}
/* Block q of c elements as c of t or one run (same layout, same
 * signature), alternating, at byte displacements; with `same`, every block
 * as c of t: the reference, since Open MPI's own alltoallw of mixed types
 * drops a rank's last element to itself (4.1: contiguous(c, MPI_DOUBLE_INT)
 * received against c MPI_DOUBLE_INT sent, the last int left unwritten). */
static void alltoallw_types(MPI_Comm comm, char *s, char *r, const args_t *a, int same)
{
    int sc[64], sd[64], rc[64], rd[64];
    MPI_Datatype st[64], rt[64];
    MPI_Aint lb, extent;
    MPI_Type_get_extent(a->t, &lb, &extent);
    for (int q = 0; q < np; ++q) {
        const int s_run = !same && (q + me) % 2, r_run = !same && q % 2;
        st[q] = s_run ? a->run : a->t, sc[q] = s_run ? 1 : a->c, sd[q] = (int)((MPI_Aint)q * a->c * extent);
        rt[q] = r_run ? a->run : a->t, rc[q] = r_run ? 1 : a->c, rd[q] = (int)((MPI_Aint)(np - 1 - q) * a->c * extent);
    }
    MPI_Alltoallw(s, sc, sd, st, r, rc, rd, rt, comm);
}
static void alltoallw(MPI_Comm comm, char *s, char *r, const args_t *a) { alltoallw_types(comm, s, r, a, 0); }
static void alltoallw_same(MPI_Comm comm, char *s, char *r, const args_t *a) { alltoallw_types(comm, s, r, a, 1); }
#if HAVE_PERSISTENT_COLLS
/* Persistent forms: started twice (the second start packs again). */
static void start_twice(MPI_Request *q)
{
    for (int i = 0; i < 2; ++i) {
        MPI_Start(q);
        MPI_Wait(q, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(q);
}
static void bcast_init(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    (void)s;
    MPI_Request q;
    MPI_Bcast_init(r, a->c, a->t, a->root, comm, MPI_INFO_NULL, &q);
    start_twice(&q);
}
static void alltoallw_init(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int sc[64], sd[64];
    MPI_Datatype st[64];
    MPI_Aint lb, extent;
    MPI_Type_get_extent(a->t, &lb, &extent);
    for (int q = 0; q < np; ++q) st[q] = a->t, sc[q] = a->c, sd[q] = (int)((MPI_Aint)q * a->c * extent);
    MPI_Request rq;
    /* sends and receives block q at q: the reference is MPI_Alltoall */
    MPI_Alltoallw_init(s, sc, sd, st, r, sc, sd, st, comm, MPI_INFO_NULL, &rq);
    start_twice(&rq);
}
#endif
static void gather(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Gather(s, a->c, a->t, r, a->c, a->t, a->root, comm);
}
static void gather_in_place(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    if (me == a->root) MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, a->c, a->t, a->root, comm);
    else MPI_Gather(s, a->c, a->t, NULL, 0, MPI_DATATYPE_NULL, a->root, comm);
}
static void gatherv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int counts[64], displs[64];
    reversed(a->c, counts, displs);
    MPI_Gatherv(s, counts[me], a->t, r, counts, displs, a->t, a->root, comm);
}
static void scatter(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Scatter(s, a->c, a->t, r, a->c, a->t, a->root, comm);
}
static void scatterv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int counts[64], displs[64];
    reversed(a->c, counts, displs);
    MPI_Scatterv(s, counts, displs, a->t, r, counts[me], a->t, a->root, comm);
}

/* The neighbourhood collectives run on a distributed graph over the same
 * ranks (one for the device calls, one for the reference): each rank sends
 * to itself and to the next rank, and lists its in-neighbours in the other
 * order (itself last), so loom's blocks by rank must follow the lists. */
static MPI_Comm nbr_dev, nbr_ref;
static int nbr_in[2], nbr_out[2];
static MPI_Comm nbr_of(MPI_Comm comm) { return comm == dev_comm ? nbr_dev : nbr_ref; }

/* MPI_UNWEIGHTED out of the compiler's sight (Open MPI's points to an empty
 * object, which GCC takes for an array too short to pass). */
__attribute__((noinline)) static int *unweighted(void) { return MPI_UNWEIGHTED; }

static void make_neighbourhood(void)
{
    nbr_out[0] = (me + 1) % np, nbr_out[1] = me;
    nbr_in[0] = (me + np - 1) % np, nbr_in[1] = me;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, nbr_in, unweighted(), 2, nbr_out, unweighted(), MPI_INFO_NULL, 0,
                                   &nbr_dev);
    MPI_Comm_dup(nbr_dev, &nbr_ref);
}
static void neighbor_allgather(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Neighbor_allgather(s, a->c, a->t, r, a->c, a->t, nbr_of(comm));
}
static void neighbor_allgatherv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int rc[2], rd[2];
    for (int j = 0; j < 2; ++j) rc[j] = vcount(nbr_in[j], a->c), rd[j] = (1 - j) * a->c; /* reversed */
    MPI_Neighbor_allgatherv(s, vcount(me, a->c), a->t, r, rc, rd, a->t, nbr_of(comm));
}
static void neighbor_alltoall(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Neighbor_alltoall(s, a->c, a->t, r, a->c, a->t, nbr_of(comm));
}
static void ineighbor_alltoallv(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    int sc[2], sd[2], rc[2], rd[2];
    for (int j = 0; j < 2; ++j) {
        sc[j] = pair_count(me, nbr_out[j], a->c), sd[j] = j * a->c;
        rc[j] = pair_count(nbr_in[j], me, a->c), rd[j] = (1 - j) * a->c;
    }
    MPI_Request q;
    MPI_Ineighbor_alltoallv(s, sc, sd, a->t, r, rc, rd, a->t, nbr_of(comm), &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}
/* As alltoallw_types: block j as c of t or one run, the reference all alike. */
static void neighbor_alltoallw_types(MPI_Comm comm, char *s, char *r, const args_t *a, int same)
{
    int sc[2], rc[2];
    MPI_Aint sd[2], rd[2], lb, extent;
    MPI_Datatype st[2], rt[2];
    MPI_Type_get_extent(a->t, &lb, &extent);
    for (int j = 0; j < 2; ++j) {
        const int s_run = !same && (j + me) % 2, r_run = !same && j % 2;
        st[j] = s_run ? a->run : a->t, sc[j] = s_run ? 1 : a->c, sd[j] = (MPI_Aint)j * a->c * extent;
        rt[j] = r_run ? a->run : a->t, rc[j] = r_run ? 1 : a->c, rd[j] = (MPI_Aint)(1 - j) * a->c * extent;
    }
    MPI_Neighbor_alltoallw(s, sc, sd, st, r, rc, rd, rt, nbr_of(comm));
}
static void neighbor_alltoallw(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    neighbor_alltoallw_types(comm, s, r, a, 0);
}
static void neighbor_alltoallw_same(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    neighbor_alltoallw_types(comm, s, r, a, 1);
}
#if HAVE_PERSISTENT_COLLS
static void neighbor_alltoall_init(MPI_Comm comm, char *s, char *r, const args_t *a)
{
    MPI_Request q;
    MPI_Neighbor_alltoall_init(s, a->c, a->t, r, a->c, a->t, nbr_of(comm), MPI_INFO_NULL, &q);
    start_twice(&q);
}
#endif

static const struct {
    const char *name;
    coll_fn fn, ref; /* ref: the reference call where it is not fn */
} colls[] = {
    {"bcast", bcast, NULL},         {"ibcast", ibcast, NULL},       {"allgather", allgather, NULL},
    {"allgather in place", allgather_in_place, NULL},         {"allgatherv", allgatherv, NULL},
    {"alltoall", alltoall, NULL},   {"alltoall in place", alltoall_in_place, NULL},
    {"ialltoall", ialltoall, NULL}, {"alltoallv", alltoallv, NULL}, {"alltoallw", alltoallw, alltoallw_same},
    {"gather", gather, NULL},       {"gather in place", gather_in_place, NULL},
    {"gatherv", gatherv, NULL},     {"scatter", scatter, NULL},     {"scatterv", scatterv, NULL},
    {"neighbor_allgather", neighbor_allgather, NULL}, {"neighbor_allgatherv", neighbor_allgatherv, NULL},
    {"neighbor_alltoall", neighbor_alltoall, NULL},   {"ineighbor_alltoallv", ineighbor_alltoallv, NULL},
    {"neighbor_alltoallw", neighbor_alltoallw, neighbor_alltoallw_same},
#if HAVE_PERSISTENT_COLLS
    {"bcast_init", bcast_init, bcast}, {"alltoallw_init", alltoallw_init, alltoall},
    {"neighbor_alltoall_init", neighbor_alltoall_init, neighbor_alltoall},
#endif
};

/* One collective on host buffers (ref_comm) and on device copies of them
 * (dev_comm); every byte of both spans compared. */
static void one(const char *type_name, const char *coll, coll_fn fn, coll_fn ref, const args_t *a)
{
    span_t S = span_of(a->t, np * a->c), R = span_of(a->t, np * a->c);
    pattern(&S, 1 + me);
    pattern(&R, 101 + me);
    char *dS = dalloc(S.bytes), *dR = dalloc(R.bytes);
    cudaMemcpy(dS, S.mem, S.bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dR, R.mem, R.bytes, cudaMemcpyHostToDevice);
    ref(ref_comm, S.base, R.base, a);
    const int host_here = mixed && 1 == me;
    char *hS = NULL, *hR = NULL; /* rank 1's host buffers in the mixed round */
    if (host_here) {
        hS = malloc(S.bytes), hR = malloc(R.bytes);
        cudaMemcpy(hS, dS, S.bytes, cudaMemcpyDeviceToHost);
        cudaMemcpy(hR, dR, R.bytes, cudaMemcpyDeviceToHost);
        fn(dev_comm, hS + (S.base - S.mem), hR + (R.base - R.mem), a);
        cudaMemcpy(dS, hS, S.bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(dR, hR, R.bytes, cudaMemcpyHostToDevice);
        free(hS), free(hR);
    } else {
        fn(dev_comm, dS + (S.base - S.mem), dR + (R.base - R.mem), a);
    }
    const char *which = "receive";
    long bad = dt_first_diff(dR, R.mem, R.bytes);
    if (bad < 0 && (bad = dt_first_diff(dS, S.mem, S.bytes)) >= 0) which = "send";
    if (bad >= 0) {
        printf("FAIL rank %d%s: %s of %d x %s (root %d): %s buffer differs from Open MPI's at byte %ld of its span\n", me,
               mixed ? " (rank 1 on host buffers)" : "", coll, a->c, type_name, a->root, which, bad);
        ++failures;
    }
    ++calls;
    cudaFree(dS);
    cudaFree(dR);
    free(S.mem);
    free(R.mem);
}

static void each_coll(const char *name, MPI_Datatype t, size_t max_segs)
{
    (void)max_segs;
    MPI_Type_commit(&t);
    int size = 0;
    MPI_Type_size(t, &size);
    const int big = size > 0 ? (128 << 10) / size + 1 : 7; /* about 128 KiB a block */
    const int counts[] = {3, big};
    const int ncolls = (int)(sizeof(colls) / sizeof(colls[0]));
    for (int k = 0; k < 4; ++k) { /* counts 3 and big, then both with rank 1 on host buffers */
        args_t a = {t, MPI_DATATYPE_NULL, counts[k % 2], 0};
        mixed = k >= 2;
        MPI_Type_contiguous(a.c, t, &a.run);
        MPI_Type_commit(&a.run);
        for (int i = 0; i < ncolls; ++i) {
            a.root = (i + k) % np;
            one(name, colls[i].name, colls[i].fn, colls[i].ref ? colls[i].ref : colls[i].fn, &a);
        }
        MPI_Type_free(&a.run);
    }
    if (0 == me)
        printf("ok %-40s %d collectives at counts 3 and %d, all on device buffers and rank 1 on host buffers\n", name,
               ncolls, big);
    if (MPI_INT != t && MPI_DOUBLE_INT != t) MPI_Type_free(&t);
}

/* Best time of reps calls of fn, microseconds (the slowest rank's). */
static double timed(coll_fn fn, char *s, char *r, const args_t *a, int reps)
{
    double best = 1e30;
    for (int i = 0; i < reps + 2; ++i) {
        cudaDeviceSynchronize();
        MPI_Barrier(dev_comm);
        const double t0 = MPI_Wtime();
        fn(dev_comm, s, r, a);
        cudaDeviceSynchronize();
        double us = (MPI_Wtime() - t0) * 1e6;
        MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, dev_comm);
        if (i >= 2 && us < best) best = us;
    }
    return best;
}

/* `bytes` of complex floats as an FFT pencil's face: the first half of the
 * last dimension of an [x][y][512] array (runs of 2 KiB, 4 KiB apart), as
 * MPI_Type_create_subarray builds it; extent 2 x bytes. */
static MPI_Datatype subarray_face(size_t bytes)
{
    int xy = (int)(bytes / 2048), y = 256, t; /* y: gcd(xy, 256), so that x y = xy */
    for (int a = xy; a;) t = y % a, y = a, a = t;
    const int sizes[3] = {xy / y, y, 512}, sub[3] = {xy / y, y, 256}, starts[3] = {0, 0, 0};
    MPI_Datatype cf, face;
    MPI_Type_contiguous(2, MPI_FLOAT, &cf);
    MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, cf, &face);
    MPI_Type_commit(&face);
    MPI_Type_free(&cf);
    return face;
}

/* Blocks of 64 KiB to 64 MiB, each size factor times the one before. */
static void bench(size_t factor)
{
    if (0 == me) printf("bytes per rank and block, vector of 256 B blocks (stride 512 B) against MPI_BYTE:\n");
    MPI_Datatype vec;
    MPI_Type_vector(1, 64, 128, MPI_FLOAT, &vec); /* one 256-byte block, extent 256: resized to 512 */
    MPI_Datatype blk;
    MPI_Type_create_resized(vec, 0, 512, &blk);
    MPI_Type_commit(&blk);
    for (size_t bytes = 64 << 10; bytes <= (64u << 20); bytes *= factor) {
        const int n = (int)(bytes / 256);
        char *s = dalloc(2 * bytes * np), *r = dalloc(2 * bytes * np);
        args_t v = {blk, MPI_DATATYPE_NULL, n, 0}, c = {MPI_BYTE, MPI_DATATYPE_NULL, (int)bytes, 0};
        const double vb = timed(bcast, s, r, &v, 5), cb = timed(bcast, s, r, &c, 5);
        const double va = timed(alltoall, s, r, &v, 5), ca = timed(alltoall, s, r, &c, 5);
        const double vn = timed(neighbor_alltoall, s, r, &v, 5), cn = timed(neighbor_alltoall, s, r, &c, 5);
        const double as = timed(alltoall_send_typed, s, r, &v, 5), ar = timed(alltoall_recv_typed, s, r, &v, 5);
        /* Issue 46's item 4 shapes: MPI_Alltoallw with a type per block (the
         * vector, a subarray face) against the same bytes as MPI_BYTE, and the
         * face's broadcast against the contiguous one. */
        MPI_Datatype face = subarray_face(bytes);
        args_t f = {face, MPI_DATATYPE_NULL, 1, 0};
        const double wv = timed(alltoallw_same, s, r, &v, 5), wf = timed(alltoallw_same, s, r, &f, 5);
        const double wc = timed(alltoallw_same, s, r, &c, 5), bf = timed(bcast, s, r, &f, 5);
        MPI_Type_free(&face);
        if (0 == me) {
            printf("%9zu B: bcast %9.1f us (contiguous %8.1f: %3.0f%%)   alltoall %9.1f us (contiguous %8.1f: %3.0f%%)"
                   "   neighbor_alltoall %9.1f us (contiguous %8.1f: %3.0f%%)\n",
                   bytes, vb, cb, 100 * cb / vb, va, ca, 100 * ca / va, vn, cn, 100 * cn / vn);
            printf("%9zu B: alltoall with only the send side typed %9.1f us, only the receive side %9.1f us\n", bytes,
                   as, ar);
            printf("%9zu B: alltoallw of the vector %9.1f us, of a subarray face %9.1f us (contiguous %8.1f: %3.0f%%, "
                   "%3.0f%%)   bcast of the face %9.1f us (contiguous %8.1f: %3.0f%%)\n",
                   bytes, wv, wf, wc, 100 * wc / wv, 100 * wc / wf, bf, cb, 100 * cb / bf);
        }
        cudaFree(s);
        cudaFree(r);
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&blk);
}

int main(int argc, char **argv)
{
    if (!dt_coll_start(&argc, &argv)) return 77;
    make_neighbourhood();
    if (argc > 1 && 0 == strcmp(argv[1], "-b")) {
        const int factor = argc > 2 ? atoi(argv[2]) : 4;
        bench(factor >= 2 ? (size_t)factor : 4);
    } else {
        dt_each_type(each_coll);
        MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (0 == me) printf("%s: %d calls per rank, %d failure(s)\n", failures ? "FAIL" : "PASS", calls, failures);
    }
    MPI_Comm_free(&nbr_dev);
    MPI_Comm_free(&nbr_ref);
    MPI_Comm_free(&dev_comm);
    MPI_Comm_free(&ref_comm);
    MPI_Finalize();
    return failures ? 1 : 0;
}
