/*
 * Datatypes for the datatype tests (test/mpi/dtplan_check, test/gpu/dt_pack):
 * every constructor and nesting, with holes, negative lower bounds and
 * displacements, resized extents and zero-size blocks. dt_each_type hands
 * each to visit, which commits it and frees it (unless it is predefined),
 * with the most segments one element's plan may have (0: no bound).
 */
#ifndef LOOM_TEST_DT_TYPES_H
#define LOOM_TEST_DT_TYPES_H

#include <mpi.h>
#include <stdlib.h>

/* The buffer a type's count elements live in, with room around: base is
 * where the MPI buffer pointer goes. */
typedef struct {
    char *mem, *base;
    size_t bytes;
} span_t;

static inline span_t span_of(MPI_Datatype t, int count)
{
    MPI_Aint lb, extent, tlb, textent;
    MPI_Type_get_extent(t, &lb, &extent);
    MPI_Type_get_true_extent(t, &tlb, &textent);
    MPI_Aint lo = tlb, hi = tlb + textent;
    if (count > 1) { /* elements at k x extent (extent may be negative only in theory) */
        const MPI_Aint last = (MPI_Aint)(count - 1) * extent;
        if (tlb + last < lo) lo = tlb + last;
        if (tlb + textent + last > hi) hi = tlb + textent + last;
    }
    span_t s;
    s.bytes = (size_t)(hi - lo) + 128;
    s.mem = malloc(s.bytes);
    s.base = s.mem + 64 - lo;
    return s;
}

static inline void pattern(span_t *s, unsigned seed)
{
    for (size_t i = 0; i < s->bytes; ++i) s->mem[i] = (char)(seed * 131u + i * 7u + (i >> 8));
}

/* Runs a plan's copy of count elements on host memory, as the caller's
 * executor does it: pack (unpack 0) from user's span into packed, or
 * unpack into it; nonzero when it could not run. */
typedef int (*dt_exec_fn)(void *ctx, int count, span_t *user, char *packed, size_t packed_bytes, int unpack);

/* 0 when exec packs and unpacks count elements of t as MPI does; else the
 * first differing byte + 1 (pack) or -(byte + 1) (unpack). Every byte exec
 * should write starts out different from what it should write, and the
 * unpack's holes must keep what was there. */
static inline long dt_compare(MPI_Datatype t, int count, dt_exec_fn exec, void *ctx)
{
    int psize = 0;
    MPI_Pack_size(count, t, MPI_COMM_SELF, &psize);
    span_t s = span_of(t, count);
    pattern(&s, 1);
    char *want = (char *)malloc((size_t)psize + 1), *got = (char *)malloc((size_t)psize + 1);
    int pos = 0;
    MPI_Pack(s.base, count, t, want, psize, &pos, MPI_COMM_SELF);
    for (int i = 0; i < pos; ++i) got[i] = (char)~want[i];
    long bad = exec(ctx, count, &s, got, (size_t)pos, 0) ? 1 : 0;
    for (int i = 0; !bad && i < pos; ++i)
        if (want[i] != got[i]) bad = i + 1;
    if (!bad) { /* unpack changed bytes into two equally patterned buffers */
        span_t a = span_of(t, count), b = span_of(t, count);
        pattern(&a, 2);
        pattern(&b, 2);
        for (int i = 0; i < pos; ++i) want[i] = (char)(want[i] ^ 0x5a);
        int upos = 0;
        MPI_Unpack(want, psize, &upos, a.base, count, t, MPI_COMM_SELF);
        bad = exec(ctx, count, &b, want, (size_t)pos, 1) ? -1 : 0;
        for (size_t i = 0; !bad && i < a.bytes; ++i)
            if (a.mem[i] != b.mem[i]) bad = -(long)i - 1;
        free(a.mem);
        free(b.mem);
    }
    free(want);
    free(got);
    free(s.mem);
    return bad;
}

typedef void (*dt_visit_fn)(const char *name, MPI_Datatype t, size_t max_segs);

