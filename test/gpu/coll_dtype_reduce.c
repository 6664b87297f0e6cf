/*
 * Reductions over derived datatypes of one predefined type (MPI reduces
 * them element by element) on device buffers: allreduce (and in place),
 * iallreduce, reduce (and in place at the root), reduce_scatter_block,
 * reduce_scatter with ragged counts, scan and exscan, MPI_SUM, at a small
 * count and one of about 256 KiB. Vectors, indexed types, subarrays and
 * resized types go through loom's packing (coll_loom_dtgpu.h), a
 * contiguous one (contiguous(7, int)) as it is: its 7 ints per element
 * must all be reduced.
 *
 * The reference is independent of how any library reduces derived types:
 * each rank packs its elements (MPI_Pack), the packed predefined elements
 * are reduced on host buffers on a duplicate communicator loom never runs,
 * and the result is unpacked (MPI_Unpack) into a host copy of the output,
 * whose every byte, holes included, must equal the device result. Element
 * values are small integers, exact in every type and order of summation.
 *
 *   coll_dtype_reduce
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_coll_common.h"
#include "dt_types.h"

static int failures, calls;

typedef struct {
    const char *name;
    MPI_Datatype t, basic;
    int per; /* basic elements per element of t */
} rtype_t;

/* count elements of t in span s get values (seed, k) at their basic elements. */
static void fill(const rtype_t *r, span_t *s, int count, int seed)
{
    const int n = r->per * count;
    int bsize = 0;
    MPI_Type_size(r->basic, &bsize);
    char *vals = malloc((size_t)n * bsize + 1);
    for (int k = 0; k < n; ++k) {
        const int v = (seed * 7 + k * 3) % 97 - 40;
        if (MPI_INT == r->basic) ((int *)vals)[k] = v;
        else if (MPI_SHORT == r->basic) ((short *)vals)[k] = (short)v;
        else if (MPI_FLOAT == r->basic) ((float *)vals)[k] = (float)v;
        else ((double *)vals)[k] = v;
    }
    int pos = 0;
    MPI_Unpack(vals, n * bsize, &pos, s->base, count, r->t, MPI_COMM_SELF);
    free(vals);
}

/* The elements of count x t at `user`, packed as predefined ones (malloc'ed). */
static char *packed_of(const rtype_t *r, const void *user, int count)
{
    int size = 0, pos = 0;
    MPI_Pack_size(count, r->t, MPI_COMM_SELF, &size);
    char *p = malloc((size_t)size + 1);
    MPI_Pack(user, count, r->t, p, size, &pos, MPI_COMM_SELF);
    return p;
}

static void unpack_into(const rtype_t *r, const char *p, void *user, int count)
{
    int size = 0, pos = 0;
    MPI_Pack_size(count, r->t, MPI_COMM_SELF, &size);
    MPI_Unpack(p, size, &pos, user, count, r->t, MPI_COMM_SELF);
}

enum { ALLREDUCE, ALLREDUCE_IN_PLACE, IALLREDUCE, REDUCE, REDUCE_IN_PLACE, RSB, RS, SCAN, EXSCAN, NCOLLS };
static const char *const names[NCOLLS] = {"allreduce", "allreduce in place", "iallreduce", "reduce",
                                           "reduce in place", "reduce_scatter_block", "reduce_scatter (ragged)",
                                           "scan", "exscan"};

/* Rank q's block in the ragged reduce_scatter. */
static int rs_count(int q, int c) { return q % 2 ? c / 2 : c; }

