/*
 * Persistent collectives (MPIX_Allreduce_init and friends, Open MPI's
 * pcollreq extension), every one the coll framework has: init keeps the
 * call's arguments (the saved call of coll_loom_defer.h, retaining its
 * communicator, datatypes and op) in an inactive persistent request; every
 * MPI_Start runs the non-blocking twin with them, so each start takes
 * exactly the path a non-blocking call would (loom's kernels, staged or
 * delegated alike on every rank, kept behind a set-up in flight), and the
 * request completes with it (coll_loom_request.h). All of them, not only
 * those loom's kernels run: a start that went to the previous module
 * directly would overtake kept calls on some ranks only. The w-forms'
 * arrays of datatypes are the caller's until the request is freed.
 */
#include "coll_loom.h"
#include "coll_loom_request.h"

#include <stdlib.h>

void mca_coll_loom_persistent_args_release(mca_coll_loom_call_args_t *a)
{
    if (NULL != a->sdt) OBJ_RELEASE(a->sdt);
    if (NULL != a->rdt) OBJ_RELEASE(a->rdt);
    if (NULL != a->op) OBJ_RELEASE(a->op);
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
    if (NULL != k->sdt) OBJ_RETAIN(k->sdt);
    if (NULL != k->rdt) OBJ_RETAIN(k->rdt);
    if (NULL != k->op) OBJ_RETAIN(k->op);
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
