/*
 * CPU check of coll_loom_pack.c, the packing a rank of a per-peer
 * collective does when its datatypes are not contiguous bytes (on GPU only
 * that path runs it): mca_coll_loom_byte_blocks' layout (contiguous types
 * keep the user's layout, rebased to the lowest block, negative
 * displacements included; others get back-to-back offsets),
 * mca_coll_loom_pack against MPI_Pack of each block, and
 * mca_coll_loom_unpack against MPI_Unpack: the blocks' data written, every
 * other byte (holes, gaps) as it was; and the after-work that unpacks at a
 * non-blocking call's completion, after the caller freed its type. All of
 * it for blocks of one type at listed displacements, for equal blocks at q
 * x stride (an allgather's or alltoall's, whose offsets may pass INT_MAX)
 * and for alltoallw's blocks of a type each at byte displacements. Host buffers; runs
 * with loom deselected (the component's code is linked in directly).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_pack.h"

/* The component's parameters, as the linked staging code reads them (all 0). */
mca_coll_loom_component_t mca_coll_loom_component;

enum { N = 4, ARENA = 4096, MID = 1024 };
static const int counts[N] = {3, 0, 5, 2};
static const int displs[N] = {10, 40, -6, 24}; /* elements (extents) from the buffer pointer, any order */

static const int equal[N] = {4, 4, 4, 4};

/* Checks b's layout, packing and unpacking, block by block against MPI:
 * contiguous: the user's layout kept, from the lowest block at want_lo
 * bytes to want_hi; else back-to-back offsets, mca_coll_loom_pack ==
 * MPI_Pack of each block with its type, and mca_coll_loom_unpack (and
 * mca_coll_loom_unpack_after, run as at completion once the caller freed
 * `freed`) == MPI_Unpack: the blocks' data written, every other byte
 * (holes, gaps) as it was. */