/* The call on device buffers (s, r: where MPI's pointers go). */
static void on_device(int k, const rtype_t *rt, char *s, char *r, int c, int root)
{
    MPI_Datatype t = rt->t;
    int counts[64];
    for (int q = 0; q < np; ++q) counts[q] = rs_count(q, c);
    MPI_Request rq;
    switch (k) {
    case ALLREDUCE: MPI_Allreduce(s, r, c, t, MPI_SUM, dev_comm); break;
    case ALLREDUCE_IN_PLACE: MPI_Allreduce(MPI_IN_PLACE, r, c, t, MPI_SUM, dev_comm); break;
    case IALLREDUCE:
        MPI_Iallreduce(s, r, c, t, MPI_SUM, dev_comm, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        break;
    case REDUCE: MPI_Reduce(s, r, c, t, MPI_SUM, root, dev_comm); break;
    case REDUCE_IN_PLACE: MPI_Reduce(me == root ? MPI_IN_PLACE : s, r, c, t, MPI_SUM, root, dev_comm); break;
    case RSB: MPI_Reduce_scatter_block(s, r, c, t, MPI_SUM, dev_comm); break;
    case RS: MPI_Reduce_scatter(s, r, counts, t, MPI_SUM, dev_comm); break;
    case SCAN: MPI_Scan(s, r, c, t, MPI_SUM, dev_comm); break;
    case EXSCAN: MPI_Exscan(s, r, c, t, MPI_SUM, dev_comm); break;
    }
}

/* The same on packed predefined elements of host copies (S, R), unpacked into R. */
static void reference(int k, const rtype_t *rt, char *S, char *R, int c, int root)
{
    const int in_count = RSB == k ? c * np : RS == k ? 0 : c;
    int counts[64], total = 0;
    for (int q = 0; q < np; ++q) counts[q] = rs_count(q, c) * rt->per, total += rs_count(q, c);
    const int n_in = RS == k ? total : in_count;
    const int in_place = ALLREDUCE_IN_PLACE == k || (REDUCE_IN_PLACE == k && me == root);
    char *in = packed_of(rt, in_place ? R : S, n_in);
    const int out_count = RSB == k ? c : RS == k ? rs_count(me, c) : c;
    int bsize = 0;
    MPI_Type_size(rt->basic, &bsize);
    char *out = malloc((size_t)n_in * rt->per * bsize + 1);
    const int e = c * rt->per;
    switch (k) {
    case ALLREDUCE: case ALLREDUCE_IN_PLACE: case IALLREDUCE: MPI_Allreduce(in, out, e, rt->basic, MPI_SUM, ref_comm); break;
    case REDUCE: case REDUCE_IN_PLACE: MPI_Reduce(in, out, e, rt->basic, MPI_SUM, root, ref_comm); break;
    case RSB: MPI_Reduce_scatter_block(in, out, e, rt->basic, MPI_SUM, ref_comm); break;
    case RS: MPI_Reduce_scatter(in, out, counts, rt->basic, MPI_SUM, ref_comm); break;
    case SCAN: MPI_Scan(in, out, e, rt->basic, MPI_SUM, ref_comm); break;
    case EXSCAN: MPI_Exscan(in, out, e, rt->basic, MPI_SUM, ref_comm); break;
    }
    const int written = !((REDUCE == k || REDUCE_IN_PLACE == k) && me != root) && !(EXSCAN == k && me == 0);
    if (written) unpack_into(rt, out, R, out_count);
    free(in);
    free(out);
}

static void one(int k, const rtype_t *rt, int c, int root)
{
    const int elems = (RSB == k || RS == k) ? c * np : c;
    span_t S = span_of(rt->t, elems), R = span_of(rt->t, elems);
    pattern(&S, 1 + me);
    pattern(&R, 101 + me);
    fill(rt, &S, elems, me + 1);
    fill(rt, &R, elems, me + 50);
    char *dS = dalloc(S.bytes), *dR = dalloc(R.bytes);
    cudaMemcpy(dS, S.mem, S.bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dR, R.mem, R.bytes, cudaMemcpyHostToDevice);
    reference(k, rt, S.base, R.base, c, root);
    on_device(k, rt, dS + (S.base - S.mem), dR + (R.base - R.mem), c, root);
    const long bad = dt_first_diff(dR, R.mem, R.bytes);
    if (bad >= 0) {
        printf("FAIL rank %d: %s of %d x %s (root %d): the output differs from the packed reference at byte %ld of "
               "its span\n", me, names[k], c, rt->name, root, bad);
        ++failures;
    }
    ++calls;
    cudaFree(dS);
    cudaFree(dR);
    free(S.mem);
    free(R.mem);
}

int main(int argc, char **argv)
{
    if (!dt_coll_start(&argc, &argv)) return 77;
    rtype_t types[8];
    int nt = 0;
    MPI_Datatype t, u;
    MPI_Type_contiguous(7, MPI_INT, &t);
    types[nt++] = (rtype_t){"contiguous(7, int)", t, MPI_INT, 7};
    MPI_Type_vector(16, 64, 128, MPI_FLOAT, &t);
    types[nt++] = (rtype_t){"vector(16, 64, 128, float)", t, MPI_FLOAT, 1024};
    MPI_Type_vector(5, 3, 7, MPI_DOUBLE, &t);
    types[nt++] = (rtype_t){"vector(5, 3, 7, double)", t, MPI_DOUBLE, 15};
    MPI_Type_create_hvector(4, 2, -24, MPI_INT, &t);
    types[nt++] = (rtype_t){"hvector(4, 2, -24 B, int)", t, MPI_INT, 8};
    {
        const int bl[] = {1, 0, 3, 2}, dp[] = {5, 0, 9, -2};
        MPI_Type_indexed(4, bl, dp, MPI_INT, &t);
        types[nt++] = (rtype_t){"indexed({1,0,3,2}, {5,0,9,-2}, int)", t, MPI_INT, 6};
    }
    {
        const int bl[] = {2, 1, 4};
        const MPI_Aint dp[] = {4, -40, 18};
        MPI_Type_create_hindexed(3, bl, dp, MPI_SHORT, &t);
        types[nt++] = (rtype_t){"hindexed({2,1,4}, {4,-40,18} B, short)", t, MPI_SHORT, 7};
    }
    {
        const int sz[] = {6, 7, 8}, sub[] = {6, 7, 1}, st[] = {0, 0, 5};
        MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
        types[nt++] = (rtype_t){"subarray 6x7x8 face [6x7x1], double", t, MPI_DOUBLE, 42};
    }
    MPI_Type_vector(3, 2, 5, MPI_FLOAT, &u);
    MPI_Type_create_resized(u, -16, 200, &t);
    MPI_Type_free(&u);
    types[nt++] = (rtype_t){"resized(vector(3, 2, 5, float), lb -16, extent 200)", t, MPI_FLOAT, 6};
    for (int i = 0; i < nt; ++i) {
        MPI_Type_commit(&types[i].t);
        int bsize = 0, size = 0;
        MPI_Type_size(types[i].basic, &bsize);
        MPI_Type_size(types[i].t, &size);
        const int counts[] = {3, (256 << 10) / size + 1};
        for (int j = 0; j < 2; ++j)
            for (int k = 0; k < NCOLLS; ++k) one(k, &types[i], counts[j], (k + j) % np);
        if (0 == me) printf("ok %-52s %d reductions at counts 3 and %d\n", types[i].name, 2 * NCOLLS, counts[1]);
        MPI_Type_free(&types[i].t);
    }
    MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (0 == me) printf("%s: %d calls per rank, %d failure(s)\n", failures ? "FAIL" : "PASS", calls, failures);
    MPI_Comm_free(&dev_comm);
    MPI_Comm_free(&ref_comm);
    MPI_Finalize();
    return failures ? 1 : 0;
}
