/*
 * What the exchange tests (coll_exchange.c, coll_rooted.c) share: the byte
 * pattern of a block, datatypes as byte layouts, buffers in host or device
 * memory per rank (-m
 * device|host|mixed|kinds: mixed puts even ranks on host buffers; kinds
 * gives world rank r device memory of kind r % 3: cudaMalloc, a
 * cudaMallocAsync pool (not shareable with CUDA IPC), cudaMalloc at 3 bytes
 * into the allocation), the GPU choice, and the communicators every case
 * runs on. Buffers are allocated and freed per case, so addresses come back
 * as new allocations (what a cache of peers' buffers must notice).
 */
#ifndef LOOM_TEST_EXCHANGE_HARNESS_H
#define LOOM_TEST_EXCHANGE_HARNESS_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Byte j of the block world rank s sends world rank r. */
static uint8_t pattern(int s, int r, size_t j) { return (uint8_t)(s * 31 + r * 17 + j * 7 + 1); }

/* A datatype as this test sees it: size data bytes per element at offsets
 * at[0..size) inside an extent. */
typedef struct {
    MPI_Datatype t;
    size_t size, extent;
    size_t at[8];
} type_t;

/* Offset of data byte j of a block of t's elements laid out `extent` apart
 * (t's own, or a resized twin's), starting at byte disp. */
static inline size_t block_byte(const type_t *t, size_t extent, size_t disp, size_t j)
{
    return disp + (j / t->size) * extent + t->at[j % t->size];
}

/* Offset of data byte j of a block that starts at element `first`. */
static inline size_t byte_at(const type_t *t, size_t first, size_t j)
{
    return block_byte(t, t->extent, first * t->extent, j);
}

static int on_host;     /* this rank's buffers are in host memory */
static int device_kind; /* else: 0 cudaMalloc, 1 cudaMallocAsync pool, 2 cudaMalloc + 3 bytes */
enum { INTERIOR = 3 };
static void *alloc(size_t bytes)
{
    void *p = NULL;
    if (on_host) return malloc(bytes ? bytes : 1);
    if (device_kind == 1) {
        if (cudaMallocAsync(&p, bytes ? bytes : 1, 0) != cudaSuccess || cudaStreamSynchronize(0) != cudaSuccess)
            return NULL;
        return p;
    }
    if (device_kind == 2) return cudaMalloc(&p, bytes + INTERIOR) == cudaSuccess ? (char *)p + INTERIOR : NULL;
    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}
static void release(void *p)
{
    if (on_host) free(p);
    else if (device_kind == 1) cudaFreeAsync(p, 0), cudaStreamSynchronize(0);
    else if (device_kind == 2) cudaFree((char *)p - INTERIOR);
    else cudaFree(p);
}
static void put(void *dst, const void *src, size_t n)
{
    if (on_host) memcpy(dst, src, n);
    else cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
}
static void take(void *dst, const void *src, size_t n)
{
    if (on_host) memcpy(dst, src, n);
    else cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost);
}

/* After MPI_Init: reads -m, sets on_host, picks the GPU by local rank.
 * Returns the mode, or NULL when this rank needs a GPU and sees none (the
 * caller finalizes and exits 77). */
static const char *harness_start(int argc, char **argv, const char *name)
{
    const char *mode = "device";
    for (int a = 1; a + 1 < argc; a += 2)
        if (!strcmp(argv[a], "-m")) mode = argv[a + 1];
    int wr, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    on_host = !strcmp(mode, "host") || (!strcmp(mode, "mixed") && wr % 2 == 0);
    device_kind = !strcmp(mode, "kinds") ? wr % 3 : 0;
    if (strcmp(mode, "host")) {
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || !ndev) {
            if (!wr) fprintf(stderr, "%s: no GPU here (-m host runs without)\n", name);
            return NULL;
        }
        cudaSetDevice((lr ? atoi(lr) : wr) % ndev);
    }
    return mode;
}

/* The test's datatypes: char, int, double, 3 shorts (contiguous), and a
 * pair of ints laid out differently per rank (contiguous on even world
 * ranks, strided with a hole on odd ones: same type signature). */
enum { HARNESS_TYPES = 5 };
static void harness_types(type_t types[HARNESS_TYPES])
{
    int wr;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Datatype three_shorts, pair;
    MPI_Type_contiguous(3, MPI_SHORT, &three_shorts);
    if (wr % 2) MPI_Type_vector(2, 1, 2, MPI_INT, &pair); /* int, hole, int: extent 12 */
    else MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&three_shorts);
    MPI_Type_commit(&pair);
    const type_t all[HARNESS_TYPES] = {{MPI_CHAR, 1, 1, {0}},
                                       {MPI_INT, 4, 4, {0, 1, 2, 3}},
                                       {MPI_DOUBLE, 8, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
                                       {three_shorts, 6, 6, {0, 1, 2, 3, 4, 5}},
                                       {pair, 8, wr % 2 ? 12 : 8, {0, 1, 2, 3, 4, 5, 6, 7}}};
    memcpy(types, all, sizeof(all));
    if (wr % 2) {
        const size_t strided[8] = {0, 1, 2, 3, 8, 9, 10, 11};
        memcpy(types[4].at, strided, sizeof(strided));
    }
}
static void harness_free_types(type_t types[HARNESS_TYPES])
{
    MPI_Type_free(&types[3].t);
    MPI_Type_free(&types[4].t);
}

/* world twice (dup), reversed, and an odd-sized split where the world is even. */
enum { HARNESS_COMMS = 4 };
static void harness_comms(MPI_Comm comms[HARNESS_COMMS])
{
    int wr, wn;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wn - wr, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, wr < wn - 1 || wn == 1 ? 0 : 1, wr, &comms[3]);
}

#endif
