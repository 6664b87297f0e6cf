#include "coll_loom_neighbor_map.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/topo/base/base.h"

/* slot[p] = j where list[j] == p, -1 elsewhere; MPI_PROC_NULL skipped.
 * False where a rank is listed twice or is not one of the n ranks. */
static bool neighbor_slots(const int *list, int degree, int n, int *slot)
{
    for (int p = 0; p < n; ++p) slot[p] = -1;
    for (int j = 0; j < degree; ++j) {
        const int p = list[j];
        if (MPI_PROC_NULL == p) continue;
        if (p < 0 || p >= n || slot[p] >= 0) return false;
        slot[p] = j;
    }
    return true;
}

/* This rank's in- and out-neighbours, in the order the topology lists them
 * (MPI's order for the blocks of a neighbourhood collective). */
static int neighbor_lists(ompi_communicator_t *comm, int indeg, int *in, int outdeg, int *out)
{
    mca_topo_base_module_t *topo = comm->c_topo;
    if (NULL == topo) return MPI_ERR_TOPOLOGY;
    if (OMPI_COMM_IS_CART(comm)) { /* per dimension the rank below, then the one above */
        for (int d = 0; 2 * d + 1 < indeg; ++d) {
            int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
            const int rc = topo->topo.cart.cart_shift(comm, d, 1, &below, &above);
            if (MPI_SUCCESS != rc) return rc;
            in[2 * d] = out[2 * d] = below;
            in[2 * d + 1] = out[2 * d + 1] = above;
        }
        return MPI_SUCCESS;
    }
    if (OMPI_COMM_IS_GRAPH(comm)) { /* one list both ways */
        const int rc = topo->topo.graph.graph_neighbors(comm, ompi_comm_rank(comm), indeg, in);
        if (MPI_SUCCESS == rc && indeg > 0) memcpy(out, in, (size_t)indeg * sizeof(int));
        return rc;
    }
    if (OMPI_COMM_IS_DIST_GRAPH(comm)) {
        const mca_topo_base_comm_dist_graph_2_2_0_t *g = topo->mtc.dist_graph;
        if (indeg > 0) memcpy(in, g->in, (size_t)indeg * sizeof(int));
        if (outdeg > 0) memcpy(out, g->out, (size_t)outdeg * sizeof(int));
        return MPI_SUCCESS;
    }
    return MPI_ERR_TOPOLOGY;
}

int mca_coll_loom_neighbor_map_build(ompi_communicator_t *comm, loom_neighbor_map_t *m)
{
    memset(m, 0, sizeof(*m));
    int indeg = 0, outdeg = 0;
    int rc = OMPI_COMM_IS_TOPO(comm) ? mca_topo_base_neighbor_count(comm, &indeg, &outdeg) : MPI_ERR_TOPOLOGY;
    if (MPI_SUCCESS != rc) return rc;
    const int n = ompi_comm_size(comm);
    int *lists = malloc(((size_t)indeg + (size_t)outdeg + 1) * sizeof(int));
    m->in_slot = malloc(2 * (size_t)n * sizeof(int));
    m->counts = malloc(2 * (size_t)n * sizeof(int));
    m->offsets = malloc(2 * (size_t)n * sizeof(MPI_Aint));
    m->types = malloc(2 * (size_t)n * sizeof(ompi_datatype_t *));
    rc = NULL == lists || NULL == m->in_slot || NULL == m->counts || NULL == m->offsets || NULL == m->types
             ? MPI_ERR_NO_MEM
             : neighbor_lists(comm, indeg, lists, outdeg, lists + indeg);
    if (MPI_SUCCESS == rc) {
        m->n = n;
        m->indeg = indeg;
        m->outdeg = outdeg;
        m->out_slot = m->in_slot + n;
        const bool in_fit = neighbor_slots(lists, indeg, n, m->in_slot);
        const bool out_fit = neighbor_slots(lists + indeg, outdeg, n, m->out_slot);
        m->fit = in_fit && out_fit;
    }
    free(lists);
    if (MPI_SUCCESS != rc) mca_coll_loom_neighbor_map_free(m);
    return rc;
}