static inline void dt_each_type(dt_visit_fn visit)
{
    MPI_Datatype t, u, v, w;
    visit("int", MPI_INT, 1);
    visit("double_int (a gap at the end)", MPI_DOUBLE_INT, 0);
    MPI_Type_contiguous(7, MPI_INT, &t);
    visit("contiguous(7, int)", t, 1);
    MPI_Type_vector(1000, 64, 128, MPI_FLOAT, &t);
    visit("vector(1000, 64, 128, float)", t, 1);
    MPI_Type_vector(5, 3, 7, MPI_DOUBLE, &t);
    visit("vector(5, 3, 7, double)", t, 1);
    /* elements that go on into one another (loom packs count of them as one) */
    MPI_Type_vector(1, 64, 128, MPI_FLOAT, &u);
    MPI_Type_create_resized(u, 0, 512, &t);
    visit("resized(256 B block, extent 512)", t, 1);
    MPI_Type_free(&u);
    MPI_Type_vector(4, 2, 3, MPI_INT, &u);
    MPI_Type_create_resized(u, 0, 48, &t);
    visit("resized(vector(4, 2, 3, int), extent 48)", t, 1);
    MPI_Type_free(&u);
    MPI_Type_vector(4, 0, 3, MPI_INT, &t);
    visit("vector(4, 0, 3, int): zero-size", t, 0);
    MPI_Type_create_hvector(4, 2, -24, MPI_INT, &t);
    visit("hvector(4, 2, -24 B, int)", t, 1);
    {
        const int bl[] = {1, 0, 3, 2}, dp[] = {5, 0, 9, -2};
        MPI_Type_indexed(4, bl, dp, MPI_INT, &t);
        visit("indexed({1,0,3,2}, {5,0,9,-2}, int)", t, 0);
    }
    {
        const int bl[] = {2, 1, 4};
        const MPI_Aint dp[] = {3, -40, 17};
        MPI_Type_create_hindexed(3, bl, dp, MPI_SHORT, &t);
        visit("hindexed({2,1,4}, {3,-40,17} B, short)", t, 0);
    }
    {
        const int dp[] = {0, 6, 3};
        MPI_Type_create_indexed_block(3, 2, dp, MPI_FLOAT, &t);
        visit("indexed_block(3, 2, {0,6,3}, float)", t, 0);
    }
    {
        const int bl[] = {1, 2, 3};
        const MPI_Aint dp[] = {0, 8, 28};
        const MPI_Datatype ty[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Type_create_struct(3, bl, dp, ty, &u);
        MPI_Type_dup(u, &t);
        visit("dup(struct{int; 2 double; 3 char})", t, 0);
        MPI_Type_vector(6, 2, 3, u, &t);
        visit("vector(6, 2, 3, struct)", t, 0);
        MPI_Type_free(&u);
    }
    {
        const int sz[] = {8, 10}, sub[] = {3, 4}, st[] = {2, 5};
        MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
        visit("subarray 8x10 [3x4 at 2,5], double", t, 1);
    }
    {
        const int sz[] = {6, 7, 8}, sub[] = {6, 7, 1}, st[] = {0, 0, 5};
        MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE_COMPLEX, &t);
        visit("subarray 6x7x8 face [6x7x1], C", t, 1);
        const int sub2[] = {2, 3, 4}, st2[] = {1, 2, 3};
        MPI_Type_create_subarray(3, sz, sub2, st2, MPI_ORDER_FORTRAN, MPI_INT, &t);
        visit("subarray 6x7x8 [2x3x4], Fortran", t, 12);
    }
    MPI_Type_vector(3, 2, 5, MPI_INT, &u);
    MPI_Type_create_resized(u, -16, 200, &t);
    visit("resized(vector, lb -16, extent 200)", t, 0);
    MPI_Type_create_resized(u, -16, 200, &v);
    MPI_Type_create_hvector(3, 1, 400, v, &t);
    visit("hvector(3, 1, 400 B, resized vector)", t, 0);
    {
        const int bl[] = {2, 1}, dp[] = {1, -3};
        MPI_Type_indexed(2, bl, dp, v, &t);
        visit("indexed({2,1}, {1,-3}, resized vector)", t, 0);
    }
    {
        const int sz[] = {4, 4}, sub[] = {2, 2}, st[] = {1, 1};
        MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, u, &w);
        MPI_Type_create_hvector(2, 1, -4096, w, &t);
        visit("hvector(2, 1, -4096 B, subarray of vector)", t, 0);
        MPI_Type_free(&w);
    }
    MPI_Type_free(&v);
    MPI_Type_free(&u);
}

#endif
