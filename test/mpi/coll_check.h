/*
 * A correctness suite for every collective loom overrides, blocking and
 * non-blocking, against values computed on the host from first principles
 * (no second MPI implementation involved). The buffers the collectives see
 * come from a memory back-end: host malloc for the CPU tests, cudaMalloc for
 * the GPU tests. Receive buffers are pre-filled with a sentinel so that bytes
 * a collective must not touch (gaps, holes, other ranks' slots) are checked too.
 */
#ifndef COLL_CHECK_H
#define COLL_CHECK_H

#include <mpi.h>
#include <stddef.h>

typedef struct {
    const char *name;
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *host_src, size_t bytes);
    void (*download)(void *host_dst, const void *src, size_t bytes);
} check_memory_t;

extern const check_memory_t check_host_memory;

typedef struct {
    long checks;
    long failures;
} check_tally_t;

/* Runs the whole suite on comm for each element count; adds to tally. */
void check_collectives(MPI_Comm comm, const char *comm_name, const check_memory_t *mem, const size_t *counts,
                       int ncounts, check_tally_t *tally);

/* The communicators the suite runs on: world, a split, a dup, reversed ranks.
 * Calls check_collectives on each; returns the total failures over all ranks. */
long check_on_all_comms(const check_memory_t *mem, const size_t *counts, int ncounts, const char *prog);

/* The suite's intercommunicator part (coll_inter_check.c): the world's lower
 * and upper halves joined; every collective MPI defines there. Returns the
 * total failures over all ranks (0 checks with fewer than 2 ranks). */
long check_intercomm(const check_memory_t *mem, const size_t *counts, int ncounts, const char *prog);

/* The neighbourhood collectives (coll_neighbor_check.c) on the world as a
 * periodic 1-D Cartesian ring. Returns the total failures over all ranks. */
long check_neighbors(const check_memory_t *mem, const size_t *counts, int ncounts, const char *prog);

#endif