static long check_blocks(loom_typed_blocks_t b, unsigned char *arena, const char *name, int contiguous, long want_lo,
                         long want_hi, MPI_Datatype freed)
{
    const MPI_Datatype freed_was = freed;
    long bad = 0;
    unsigned char *packed = NULL, *want = malloc(ARENA), *got = malloc(ARENA);
    for (int i = 0; i < ARENA; ++i) arena[i] = (unsigned char)(i * 7 + 3);
    void *user = b.user;
    size_t bytes[N], at[N];
    void *base = NULL;
    bool is_packed = true;
    const size_t total = mca_coll_loom_byte_blocks(&b, bytes, at, &base, &is_packed);
    size_t sum = 0;
    long lo = 0, hi = 0;
    bool any = false;
    for (int q = 0; q < N; ++q) {
        int size = 0;
        if (b.counts[q] > 0) MPI_Type_size(mca_coll_loom_block_type(&b, q), &size);
        bad += bytes[q] != (b.counts[q] > 0 ? (size_t)b.counts[q] * (size_t)size : 0);
        sum += bytes[q];
        if (!bytes[q]) continue;
        const long d = (long)mca_coll_loom_block_offset(&b, q);
        if (!any || d < lo) lo = d;
        if (!any || d + (long)bytes[q] > hi) hi = d + (long)bytes[q];
        any = true;
    }
    if (is_packed != !contiguous) {
        fprintf(stderr, "pack_check %s: packed %d, want %d\n", name, is_packed, !contiguous);
        ++bad;
    }
    if (contiguous) {
        bad += lo != want_lo || hi != want_hi;
        bad += base != (char *)user + lo || total != (size_t)(hi - lo);
        for (int q = 0; q < N; ++q)
            if (bytes[q]) bad += at[q] != (size_t)((long)mca_coll_loom_block_offset(&b, q) - lo);
    } else { /* back to back in block order */
        size_t next = 0;
        for (int q = 0; q < N; ++q) bad += at[q] != next, next += bytes[q];
        bad += total != sum || base != NULL;
        /* pack == MPI_Pack of each block, in order */
        if (MPI_SUCCESS != mca_coll_loom_pack(&b, at, total, (char **)&packed)) ++bad;
        int pos = 0;
        for (int q = 0; q < N; ++q)
            if (b.counts[q] > 0)
                MPI_Pack((char *)user + mca_coll_loom_block_offset(&b, q), b.counts[q],
                         mca_coll_loom_block_type(&b, q), want, ARENA, &pos, MPI_COMM_SELF);
        if (packed && ((size_t)pos != total || memcmp(packed, want, total))) {
            fprintf(stderr, "pack_check %s: packed bytes differ from MPI_Pack\n", name);
            ++bad;
        }
        /* unpack == MPI_Unpack into the same arena: data in the blocks, the rest untouched */
        for (int after = 0; packed && after < 2; ++after) {
            for (size_t i = 0; i < total; ++i) packed[i] ^= 0x5a; /* new data, so a no-op unpack fails */
            memcpy(want, arena, ARENA);
            pos = 0;
            for (int q = 0; q < N; ++q)
                if (b.counts[q] > 0)
                    MPI_Unpack(packed, (int)total, &pos, want + MID + mca_coll_loom_block_offset(&b, q), b.counts[q],
                               mca_coll_loom_block_type(&b, q), MPI_COMM_SELF);
            if (!after && MPI_SUCCESS != mca_coll_loom_unpack(&b, at, (const char *)packed)) ++bad;
            if (after) { /* a copy, taken and freed by the after-work; the caller's type freed first */
                loom_gpu_call_t c;
                memset(&c, 0, sizeof(c));
                char *copy = malloc(total);
                memcpy(copy, packed, total);
                /* tables the caller reuses before completion (the module's serve the next call) */
                int cs[N], ds[N];
                size_t as[N];
                ompi_datatype_t *ts[N];
                loom_typed_blocks_t t = b;
                memcpy(cs, b.counts, sizeof(cs));
                memcpy(as, at, sizeof(as));
                if (b.displs) memcpy(ds, b.displs, sizeof(ds)), t.displs = ds;
                if (b.dts) memcpy(ts, b.dts, sizeof(ts)), t.dts = ts;
                t.counts = cs;
                int32_t refs[N]; /* the types' references before (`freed` goes meanwhile) */
                for (int q = 0; q < N; ++q)
                    refs[q] = b.counts[q] > 0 ? mca_coll_loom_block_type(&b, q)->super.super.obj_reference_count : 0;
                if (MPI_SUCCESS != mca_coll_loom_unpack_after(&c, &t, as, copy) || NULL == c.after) ++bad;
                memset(cs, 0, sizeof(cs)), memset(ds, 0, sizeof(ds)), memset(as, 0, sizeof(as));
                for (int q = 0; q < N; ++q) ts[q] = MPI_DATATYPE_NULL;
                if (MPI_DATATYPE_NULL != freed) MPI_Type_free(&freed);
                if (c.after && MPI_SUCCESS != c.after->run(c.after, true)) ++bad;
                for (int q = 0; q < N; ++q) /* as many released as retained */
                    if (b.counts[q] > 0 && mca_coll_loom_block_type(&b, q) != freed_was &&
                        mca_coll_loom_block_type(&b, q)->super.super.obj_reference_count != refs[q]) {
                        fprintf(stderr, "pack_check %s: block %d's type has %d references, had %d\n", name, q,
                                mca_coll_loom_block_type(&b, q)->super.super.obj_reference_count, refs[q]);
                        ++bad;
                    }
            }
            memcpy(got, arena, ARENA);
            for (int i = 0; i < ARENA; ++i)
                if (got[i] != want[i]) {
                    fprintf(stderr, "pack_check %s: after %s byte %d = %u, want %u\n", name,
                            after ? "unpack_after" : "unpack", i - MID, got[i], want[i]);
                    ++bad;
                    break;
                }
        }
    }
    if (MPI_DATATYPE_NULL != freed) MPI_Type_free(&freed); /* not freed by the after-work's check */
    if (bad) fprintf(stderr, "pack_check %s: %ld wrong\n", name, bad);
    free(packed);
    free(want);
    free(got);
    return bad;
}