void mca_coll_loom_neighbor_map_free(loom_neighbor_map_t *m)
{
    free(m->in_slot);
    free(m->counts);
    free(m->offsets);
    free(m->types);
    memset(m, 0, sizeof(*m));
}

void mca_coll_loom_neighbor_blocks_of(const mca_coll_loom_call_args_t *a, int coll, int indeg, int outdeg,
                                      loom_typed_blocks_t *snd, int *scount, loom_typed_blocks_t *rcv, int *rcount)
{
    *snd = (loom_typed_blocks_t){.user = (void *)a->sbuf, .dt = a->sdt, .n = outdeg};
    *rcv = (loom_typed_blocks_t){.user = a->rbuf, .dt = a->rdt, .n = indeg};
    *scount = *rcount = 0;
    switch (coll) {
    case LOOM_COLL_neighbor_allgather: /* the one send block to every out-neighbour */
        *scount = a->scount, *rcount = a->rcount, rcv->stride = (size_t)a->rcount;
        break;
    case LOOM_COLL_neighbor_alltoall:
        *scount = a->scount, *rcount = a->rcount;
        snd->stride = (size_t)a->scount, rcv->stride = (size_t)a->rcount;
        break;
    case LOOM_COLL_neighbor_allgatherv:
        *scount = a->scount, rcv->counts = a->rcounts, rcv->displs = a->rdispls;
        break;
    case LOOM_COLL_neighbor_alltoallv:
        snd->counts = a->scounts, snd->displs = a->sdispls, rcv->counts = a->rcounts, rcv->displs = a->rdispls;
        break;
    default: /* neighbor_alltoallw: a type per block, displacements in bytes */
        snd->dt = rcv->dt = NULL;
        snd->dts = a->sdts, snd->counts = a->scounts, snd->wdispls = a->sdispls_a;
        rcv->dts = a->rdts, rcv->counts = a->rcounts, rcv->wdispls = a->rdispls_a;
    }
}

loom_typed_blocks_t mca_coll_loom_neighbor_by_rank(loom_neighbor_map_t *m, int side, const loom_typed_blocks_t *nb,
                                                   int count)
{
    const int n = m->n;
    const int *slot = 0 == side ? m->out_slot : m->in_slot;
    int *counts = m->counts + (size_t)side * n;
    MPI_Aint *offsets = m->offsets + (size_t)side * n;
    ompi_datatype_t **types = m->types + (size_t)side * n;
    for (int p = 0; p < n; ++p) {
        const int j = slot[p];
        counts[p] = j < 0 ? 0 : NULL != nb->counts ? nb->counts[j] : count;
        /* an empty block's type and displacement are not read (alltoallw may pass MPI_DATATYPE_NULL) */
        offsets[p] = counts[p] > 0 ? (MPI_Aint)mca_coll_loom_block_offset(nb, j) : 0;
        if (NULL != nb->dts) types[p] = counts[p] > 0 ? nb->dts[j] : NULL;
    }
    loom_typed_blocks_t b = {.user = nb->user, .n = n, .counts = counts, .wdispls = offsets};
    if (NULL != nb->dts) b.dts = types;
    else b.dt = nb->dt;
    return b;
}

int mca_coll_loom_neighbors_fit_here(mca_coll_loom_module_t *m)
{
    if (NULL == m->neighbors) {
        loom_neighbor_map_t *map = malloc(sizeof(*map));
        if (NULL == map || MPI_SUCCESS != mca_coll_loom_neighbor_map_build(m->comm, map)) {
            free(map);
            return 0;
        }
        m->neighbors = map;
    }
    return m->neighbors->fit;
}

void mca_coll_loom_neighbors_free(mca_coll_loom_module_t *m)
{
    if (NULL == m->neighbors) return;
    mca_coll_loom_neighbor_map_free(m->neighbors);
    free(m->neighbors);
    m->neighbors = NULL;
}
