#include "coll_loom_gpu.h"

#include <stdio.h>
#include <unistd.h>

#include "loom.h"

/* The MPI types loom reduces on the GPU; anything else is staged. */
static int map_dtype(ompi_datatype_t *dt, loomDataType_t *out)
{
    static const struct { MPI_Datatype mpi; loomDataType_t loom; } map[] = {
        {MPI_FLOAT, loomFloat32}, {MPI_DOUBLE, loomFloat64},
        {MPI_INT, loomInt32}, {MPI_INT32_T, loomInt32},
        {MPI_LONG, loomInt64}, {MPI_INT64_T, loomInt64}, {MPI_LONG_LONG, loomInt64},
        {MPI_UNSIGNED, loomUint32}, {MPI_UINT32_T, loomUint32},
        {MPI_UNSIGNED_LONG, loomUint64}, {MPI_UINT64_T, loomUint64},
        {MPI_INT8_T, loomInt8}, {MPI_SIGNED_CHAR, loomInt8},
        {MPI_UINT8_T, loomUint8}, {MPI_UNSIGNED_CHAR, loomUint8},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); ++i)
        if (map[i].mpi == dt) {
            *out = map[i].loom;
            return 1;
        }
    return 0;
}

static int map_op(struct ompi_op_t *op, loomRedOp_t *out)
{
    if (op == MPI_SUM) *out = loomSum;
    else if (op == MPI_PROD) *out = loomProd;
    else if (op == MPI_MIN) *out = loomMin;
    else if (op == MPI_MAX) *out = loomMax;
    else return 0;
    return 1;
}

/* Bootstrap for loom: allgather through the previous module (host buffers). */
static int bootstrap_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    mca_coll_loom_module_t *m = (mca_coll_loom_module_t *)ctx;
    return m->prev.allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->comm,
                             m->prev.allgather_module);
}

/* MIN of a flag over the communicator, through the previous module. */
static int agree(mca_coll_loom_module_t *m, int mine)
{
    int all = 0;
    if (MPI_SUCCESS != m->prev.allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, m->comm, m->prev.allreduce_module))
        return 0;
    return all;
}

static void gpu_error(mca_coll_loom_module_t *m, const char *what, loomResult_t r)
{
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    fprintf(stderr, "coll/loom %s rank %d comm %s (cid %u): %s: %s: %s\n", host, ompi_comm_rank(m->comm),
            m->comm->c_name, m->comm->c_contextid, what, loomGetErrorString(r), loomGetLastError());
}

/* Collective: every rank builds its side of the loom communicator, then all
 * agree that every rank succeeded. */
static int create_loom_comm(mca_coll_loom_module_t *m, int device)
{
    loomUniqueId id;
    int rank = ompi_comm_rank(m->comm);
    if (0 == rank) loomGetUniqueId(&id);
    if (MPI_SUCCESS != m->prev.bcast(&id, (int)sizeof(id), MPI_BYTE, 0, m->comm, m->prev.bcast_module)) return 0;
    loomBootstrap_t bs = {m, bootstrap_allgather};
    loomResult_t r = loomCommInitRank(&m->lcomm, ompi_comm_size(m->comm), id, rank, device, &bs);
    if (loomSuccess != r && loomNotSupported != r) gpu_error(m, "creating the loom communicator", r);
    if (agree(m, loomSuccess == r)) return 1;
    if (NULL != m->lcomm) loomCommDestroy(m->lcomm);
    m->lcomm = NULL;
    return 0;
}

bool mca_coll_loom_gpu_allreduce(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                                 ompi_communicator_t *comm, mca_coll_loom_module_t *m,
                                 const loomPointerInfo_t *sinfo, const loomPointerInfo_t *rinfo, int *rc)
{
    loomDataType_t ldt = loomFloat32;
    loomRedOp_t lop = loomSum;
    int want = LOOM_GPU_UNAVAILABLE != m->gpu_state && map_dtype(dt, &ldt) && map_op(op, &lop) &&
               loomMemoryHost != rinfo->kind;
    if (want && MPI_IN_PLACE != sbuf) want = loomMemoryHost != sinfo->kind && sinfo->device == rinfo->device;
    if (want && NULL != m->lcomm) want = m->gpu_device == rinfo->device;
    /* A blocking collective must take the same path on every rank. */
    if (!agree(m, want)) return false;
    if (LOOM_GPU_UNKNOWN == m->gpu_state) {
        m->gpu_state = create_loom_comm(m, rinfo->device) ? LOOM_GPU_READY : LOOM_GPU_UNAVAILABLE;
        m->gpu_device = rinfo->device;
        if (LOOM_GPU_READY != m->gpu_state) return false;
    }
    mca_coll_loom_note(m, LOOM_COLL_allreduce, LOOM_PATH_GPU);
    const void *in = MPI_IN_PLACE == sbuf ? rbuf : sbuf;
    loomResult_t r = loomAllReduce(in, rbuf, (size_t)count, ldt, lop, m->lcomm, NULL);
    if (loomSuccess == r) r = loomCommWait(m->lcomm);
    if (loomSuccess != r) gpu_error(m, "allreduce", r);
    *rc = loomSuccess == r ? MPI_SUCCESS : loomRemoteError == r ? MPI_ERR_OTHER : MPI_ERR_INTERN;
    return true;
}

void mca_coll_loom_gpu_release(mca_coll_loom_module_t *m)
{
    if (NULL != m->lcomm) loomCommDestroy(m->lcomm);
    m->lcomm = NULL;
}