/* One datatype: strided, the blocks are equal[] at q x 5 extents; else
 * counts[] at displs[]. */
static long check_type(MPI_Datatype dt, const char *name, int contiguous, int strided)
{
    unsigned char *arena = malloc(ARENA);
    loom_typed_blocks_t b = {.user = arena + MID, .dt = dt, .n = N, .counts = counts, .displs = displs};
    if (strided) b.displs = NULL, b.counts = equal, b.stride = 5;
    int size;
    MPI_Type_size(dt, &size);
    /* contiguous: the user's layout from the lowest block ([-6, 26) listed, [0, 19) strided, in elements) */
    const long bad = check_blocks(b, arena, name, contiguous, strided ? 0 : -6L * size, (strided ? 19L : 26L) * size,
                                  MPI_DATATYPE_NULL);
    free(arena);
    return bad;
}

/* alltoallw's blocks: each of its own type, at byte displacements (any
 * order, one negative, one not a multiple of its type's size); block 1 has
 * no elements and type `empty` (MPI_DATATYPE_NULL, or one not contiguous:
 * not read either way). `odd` goes to block 3, which the after-work reads
 * once the caller freed it (a duplicate of it here). */
static long check_w(MPI_Datatype odd, MPI_Datatype empty, const char *name, int contiguous)
{
    unsigned char *arena = malloc(ARENA);
    MPI_Datatype dup;
    MPI_Type_dup(odd, &dup);
    ompi_datatype_t *types[N] = {MPI_DOUBLE, empty, MPI_CHAR, dup};
    const int wcounts[N] = {2, 0, 7, 3};
    const int wdispls[N] = {40, 500, -13, 3}; /* bytes */
    loom_typed_blocks_t b = {.user = arena + MID, .dts = types, .n = N, .counts = wcounts, .displs = wdispls};
    int size;
    MPI_Type_size(odd, &size);
    /* contiguous: from the char block at -13 to the end of the doubles (56) or of block 3 */
    const long hi = 3 + 3L * size > 56 ? 3 + 3L * size : 56;
    const long bad = check_blocks(b, arena, name, contiguous, -13, hi, dup);
    free(arena);
    return bad;
}

/* Types whose packed bytes pass 64 KiB: Open MPI's ompi_datatype_sndrcv,
 * which this file once used, moves them in 64 KiB pieces and, for MPICH's
 * DTP type below (two runs of 32765 ints, an lb and extent of 1310600 bytes:
 * bcast's seed 106), stops after three pieces without an error, leaving the
 * rest of the packed copy as malloc left it (Open MPI 4.1.4 and 5.0.7; MPI_Pack
 * gets it right). One block of `count` elements at displacement 0, as a
 * broadcast packs it: pack == MPI_Pack, unpack == MPI_Unpack, every byte. */
