/*
 * Persistent collectives (MPI-4's MPI_Allreduce_init and friends; Open
 * MPI 4.1's pcollreq MPIX_*_init), every one the coll framework has: init keeps the
 * call's arguments (the saved call of coll_loom_defer.h, retaining its
 * communicator, op and the datatypes it reads: hold_args) in an inactive
 * persistent request; every MPI_Start runs the non-blocking twin with
 * them, so each start takes exactly the path a non-blocking call would
 * (loom's kernels, staged or delegated alike on every rank, kept behind a
 * set-up in flight), and the request completes with it
 * (coll_loom_request.h). All of them, not only those loom's kernels run: a
 * start that went to the previous module directly would overtake kept
 * calls on some ranks only. The w-forms' arrays (counts, displacements,
 * datatypes) are the caller's until the request is freed; the datatypes in
 * them are retained like the others.
 */
#include "coll_loom.h"
#include "coll_loom_exchange.h"
#include "coll_loom_pack.h"
#include "coll_loom_request.h"

#include <stdlib.h>

/* Takes (+1) or drops (-1) a reference on the objects the call reads on
 * this rank: its op, and the datatypes MPI reads here (the w-forms': every
 * block's with elements). MPI lets the program free them after init, and
 * lets it pass anything (an unset or freed handle) where a type is not read:
 * a send type in place, a gather's receive type off the root, a rooted
 * call's types on an intercommunicator's MPI_PROC_NULL ranks. Open MPI's
 * binding retains nothing for a persistent request (it is complete then);
 * for a non-blocking call it retains them on the request loom returns. */
static void hold_args(const mca_coll_loom_call_args_t *a, int delta)
{
    bool s = MPI_IN_PLACE != a->sbuf, r = true;
    const bool root = mca_coll_loom_is_root(a->comm, a->root), leaf = mca_coll_loom_is_leaf(a->comm, a->root);
    switch (a->coll) {
    case LOOM_COLL_igather: case LOOM_COLL_igatherv:
        r = root;
        s = leaf && (!root || MPI_IN_PLACE != a->sbuf);
        break;
    case LOOM_COLL_iscatter: case LOOM_COLL_iscatterv:
        s = root;
        r = leaf && (!root || MPI_IN_PLACE != a->rbuf);
        break;
    case LOOM_COLL_ibcast: case LOOM_COLL_ireduce: /* one type (in sdt), read by the root and the leaves */
        s = root || leaf;
        break;
    case LOOM_COLL_iallreduce: case LOOM_COLL_ireduce_scatter: case LOOM_COLL_ireduce_scatter_block:
    case LOOM_COLL_iscan: case LOOM_COLL_iexscan: /* one type (in sdt), in place or not */
        s = true;
        break;
    default: break; /* the rest: the send side unless in place, the receive side */
    }
    if (s) mca_coll_loom_hold(a->sdt, delta);
    if (r) mca_coll_loom_hold(a->rdt, delta);
    if (s) mca_coll_loom_hold(a->op, delta);
    if (NULL == a->sdts && NULL == a->rdts) return;
    /* The w-forms: alltoallw a block per peer, neighbor_alltoallw per
     * neighbour. The arrays are the program's until the request is freed. */
    const loom_blocks_t nb = LOOM_COLL_ineighbor_alltoallw == a->coll ? mca_coll_loom_neighbor_blocks(a->comm)
                                                                      : mca_coll_loom_peer_blocks(a->comm);
    const loom_typed_blocks_t snd = {.dts = a->sdts, .n = nb.out, .counts = a->scounts};
    const loom_typed_blocks_t rcv = {.dts = a->rdts, .n = nb.in, .counts = a->rcounts};
    if (s) mca_coll_loom_hold_block_types(&snd, delta);
    mca_coll_loom_hold_block_types(&rcv, delta);
}

void mca_coll_loom_persistent_args_release(mca_coll_loom_call_args_t *a)
{
    hold_args(a, -1);
    OBJ_RELEASE(a->comm);
    free(a);
}

