/*
 * MPI_Bcast of MPI_INT on device buffers over the communicators MPICH's test
 * harness walks (MTestGetIntracommGeneral), in its order, each freed before
 * the next is made: world, a dup, world reversed by split, the low half by
 * split, self, a dup made by MPI_Intercomm_merge, the even ranks by
 * MPI_Comm_create_group (the odd ranks skip it and go on to the next, a
 * collective over world), the high half by MPI_Comm_create. Counts around
 * the one-shot slots and 256 KiB (MPICH's coll/bcast failed here at 65530
 * ints, from element 49152 on, on the even ranks' communicator, 3 ranks
 * sharing an H100), every root, two calls each, the buffer at an offset
 * that changes per call; every element and a guard on each side checked.
 * Then on world, one rank at a time holds the ints as MPICH's DTP type that
 * loom packs while the others pass MPI_INT, every root.
 *
 *   bcast_comms [-m host] [ROUNDS]   (default 2; -m host: host buffers, which
 *                                    loom delegates: checks the harness on a CPU)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

#define NCOMMS 8
static const char *const kNames[NCOMMS] = {"world", "dup", "reversed", "low half", "self", "merged",
                                           "evens (create_group)", "high half (create)"};

/* Communicator k of the walk, or MPI_COMM_NULL where this rank is not in it. */
static MPI_Comm make_comm(int k, int wr, int wn)
{
    MPI_Comm c = MPI_COMM_NULL, local, inter;
    MPI_Group world, g;
    switch (k) {
    case 0: MPI_Comm_dup(MPI_COMM_WORLD, &c); break; /* world itself, through a dup we may free */
    case 1: MPI_Comm_dup(MPI_COMM_WORLD, &c); break;
    case 2: MPI_Comm_split(MPI_COMM_WORLD, 0, wn - wr, &c); break;
    case 3: MPI_Comm_split(MPI_COMM_WORLD, wr < wn / 2 ? 1 : MPI_UNDEFINED, wr, &c); break;
    case 4: MPI_Comm_dup(MPI_COMM_SELF, &c); break;
    case 5:
        MPI_Comm_split(MPI_COMM_WORLD, wr < wn / 2, wr, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, wr < wn / 2 ? wn / 2 : 0, 99, &inter);
        MPI_Intercomm_merge(inter, wr < wn / 2, &c);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
        break;
    case 6: {
        int excl[64], n = 0;
        for (int q = 1; q < wn && n < 64; q += 2) excl[n++] = q;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_excl(world, n, excl, &g);
        if (wr % 2 == 0) MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &c);
        MPI_Group_free(&g);
        MPI_Group_free(&world);
        break;
    }
    case 7: {
        int range[1][3] = {{wn / 2, wn - 1, 1}};
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_range_incl(world, 1, range, &g);
        MPI_Comm_create(MPI_COMM_WORLD, g, &c);
        MPI_Group_free(&g);
        MPI_Group_free(&world);
        break;
    }
    }
    return c;
}

/* Ranks whose datatypes differ (MPI asks only that the signatures match):
 * one rank at a time holds 65530 ints as MPICH's DTP type of seed 106 (two
 * runs of 32765 ints 1310600 bytes apart, lb 1310600: loom packs it), the
 * others as plain MPI_INT; every root. That root's packed copy once lost
 * everything past 192 KiB. Returns the wrong elements (and errors) this
 * rank saw; *calls counts the broadcasts. */
