/*
 * A communicator's neighbourhood (Cartesian, graph or distributed graph
 * topology) as loom's exchange sees it. The exchange moves one block per
 * pair of ranks of the communicator, whose bytes both ends know; a
 * neighbourhood collective moves a block per in/out neighbour. They map one
 * to one where no rank is listed twice in either list: out-neighbour j's
 * send block becomes the block to its rank, in-neighbour j's receive block
 * the block from its rank, every other rank's block is empty, and
 * MPI_PROC_NULL neighbours (a non-periodic Cartesian edge) move nothing.
 * Both ends of a pair agree on its bytes because MPI requires a consistent
 * topology: q is p's out-neighbour exactly where p is q's in-neighbour.
 *
 * A rank listed twice (a periodic Cartesian dimension of size 1 or 2, a
 * graph with parallel edges) would need two blocks on one pair: such a
 * neighbourhood stays staged. Whether it fits is agreed by every rank once,
 * when the communicator's loom communicator is made (a distributed graph's
 * lists are local; coll_loom_setup.c).
 */
#ifndef COLL_LOOM_NEIGHBOR_MAP_H
#define COLL_LOOM_NEIGHBOR_MAP_H

#include "coll_loom_args.h"
#include "coll_loom_pack.h"

typedef struct loom_neighbor_map_t {
    int n;                   /* the communicator's size (0: not built) */
    int indeg, outdeg;       /* as the topology counts them, MPI_PROC_NULL entries included */
    int *in_slot, *out_slot; /* n each: rank p's index in the in (out) list; -1: not a neighbour */
    bool fit;                /* here: no rank listed twice in either list */
    /* Tables of one call, per side (0 send, 1 receive), n entries each: a
     * count, a byte offset and a type per rank. */
    int *counts;
    MPI_Aint *offsets;
    ompi_datatype_t **types;
} loom_neighbor_map_t;

/* Builds m from the communicator's topology (its neighbour lists, as
 * MPI_Cart_shift, MPI_Graph_neighbors and MPI_Dist_graph_neighbors give
 * them). Returns the MPI error code (MPI_ERR_TOPOLOGY: no topology). */
int mca_coll_loom_neighbor_map_build(ompi_communicator_t *comm, loom_neighbor_map_t *m);

void mca_coll_loom_neighbor_map_free(loom_neighbor_map_t *m);

/* A neighbourhood collective's per-neighbour blocks as its arguments a
 * give them (coll: LOOM_COLL_neighbor_allgather(v), _alltoall(v, w), the
 * blocking id): *snd one per out-neighbour, *rcv one per in-neighbour, for
 * mca_coll_loom_neighbor_by_rank with *scount / *rcount where their counts
 * are NULL (allgather(v) sends its one block to every out-neighbour). */
void mca_coll_loom_neighbor_blocks_of(const mca_coll_loom_call_args_t *a, int coll, int indeg, int outdeg,
                                      loom_typed_blocks_t *snd, int *scount, loom_typed_blocks_t *rcv, int *rcount);

/* A side's blocks by rank, for loom's exchange (side 0: the send blocks,
 * one per out-neighbour; 1: the receive blocks, one per in-neighbour):
 * nb describes the per-neighbour blocks as the caller's arguments give them
 * (nb->n the degree; counts NULL: `count` elements each). The result points
 * into m's tables for this side, valid until the side is built again. */
loom_typed_blocks_t mca_coll_loom_neighbor_by_rank(loom_neighbor_map_t *m, int side, const loom_typed_blocks_t *nb,
                                                   int count);

/* The module's map, built at its first use: whether it fits here (0 also
 * where it cannot be built). The agreement over every rank is the loom
 * communicator's creation's (coll_loom_setup.c). */
int mca_coll_loom_neighbors_fit_here(mca_coll_loom_module_t *m);

/* Frees the module's map (with the module). */
void mca_coll_loom_neighbors_free(mca_coll_loom_module_t *m);

#endif