static int start(mca_coll_loom_call_args_t *a, ompi_request_t **inner)
{
    return mca_coll_loom_call_start(a, inner);
}

/* The persistent request of a saved call (copied; its objects retained). */
static int make(mca_coll_base_module_t *module, ompi_request_t **req, mca_coll_loom_call_args_t a)
{
    mca_coll_loom_call_args_t *k = malloc(sizeof(*k));
    if (NULL == k) return MPI_ERR_NO_MEM;
    *k = a;
    k->m = (mca_coll_loom_module_t *)module;
    OBJ_RETAIN(k->comm); /* a start after MPI_Comm_free still finds it */
    hold_args(k, +1);
    return mca_coll_loom_request_persistent(k->m, start, k, req);
}

#define LOOM_INIT(name, ...)                                                                              \
    do {                                                                                                  \
        (void)info;                                                                                       \
        return make(module, req, (mca_coll_loom_call_args_t){.coll = LOOM_COLL_i##name, .comm = comm, __VA_ARGS__}); \
    } while (0)

int mca_coll_loom_allreduce_init(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                                 ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                                 mca_coll_base_module_t *module)
{
    LOOM_INIT(allreduce, .sbuf = sbuf, .rbuf = rbuf, .scount = count, .sdt = dt, .op = op);
}

int mca_coll_loom_bcast_init(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **req, mca_coll_base_module_t *module)
{
    LOOM_INIT(bcast, .rbuf = buf, .scount = count, .sdt = dt, .root = root);
}

int mca_coll_loom_reduce_init(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                              int root, ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                              mca_coll_base_module_t *module)
{
    LOOM_INIT(reduce, .sbuf = sbuf, .rbuf = rbuf, .scount = count, .sdt = dt, .op = op, .root = root);
}

int mca_coll_loom_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount, ompi_datatype_t *dt,
                                            struct ompi_op_t *op, ompi_communicator_t *comm,
                                            struct ompi_info_t *info, ompi_request_t **req,
                                            mca_coll_base_module_t *module)
{
    LOOM_INIT(reduce_scatter_block, .sbuf = sbuf, .rbuf = rbuf, .rcount = rcount, .sdt = dt, .op = op);
}

int mca_coll_loom_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts, ompi_datatype_t *dt,
                                      struct ompi_op_t *op, ompi_communicator_t *comm, struct ompi_info_t *info,
                                      ompi_request_t **req, mca_coll_base_module_t *module)
{
    LOOM_INIT(reduce_scatter, .sbuf = sbuf, .rbuf = rbuf, .rcounts = rcounts, .sdt = dt, .op = op);
}

/* scan and exscan share allreduce's signature. */
#define LOOM_PREFIX_INIT(name)                                                                               \
    int mca_coll_loom_##name##_init(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,           \
                                    struct ompi_op_t *op, ompi_communicator_t *comm, struct ompi_info_t *info, \
                                    ompi_request_t **req, mca_coll_base_module_t *module)                   \
    {                                                                                                        \
        LOOM_INIT(name, .sbuf = sbuf, .rbuf = rbuf, .scount = count, .sdt = dt, .op = op);                   \
    }
LOOM_PREFIX_INIT(scan)
LOOM_PREFIX_INIT(exscan)

int mca_coll_loom_barrier_init(ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                               mca_coll_base_module_t *module)
{
    LOOM_INIT(barrier, .sbuf = NULL);
}

/* allgather, alltoall and their neighbourhood twins: a block each way. */
#define LOOM_BLOCKS_INIT(name)                                                                               \
    int mca_coll_loom_##name##_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,         \
                                    int rcount, ompi_datatype_t *rdt, ompi_communicator_t *comm,             \
                                    struct ompi_info_t *info, ompi_request_t **req,                          \
                                    mca_coll_base_module_t *module)                                          \
    {                                                                                                        \
        LOOM_INIT(name, .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt); \
    }
