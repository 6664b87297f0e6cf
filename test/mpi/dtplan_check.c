/*
 * The datatype plans (coll_loom_dtplan.h) against MPI_Pack / MPI_Unpack on
 * host memory: for every constructor and nesting (holes, negative lower
 * bounds and displacements, resized extents, zero-size blocks), at counts
 * 1 and 3, the plan's CPU pack must give MPI_Pack's bytes and its unpack
 * must leave the buffer exactly as MPI_Unpack does (the holes untouched).
 * Plans must be compact where the layout is regular (a vector: one
 * segment). Mutations that must fail: a plan with one segment moved, or
 * one run short, must be caught by the same comparison.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_dtplan.h"

static int failures;

/* The buffer a type's count elements live in, with room around: base is
 * where the MPI buffer pointer goes. */
typedef struct {
    char *mem, *base;
    size_t bytes;
} span_t;

static span_t span_of(MPI_Datatype t, int count)
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

static void pattern(span_t *s, unsigned seed)
{
    for (size_t i = 0; i < s->bytes; ++i) s->mem[i] = (char)(seed * 131u + i * 7u + (i >> 8));
}

/* 0 when the plan packs and unpacks as MPI does; else the first differing
 * byte + 1 (pack) or -(byte + 1) (unpack). */
static long compare(const loom_dt_plan_t *plan, MPI_Datatype t, int count)
{
    const size_t bytes = plan->bytes * (size_t)count;
    int psize = 0;
    MPI_Pack_size(count, t, MPI_COMM_SELF, &psize);
    span_t s = span_of(t, count);
    pattern(&s, 1);
    char *want = malloc((size_t)psize + 1), *got = malloc(bytes + 1);
    int pos = 0;
    MPI_Pack(s.base, count, t, want, psize, &pos, MPI_COMM_SELF);
    long bad = 0;
    if ((size_t)pos != bytes) bad = 1;
    for (size_t i = 0; !bad && i < bytes; ++i) got[i] = (char)~want[i]; /* a byte the plan skips differs */
    mca_coll_loom_dt_pack_cpu(plan, (size_t)count, s.base, got);
    for (size_t i = 0; !bad && i < bytes; ++i)
        if (want[i] != got[i]) bad = (long)i + 1;
    if (!bad) { /* unpack the packed bytes into two equally patterned buffers */
        span_t a = span_of(t, count), b = span_of(t, count);
        pattern(&a, 2);
        pattern(&b, 2);
        for (int i = 0; i < pos; ++i) want[i] = (char)(want[i] ^ 0x5a); /* differ from what is there */
        int upos = 0;
        MPI_Unpack(want, psize, &upos, a.base, count, t, MPI_COMM_SELF);
        mca_coll_loom_dt_unpack_cpu(plan, (size_t)count, want, b.base);
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

/* One type at counts 1 and 3; max_segs: the plan of one element must have
 * at most this many segments (0: no bound). */
static void check(const char *name, MPI_Datatype t, size_t max_segs)
{
    MPI_Type_commit(&t);
    loom_dt_plan_t plan;
    int rc = mca_coll_loom_dt_plan((ompi_datatype_t *)t, &plan);
    if (MPI_SUCCESS != rc) {
        printf("FAIL %s: no plan (error %d)\n", name, rc);
        ++failures;
        return;
    }
    for (int count = 1; count <= 3; count += 2) {
        const long bad = compare(&plan, t, count);
        if (bad) {
            printf("FAIL %s x %d: %s differs from MPI's at byte %ld\n", name, count, bad > 0 ? "pack" : "unpack",
                   (bad > 0 ? bad : -bad) - 1);
            ++failures;
        }
        if (1 == count && max_segs && plan.nsegs > max_segs) {
            printf("FAIL %s: %zu segments, at most %zu expected\n", name, plan.nsegs, max_segs);
            ++failures;
        }
        if (1 == count) printf("ok %-34s %8zu bytes, %4zu segments\n", name, plan.bytes, plan.nsegs);
        /* Mutations the comparison must catch: one segment moved, one run short. */
        if (3 == count && plan.nsegs > 0 && plan.bytes > 0) {
            loom_dt_seg_t keep = plan.segs[0];
            plan.segs[0].offset += 1;
            if (!compare(&plan, t, count)) {
                printf("FAIL %s: a plan with its first segment moved by a byte passed\n", name);
                ++failures;
            }
            plan.segs[0] = keep;
            if (plan.segs[0].len > 1) {
                plan.segs[0].len -= 1;
                if (!compare(&plan, t, count)) {
                    printf("FAIL %s: a plan with its first run a byte short passed\n", name);
                    ++failures;
                }
                plan.segs[0] = keep;
            }
        }
    }
    mca_coll_loom_dt_plan_free(&plan);
    if (MPI_INT != t && MPI_DOUBLE_INT != t) MPI_Type_free(&t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Datatype t, u, v, w;

    check("int", MPI_INT, 1);
    check("double_int (a gap at the end)", MPI_DOUBLE_INT, 0);
    MPI_Type_contiguous(7, MPI_INT, &t);
    check("contiguous(7, int)", t, 1);
    MPI_Type_vector(1000, 64, 128, MPI_FLOAT, &t);
    check("vector(1000, 64, 128, float)", t, 1);
    MPI_Type_vector(5, 3, 7, MPI_DOUBLE, &t);
    check("vector(5, 3, 7, double)", t, 1);
    MPI_Type_vector(4, 0, 3, MPI_INT, &t);
    check("vector(4, 0, 3, int): zero-size", t, 0);
    MPI_Type_create_hvector(4, 2, -24, MPI_INT, &t);
    check("hvector(4, 2, -24 B, int)", t, 1);
    {
        const int bl[] = {1, 0, 3, 2}, dp[] = {5, 0, 9, -2};
        MPI_Type_indexed(4, bl, dp, MPI_INT, &t);
        check("indexed({1,0,3,2}, {5,0,9,-2}, int)", t, 0);
    }
    {
        const int bl[] = {2, 1, 4};
        const MPI_Aint dp[] = {3, -40, 17};
        MPI_Type_create_hindexed(3, bl, dp, MPI_SHORT, &t);
        check("hindexed({2,1,4}, {3,-40,17} B, short)", t, 0);
    }
    {
        const int dp[] = {0, 6, 3};
        MPI_Type_create_indexed_block(3, 2, dp, MPI_FLOAT, &t);
        check("indexed_block(3, 2, {0,6,3}, float)", t, 0);
    }
    {
        const int bl[] = {1, 2, 3};
        const MPI_Aint dp[] = {0, 8, 28};
        const MPI_Datatype ty[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Type_create_struct(3, bl, dp, ty, &u);
        MPI_Type_dup(u, &t);
        check("dup(struct{int; 2 double; 3 char})", t, 0);
        MPI_Type_vector(6, 2, 3, u, &t);
        check("vector(6, 2, 3, struct)", t, 0);
        MPI_Type_free(&u);
    }
    {
        const int sz[] = {8, 10}, sub[] = {3, 4}, st[] = {2, 5};
        MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
        check("subarray 8x10 [3x4 at 2,5], double", t, 1);
    }
    {
        const int sz[] = {6, 7, 8}, sub[] = {6, 7, 1}, st[] = {0, 0, 5};
        MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE_COMPLEX, &t);
        check("subarray 6x7x8 face [6x7x1], C", t, 1);
        const int sub2[] = {2, 3, 4}, st2[] = {1, 2, 3};
        MPI_Type_create_subarray(3, sz, sub2, st2, MPI_ORDER_FORTRAN, MPI_INT, &t);
        check("subarray 6x7x8 [2x3x4], Fortran", t, 12);
    }
    MPI_Type_vector(3, 2, 5, MPI_INT, &u);
    MPI_Type_create_resized(u, -16, 200, &t);
    check("resized(vector, lb -16, extent 200)", t, 0);
    MPI_Type_create_resized(u, -16, 200, &v);
    MPI_Type_create_hvector(3, 1, 400, v, &t);
    check("hvector(3, 1, 400 B, resized vector)", t, 0);
    {
        const int bl[] = {2, 1}, dp[] = {1, -3};
        MPI_Type_indexed(2, bl, dp, v, &t);
        check("indexed({2,1}, {1,-3}, resized vector)", t, 0);
    }
    {
        const int sz[] = {4, 4}, sub[] = {2, 2}, st[] = {1, 1};
        MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, u, &w);
        MPI_Type_create_hvector(2, 1, -4096, w, &t);
        check("hvector(2, 1, -4096 B, subarray of vector)", t, 0);
        MPI_Type_free(&w);
    }
    MPI_Type_free(&v);
    MPI_Type_free(&u);

    /* Plans kept with their types: the same plan twice, gone with the type,
     * and a new type at the old one's address gets its own. */
    for (int round = 0; round < 2; ++round) {
        const long before = mca_coll_loom_dt_plans_kept();
        MPI_Type_vector(3 + round, 2, 5 + 3 * round, MPI_INT, &t);
        MPI_Type_commit(&t);
        int rc1 = 0, rc2 = 0;
        const loom_dt_plan_t *p1 = mca_coll_loom_dt_plan_of((ompi_datatype_t *)t, &rc1);
        const loom_dt_plan_t *p2 = mca_coll_loom_dt_plan_of((ompi_datatype_t *)t, &rc2);
        if (NULL == p1 || p1 != p2 || mca_coll_loom_dt_plans_kept() != before + 1) {
            printf("FAIL kept plans: round %d: %p then %p (errors %d %d), %ld kept (%ld before)\n", round,
                   (const void *)p1, (const void *)p2, rc1, rc2, mca_coll_loom_dt_plans_kept(), before);
            ++failures;
        } else if (compare(p1, t, 2)) {
            printf("FAIL kept plans: round %d: the kept plan is not the type's\n", round);
            ++failures;
        }
        MPI_Type_dup(t, &u);
        const loom_dt_plan_t *pd = mca_coll_loom_dt_plan_of((ompi_datatype_t *)u, &rc1);
        if (NULL == pd || pd == p1) {
            printf("FAIL kept plans: a dup's plan is its original's (or none)\n");
            ++failures;
        }
        MPI_Type_free(&u);
        MPI_Type_free(&t);
        if (mca_coll_loom_dt_plans_kept() != before) {
            printf("FAIL kept plans: %ld kept after the types were freed, %ld before\n", mca_coll_loom_dt_plans_kept(),
                   before);
            ++failures;
        }
    }
    if (!failures) printf("ok kept plans: one per type, freed with it, a dup's its own\n");

    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