static long check_large(MPI_Datatype dt, int count, const char *name)
{
    MPI_Aint lb, extent, tlb, textent;
    int size;
    MPI_Type_get_extent(dt, &lb, &extent);
    MPI_Type_get_true_extent(dt, &tlb, &textent);
    MPI_Type_size(dt, &size);
    const size_t span = (size_t)(tlb + (count - 1) * extent + textent), total = (size_t)size * (size_t)count;
    unsigned char *user = malloc(span), *want = malloc(total > span ? total : span), *got = malloc(span);
    for (size_t i = 0; i < span; ++i) user[i] = (unsigned char)(i * 131 + (i >> 16));
    const int zero = 0;
    loom_typed_blocks_t b = {.user = user, .dt = dt, .n = 1, .counts = &count, .displs = &zero};
    const size_t at = 0;
    char *packed = NULL;
    long bad = MPI_SUCCESS != mca_coll_loom_pack(&b, &at, total, &packed);
    int pos = 0;
    MPI_Pack(user, count, dt, want, (int)total, &pos, MPI_COMM_SELF);
    size_t first = total;
    for (size_t i = 0; packed && i < total; ++i)
        if (packed[i] != (char)want[i] && first == total) first = i;
    if (first < total) fprintf(stderr, "pack_check %s: packed byte %zu of %zu differs from MPI_Pack\n", name, first, total);
    bad += first < total;
    for (size_t i = 0; packed && i < total; ++i) packed[i] ^= 0x5a;
    memcpy(want, user, span);
    pos = 0;
    if (packed) MPI_Unpack(packed, (int)total, &pos, want, count, dt, MPI_COMM_SELF);
    if (packed && MPI_SUCCESS != mca_coll_loom_unpack(&b, &at, packed)) ++bad;
    memcpy(got, user, span);
    first = span;
    for (size_t i = 0; i < span; ++i)
        if (got[i] != want[i] && first == span) first = i;
    if (first < span) fprintf(stderr, "pack_check %s: after unpack byte %zu of %zu differs from MPI_Unpack\n", name, first, span);
    bad += first < span;
    free(packed);
    free(user);
    free(want);
    free(got);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Datatype strided, resized, gappy;
    MPI_Type_vector(2, 1, 2, MPI_INT, &strided); /* int, hole, int */
    MPI_Type_create_resized(MPI_INT, -4, 12, &resized); /* lb before the data, a hole after */
    int bl[2] = {1, 1};
    MPI_Aint dp[2] = {0, 8};
    MPI_Datatype ty[2] = {MPI_CHAR, MPI_DOUBLE};
    MPI_Type_create_struct(2, bl, dp, ty, &gappy); /* char, 7 bytes of hole, double */
    MPI_Type_commit(&strided);
    MPI_Type_commit(&resized);
    MPI_Type_commit(&gappy);
    long bad = 0;
    for (int s = 0; s < 2; ++s)
        bad += check_type(MPI_INT, "int", 1, s) + check_type(MPI_DOUBLE, "double", 1, s) +
               check_type(strided, "vector(2,1,2,int)", 0, s) + check_type(resized, "resized(int,-4,12)", 0, s) +
               check_type(gappy, "struct{char;double}", 0, s);
    for (int s = 0; s < 2; ++s) {
        MPI_Datatype empty = s ? strided : MPI_DATATYPE_NULL;
        bad += check_w(MPI_INT, empty, "w: double, -, char, int", 1) +
               check_w(MPI_SHORT, empty, "w: double, -, char, short", 1) +
               check_w(strided, empty, "w: double, -, char, vector(2,1,2,int)", 0) +
               check_w(resized, empty, "w: double, -, char, resized(int,-4,12)", 0) +
               check_w(gappy, empty, "w: double, -, char, struct{char;double}", 0);
    }
    MPI_Datatype run, one, dtp;
    MPI_Type_contiguous(32765, MPI_INT, &run);
    MPI_Type_vector(1, 1, 4, run, &one);
    MPI_Type_create_resized(one, 1310600, 1310600, &dtp); /* MPICH DTP: resized(vector(1,1,4, contig(32765 int))) */
    MPI_Type_commit(&dtp);
    bad += check_large(dtp, 2, "resized(vector(contig(32765 int)), lb 1310600), 2 of them");
    bad += check_large(strided, 100000, "vector(2,1,2,int), 100000 of them");
    MPI_Type_free(&dtp);
    MPI_Type_free(&one);
    MPI_Type_free(&run);
    double x = 1, y = 0; /* one collective: the harness checks how loom routed it */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("pack_check: 5 datatypes, listed and strided blocks; alltoallw blocks of 4 types; 2 types past 64 KiB; %ld wrong\n", bad);
    MPI_Type_free(&strided);
    MPI_Type_free(&resized);
    MPI_Type_free(&gappy);
    MPI_Finalize();
    return bad ? 1 : 0;
}