static long mixed_types(int on_host, long *calls, char *first, size_t first_len)
{
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Datatype run, one, dtp;
    MPI_Type_contiguous(32765, MPI_INT, &run);
    MPI_Type_vector(1, 1, 4, run, &one);
    MPI_Type_create_resized(one, 1310600, 1310600, &dtp);
    MPI_Type_commit(&dtp);
    const size_t bytes = 1310600 + 131060, ints = bytes / 4;
    int *host = malloc(bytes), *dev = on_host ? malloc(bytes) : dalloc(bytes);
    long bad = 0;
    for (int odd = 0; odd < n; ++odd)
        for (int root = 0; root < n; ++root, ++*calls) {
            const int mine = me == odd, sentinel = -7, tag = 1000 * odd + root;
            /* element i of the 65530 sits at i (plain) or, typed, at i for
             * the first run and 327650 + (i - 32765) for the second */
            for (size_t i = 0; i < ints; ++i) host[i] = sentinel;
            for (int i = 0; i < 65530 && me == root; ++i) host[mine && i >= 32765 ? 327650 + i - 32765 : i] = i + tag;
            if (on_host) memcpy(dev, host, bytes);
            else cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
            const int rc = MPI_Bcast(dev, mine ? 2 : 65530, mine ? dtp : MPI_INT, root, MPI_COMM_WORLD);
            if (on_host) memcpy(host, dev, bytes);
            else cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
            long wrong = rc != MPI_SUCCESS;
            int at = -1;
            for (size_t i = 0; i < ints; ++i) {
                const long e = !mine ? (i < 65530 ? (long)i : -1)
                             : i < 32765 ? (long)i : i >= 327650 && i < 327650 + 32765 ? (long)(i - 327650 + 32765) : -1;
                const int want = e < 0 ? sentinel : (int)e + tag;
                if (host[i] != want) {
                    if (at < 0) at = (int)i;
                    ++wrong;
                }
            }
            if (wrong && !first[0])
                snprintf(first, first_len, "mixed types (rank %d typed), root %d: rc %d, int %d is %d", odd, root, rc, at,
                         at >= 0 ? host[at] : 0);
            bad += wrong;
        }
    MPI_Type_free(&dtp);
    MPI_Type_free(&one);
    MPI_Type_free(&run);
    if (on_host) free(dev);
    else cudaFree(dev);
    free(host);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wr, wn;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    const int on_host = argc > 2 && !strcmp(argv[1], "-m") && !strcmp(argv[2], "host");
    if (on_host) argc -= 2, argv += 2;
    if (!on_host && !use_gpu_or_finalize(wr)) return 77;
    const int rounds = argc > 1 ? atoi(argv[1]) : 2;
    const int counts[] = {1, 17, 50, 100, 512, 16383, 65530, 65539, 262143};
    const int ncounts = sizeof(counts) / sizeof(counts[0]), guard = 64, kSentinel = -1234567;
    const size_t cap = (size_t)262143 + 8 + 2 * guard;
    int *host = malloc(cap * sizeof(int)), *dev = on_host ? malloc(cap * sizeof(int)) : dalloc(cap * sizeof(int));
    long bad = 0, calls = 0;
    char first[160] = "";
    for (int k = 0; k < NCOMMS; ++k) {
        MPI_Comm c = make_comm(k, wr, wn);
        if (c == MPI_COMM_NULL) continue;
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        int me, n;
        MPI_Comm_rank(c, &me);
        MPI_Comm_size(c, &n);
        for (int b = 0; b < ncounts; ++b)
            for (int root = 0; root < n; ++root)
                for (int r = 0; r < rounds; ++r, ++calls) {
                    const int count = counts[b], off = guard + (r + root + b) % 8, tag = k * 1000 + b * 10 + r;
                    for (size_t i = 0; i < cap; ++i) host[i] = kSentinel;
                    if (me == root)
                        for (int i = 0; i < count; ++i) host[off + i] = i + tag;
                    if (on_host) memcpy(dev, host, cap * sizeof(int));
                    else cudaMemcpy(dev, host, cap * sizeof(int), cudaMemcpyHostToDevice);
                    const int rc = MPI_Bcast(dev + off, count, MPI_INT, root, c);
                    if (on_host) memcpy(host, dev, cap * sizeof(int));
                    else cudaMemcpy(host, dev, cap * sizeof(int), cudaMemcpyDeviceToHost);
                    long wrong = rc != MPI_SUCCESS;
                    int at = -1;
                    for (int i = 0; i < (int)cap; ++i) {
                        const int want = i >= off && i < off + count ? i - off + tag : kSentinel;
                        if (host[i] != want) {
                            if (at < 0) at = i;
                            ++wrong;
                        }
                    }
                    if (wrong && !first[0])
                        snprintf(first, sizeof(first), "%s, root %d, %d ints, call %d: rc %d, element %d is %d",
                                 kNames[k], root, count, r, rc, at - off, at >= 0 ? host[at] : 0);
                    bad += wrong;
                }
        MPI_Comm_free(&c);
    }
    bad += mixed_types(on_host, &calls, first, sizeof(first));
    long totals[2] = {calls, bad};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (bad) printf("bcast_comms: rank %d: first wrong: %s\n", wr, first);
    if (wr == 0)
        printf("bcast_comms: %d ranks, %d communicators: %ld broadcasts (summed over ranks), %ld wrong elements or "
               "errors\n", wn, NCOMMS, totals[0], totals[1]);
    if (on_host) free(dev);
    else cudaFree(dev);
    free(host);
    MPI_Finalize();
    return totals[1] ? 1 : 0;
}