LOOM_BLOCKS_INIT(allgather)
LOOM_BLOCKS_INIT(alltoall)
LOOM_BLOCKS_INIT(neighbor_allgather)
LOOM_BLOCKS_INIT(neighbor_alltoall)

/* allgatherv and its neighbourhood twin. */
#define LOOM_GATHERV_INIT(name)                                                                              \
    int mca_coll_loom_##name##_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,         \
                                    const int *rcounts, const int *displs, ompi_datatype_t *rdt,             \
                                    ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req, \
                                    mca_coll_base_module_t *module)                                          \
    {                                                                                                        \
        LOOM_INIT(name, .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts,         \
                  .rdispls = displs, .rdt = rdt);                                                            \
    }
LOOM_GATHERV_INIT(allgatherv)
LOOM_GATHERV_INIT(neighbor_allgatherv)

/* alltoallv and its neighbourhood twin. */
#define LOOM_ALLTOALLV_INIT(name)                                                                            \
    int mca_coll_loom_##name##_init(const void *sbuf, const int *scounts, const int *sdispls,               \
                                    ompi_datatype_t *sdt, void *rbuf, const int *rcounts,                    \
                                    const int *rdispls, ompi_datatype_t *rdt, ompi_communicator_t *comm,      \
                                    struct ompi_info_t *info, ompi_request_t **req,                          \
                                    mca_coll_base_module_t *module)                                          \
    {                                                                                                        \
        LOOM_INIT(name, .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdt = sdt, .rbuf = rbuf,       \
                  .rcounts = rcounts, .rdispls = rdispls, .rdt = rdt);                                       \
    }
LOOM_ALLTOALLV_INIT(alltoallv)
LOOM_ALLTOALLV_INIT(neighbor_alltoallv)

int mca_coll_loom_alltoallw_init(const void *sbuf, const int *scounts, const int *sdispls,
                                 ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts, const int *rdispls,
                                 ompi_datatype_t *const *rdts, ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **req, mca_coll_base_module_t *module)
{
    LOOM_INIT(alltoallw, .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdts = sdts, .rbuf = rbuf,
              .rcounts = rcounts, .rdispls = rdispls, .rdts = rdts);
}

int mca_coll_loom_neighbor_alltoallw_init(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                          ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                                          const MPI_Aint *rdispls, ompi_datatype_t *const *rdts,
                                          ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                                          mca_coll_base_module_t *module)
{
    LOOM_INIT(neighbor_alltoallw, .sbuf = sbuf, .scounts = scounts, .sdispls_a = sdispls, .sdts = sdts,
              .rbuf = rbuf, .rcounts = rcounts, .rdispls_a = rdispls, .rdts = rdts);
}

/* gather and scatter: a block at the root per rank. */
#define LOOM_ROOTED_INIT(name)                                                                               \
    int mca_coll_loom_##name##_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,         \
                                    int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm,   \
                                    struct ompi_info_t *info, ompi_request_t **req,                          \
                                    mca_coll_base_module_t *module)                                          \
    {                                                                                                        \
        LOOM_INIT(name, .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt, \
                  .root = root);                                                                             \
    }
LOOM_ROOTED_INIT(gather)
LOOM_ROOTED_INIT(scatter)

int mca_coll_loom_gatherv_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                               const int *displs, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm,
                               struct ompi_info_t *info, ompi_request_t **req, mca_coll_base_module_t *module)
{
    LOOM_INIT(gatherv, .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts,
              .rdispls = displs, .rdt = rdt, .root = root);
}

int mca_coll_loom_scatterv_init(const void *sbuf, const int *scounts, const int *displs, ompi_datatype_t *sdt,
                                void *rbuf, int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm,
                                struct ompi_info_t *info, ompi_request_t **req, mca_coll_base_module_t *module)
{
    LOOM_INIT(scatterv, .sbuf = sbuf, .scounts = scounts, .sdispls = displs, .sdt = sdt, .rbuf = rbuf,
              .rcount = rcount, .rdt = rdt, .root = root);
}
