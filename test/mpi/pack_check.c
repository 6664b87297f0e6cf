/*
 * CPU check of coll_loom_pack.c, the packing a rooted collective's rank does
 * when its datatype is not contiguous bytes (on GPU only that path runs it):
 * mca_coll_loom_byte_blocks' layout (contiguous types keep the user's layout,
 * rebased to the lowest block, negative displacements included; others get
 * back-to-back offsets), mca_coll_loom_pack against MPI_Pack of each block,
 * and mca_coll_loom_unpack against MPI_Unpack: the blocks' data written,
 * every other byte (holes, gaps) as it was; for blocks at listed
 * displacements and for equal blocks at q x stride (an allgather's or
 * alltoall's, whose offsets may pass INT_MAX). Host buffers; runs with loom
 * deselected (the component's code is linked in directly).
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

/* strided: the blocks are equal[] at q x 5 extents; else counts[] at displs[]. */
static long check_type(MPI_Datatype dt, const char *name, int contiguous, int strided)
{
    long bad = 0;
    unsigned char *arena = malloc(ARENA), *packed = NULL, *want = malloc(ARENA), *got = malloc(ARENA);
    for (int i = 0; i < ARENA; ++i) arena[i] = (unsigned char)(i * 7 + 3);
    void *user = arena + MID;
    loom_typed_blocks_t b = {.user = user, .dt = dt, .n = N, .counts = counts, .displs = displs};
    if (strided) b.displs = NULL, b.counts = equal, b.stride = 5;
    size_t bytes[N], at[N];
    void *base = NULL;
    bool is_packed = true;
    const size_t total = mca_coll_loom_byte_blocks(&b, bytes, at, &base, &is_packed);
    int size;
    MPI_Aint lb, extent;
    MPI_Type_size(dt, &size);
    MPI_Type_get_extent(dt, &lb, &extent);
    size_t sum = 0;
    long lo = 0, hi = 0;
    for (int q = 0; q < N; ++q) {
        bad += bytes[q] != (size_t)b.counts[q] * (size_t)size;
        sum += bytes[q];
        const long d = (long)mca_coll_loom_block_displ(&b, q);
        if (b.counts[q] && (d < lo || q == 0)) lo = d;
        if (b.counts[q] && (d + b.counts[q] > hi || q == 0)) hi = d + b.counts[q];
    }
    if (is_packed != !contiguous) {
        fprintf(stderr, "pack_check %s: packed %d, want %d\n", name, is_packed, !contiguous);
        ++bad;
    }
    if (contiguous) { /* the user's layout from the lowest block ([-6, 26) listed, [0, 19) strided) */
        bad += lo != (strided ? 0 : -6) || hi != (strided ? 19 : 26);
        bad += base != (char *)user + lo * size || total != (size_t)(hi - lo) * (size_t)size;
        for (int q = 0; q < N; ++q)
            if (b.counts[q]) bad += at[q] != (size_t)((long)mca_coll_loom_block_displ(&b, q) - lo) * (size_t)size;
    } else { /* back to back in block order */
        size_t next = 0;
        for (int q = 0; q < N; ++q) bad += at[q] != next, next += bytes[q];
        bad += total != sum || base != NULL;
        /* pack == MPI_Pack of each block, in order */
        if (MPI_SUCCESS != mca_coll_loom_pack(&b, at, total, (char **)&packed)) ++bad;
        int pos = 0;
        for (int q = 0; q < N; ++q)
            MPI_Pack((char *)user + mca_coll_loom_block_displ(&b, q) * extent, b.counts[q], dt, want, ARENA, &pos,
                     MPI_COMM_SELF);
        if (packed && ((size_t)pos != total || memcmp(packed, want, total))) {
            fprintf(stderr, "pack_check %s: packed bytes differ from MPI_Pack\n", name);
            ++bad;
        }
        /* unpack == MPI_Unpack into the same arena: data in the blocks, the rest untouched */
        if (packed) {
            for (size_t i = 0; i < total; ++i) packed[i] ^= 0x5a; /* new data, so a no-op unpack fails */
            memcpy(want, arena, ARENA);
            pos = 0;
            for (int q = 0; q < N; ++q)
                MPI_Unpack(packed, (int)total, &pos, want + MID + mca_coll_loom_block_displ(&b, q) * extent,
                           b.counts[q], dt, MPI_COMM_SELF);
            if (MPI_SUCCESS != mca_coll_loom_unpack(&b, at, (const char *)packed)) ++bad;
            memcpy(got, arena, ARENA);
            for (int i = 0; i < ARENA; ++i)
                if (got[i] != want[i]) {
                    fprintf(stderr, "pack_check %s: after unpack byte %d = %u, want %u\n", name, i - MID, got[i], want[i]);
                    ++bad;
                    break;
                }
        }
    }
    if (bad) fprintf(stderr, "pack_check %s: %ld wrong\n", name, bad);
    free(packed);
    free(arena);
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
    double x = 1, y = 0; /* one collective: the harness checks how loom routed it */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("pack_check: 5 datatypes, listed and strided blocks, %ld wrong\n", bad);
    MPI_Type_free(&strided);
    MPI_Type_free(&resized);
    MPI_Type_free(&gappy);
    MPI_Finalize();
    return bad ? 1 : 0;
}
