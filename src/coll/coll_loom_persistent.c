/*
 * Persistent collectives (MPIX_Allreduce_init and friends, Open MPI's
 * pcollreq extension): init keeps the call's arguments (retaining its
 * datatypes and op) in an inactive persistent request; every MPI_Start runs
 * the non-blocking twin with them, so each start takes exactly the path a
 * non-blocking call would (loom's kernels, staged or delegated alike on
 * every rank), and the request completes with it (coll_loom_request.h).
 */
#include "coll_loom.h"
#include "coll_loom_request.h"

#include <stdlib.h>


enum { P_ALLREDUCE, P_BCAST, P_REDUCE, P_ALLGATHER, P_ALLTOALL, P_REDUCE_SCATTER_BLOCK };

struct mca_coll_loom_persistent_args_t {
    int kind;
    mca_coll_loom_module_t *m;
    ompi_communicator_t *comm;
    const void *sbuf;
    void *rbuf;
    int scount, rcount, root;
    ompi_datatype_t *sdt, *rdt; /* retained */
    struct ompi_op_t *op;       /* retained (reductions) */
};

static mca_coll_loom_persistent_args_t *new_args(int kind, mca_coll_base_module_t *module, ompi_communicator_t *comm,
                                                 const void *sbuf, void *rbuf, int scount, ompi_datatype_t *sdt,
                                                 int rcount, ompi_datatype_t *rdt, struct ompi_op_t *op, int root)
{
    mca_coll_loom_persistent_args_t *a = calloc(1, sizeof(*a));
    if (NULL == a) return NULL;
    a->kind = kind;
    a->m = (mca_coll_loom_module_t *)module;
    a->comm = comm;
    a->sbuf = sbuf;
    a->rbuf = rbuf;
    a->scount = scount;
    a->rcount = rcount;
    a->root = root;
    a->sdt = sdt;
    a->rdt = rdt;
    a->op = op;
    OBJ_RETAIN(comm); /* a start after MPI_Comm_free still finds it */
    if (NULL != sdt) OBJ_RETAIN(sdt);
    if (NULL != rdt) OBJ_RETAIN(rdt);
    if (NULL != op) OBJ_RETAIN(op);
    return a;
}

void mca_coll_loom_persistent_args_release(mca_coll_loom_persistent_args_t *a)
{
    if (NULL != a->sdt) OBJ_RELEASE(a->sdt);
    if (NULL != a->rdt) OBJ_RELEASE(a->rdt);
    if (NULL != a->op) OBJ_RELEASE(a->op);
    OBJ_RELEASE(a->comm);
    free(a);
}

static int start(mca_coll_loom_persistent_args_t *a, ompi_request_t **inner)
{
    mca_coll_base_module_t *module = &a->m->super;
    switch (a->kind) {
    case P_ALLREDUCE:
        return mca_coll_loom_iallreduce(a->sbuf, a->rbuf, a->scount, a->sdt, a->op, a->comm, inner, module);
    case P_BCAST: return mca_coll_loom_ibcast(a->rbuf, a->scount, a->sdt, a->root, a->comm, inner, module);
    case P_REDUCE:
        return mca_coll_loom_ireduce(a->sbuf, a->rbuf, a->scount, a->sdt, a->op, a->root, a->comm, inner, module);
    case P_ALLGATHER:
        return mca_coll_loom_iallgather(a->sbuf, a->scount, a->sdt, a->rbuf, a->rcount, a->rdt, a->comm, inner,
                                        module);
    case P_ALLTOALL:
        return mca_coll_loom_ialltoall(a->sbuf, a->scount, a->sdt, a->rbuf, a->rcount, a->rdt, a->comm, inner,
                                       module);
    default:
        return mca_coll_loom_ireduce_scatter_block(a->sbuf, a->rbuf, a->rcount, a->rdt, a->op, a->comm, inner,
                                                   module);
    }
}

static int make(mca_coll_loom_persistent_args_t *a, mca_coll_base_module_t *module, ompi_request_t **req)
{
    if (NULL == a) return MPI_ERR_NO_MEM;
    return mca_coll_loom_request_persistent((mca_coll_loom_module_t *)module, start, a, req);
}

int mca_coll_loom_allreduce_init(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                                 ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                                 mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_ALLREDUCE, module, comm, sbuf, rbuf, count, dt, 0, NULL, op, 0), module, req);
}

int mca_coll_loom_bcast_init(void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **req, mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_BCAST, module, comm, NULL, buf, count, dt, 0, NULL, NULL, root), module, req);
}

int mca_coll_loom_reduce_init(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                              int root, ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **req,
                              mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_REDUCE, module, comm, sbuf, rbuf, count, dt, 0, NULL, op, root), module, req);
}

int mca_coll_loom_allgather_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                                 ompi_datatype_t *rdt, ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **req, mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_ALLGATHER, module, comm, sbuf, rbuf, scount, sdt, rcount, rdt, NULL, 0), module, req);
}

int mca_coll_loom_alltoall_init(const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount,
                                ompi_datatype_t *rdt, ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **req, mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_ALLTOALL, module, comm, sbuf, rbuf, scount, sdt, rcount, rdt, NULL, 0), module, req);
}

int mca_coll_loom_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount, ompi_datatype_t *dt,
                                            struct ompi_op_t *op, ompi_communicator_t *comm,
                                            struct ompi_info_t *info, ompi_request_t **req,
                                            mca_coll_base_module_t *module)
{
    (void)info;
    return make(new_args(P_REDUCE_SCATTER_BLOCK, module, comm, sbuf, rbuf, 0, NULL, rcount, dt, op, 0), module,
                req);
}
