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
#include "dt_types.h"

static int failures;

/* The plan's CPU executor (dt_exec_fn); a plan of other bytes than MPI
 * packs cannot run. */
static int run_cpu(void *plan_, int count, span_t *user, char *packed, size_t packed_bytes, int unpack)
{
    const loom_dt_plan_t *plan = plan_;
    if (packed_bytes != plan->bytes * (size_t)count) return 1;
    if (unpack) mca_coll_loom_dt_unpack_cpu(plan, (size_t)count, packed, user->base);
    else mca_coll_loom_dt_pack_cpu(plan, (size_t)count, user->base, packed);
    return 0;
}

static long compare(const loom_dt_plan_t *plan, MPI_Datatype t, int count)
{
    return dt_compare(t, count, run_cpu, (void *)plan);
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
    MPI_Datatype t, u;

    dt_each_type(check);

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
