/*
 * One call's arguments, and the signatures that carry them.
 *
 * Every override (blocking, non-blocking, persistent init) is a thunk
 * generated from LOOM_BLOCKING_COLLS (coll_loom_overrides.c): it packs its
 * parameters into a mca_coll_loom_call_args_t and hands it to the dispatcher
 * (mca_coll_loom_dispatch, coll_loom_defer.h), which runs it, keeps it, or
 * (persistent) stores it for MPI_Start. Running a call is the collective's
 * runner: mca_coll_loom_run_<name>, generated next to the collective's
 * mapper <name>_any (LOOM_RUNNER), which routes it to loom's kernels,
 * staging or the previous module. The runners form one table indexed by
 * the call's LOOM_COLL_* (coll_loom_ops.c).
 *
 * Per Open MPI function type (the X-macro's second column) three macros:
 * LOOM_PARAMS_<type> its parameters up to the communicator, LOOM_FIELDS_<type>
 * the args fields they fill, LOOM_UNPACK_<type>(a) the parameters back from
 * args (the mapper's leading arguments). The compiler checks the parameters
 * against Open MPI's types (coll_loom.h declares each override with them).
 */
#ifndef COLL_LOOM_ARGS_H
#define COLL_LOOM_ARGS_H

#include "coll_loom.h"

BEGIN_C_DECLS

/* One call's arguments, as its override received them (the fields its
 * signature has; the others zero). */
typedef struct mca_coll_loom_call_args_t {
    int coll; /* LOOM_COLL_<name> or LOOM_COLL_i<name> */
    mca_coll_loom_module_t *m;
    ompi_communicator_t *comm;
    const void *sbuf;
    void *rbuf;
    int scount, rcount, root;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    const MPI_Aint *sdispls_a, *rdispls_a; /* neighbor_alltoallw */
    ompi_datatype_t *sdt, *rdt;
    ompi_datatype_t *const *sdts, *const *rdts; /* the w-forms */
    struct ompi_op_t *op;
} mca_coll_loom_call_args_t;

#define LOOM_PARAMS_barrier ompi_communicator_t *comm
#define LOOM_FIELDS_barrier .comm = comm
#define LOOM_UNPACK_barrier(a) (a)->comm

#define LOOM_PARAMS_bcast void *buf, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm
#define LOOM_FIELDS_bcast .rbuf = buf, .scount = count, .sdt = dt, .root = root, .comm = comm
#define LOOM_UNPACK_bcast(a) (a)->rbuf, (a)->scount, (a)->sdt, (a)->root, (a)->comm

/* allreduce, scan, exscan */
#define LOOM_PARAMS_allreduce \
    const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op, ompi_communicator_t *comm
#define LOOM_FIELDS_allreduce .sbuf = sbuf, .rbuf = rbuf, .scount = count, .sdt = dt, .op = op, .comm = comm
#define LOOM_UNPACK_allreduce(a) (a)->sbuf, (a)->rbuf, (a)->scount, (a)->sdt, (a)->op, (a)->comm
#define LOOM_PARAMS_scan LOOM_PARAMS_allreduce
#define LOOM_FIELDS_scan LOOM_FIELDS_allreduce
#define LOOM_UNPACK_scan LOOM_UNPACK_allreduce
#define LOOM_PARAMS_exscan LOOM_PARAMS_allreduce
#define LOOM_FIELDS_exscan LOOM_FIELDS_allreduce
#define LOOM_UNPACK_exscan LOOM_UNPACK_allreduce

#define LOOM_PARAMS_reduce                                                                                  \
    const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, struct ompi_op_t *op, int root,           \
        ompi_communicator_t *comm
#define LOOM_FIELDS_reduce .sbuf = sbuf, .rbuf = rbuf, .scount = count, .sdt = dt, .op = op, .root = root, .comm = comm
#define LOOM_UNPACK_reduce(a) (a)->sbuf, (a)->rbuf, (a)->scount, (a)->sdt, (a)->op, (a)->root, (a)->comm

#define LOOM_PARAMS_reduce_scatter                                                                          \
    const void *sbuf, void *rbuf, const int *rcounts, ompi_datatype_t *dt, struct ompi_op_t *op,            \
        ompi_communicator_t *comm
#define LOOM_FIELDS_reduce_scatter .sbuf = sbuf, .rbuf = rbuf, .rcounts = rcounts, .sdt = dt, .op = op, .comm = comm
#define LOOM_UNPACK_reduce_scatter(a) (a)->sbuf, (a)->rbuf, (a)->rcounts, (a)->sdt, (a)->op, (a)->comm

#define LOOM_PARAMS_reduce_scatter_block                                                                    \
    const void *sbuf, void *rbuf, int rcount, ompi_datatype_t *dt, struct ompi_op_t *op, ompi_communicator_t *comm
#define LOOM_FIELDS_reduce_scatter_block .sbuf = sbuf, .rbuf = rbuf, .rcount = rcount, .sdt = dt, .op = op, .comm = comm
#define LOOM_UNPACK_reduce_scatter_block(a) (a)->sbuf, (a)->rbuf, (a)->rcount, (a)->sdt, (a)->op, (a)->comm

/* allgather, alltoall (and their neighbourhood twins) */
#define LOOM_PARAMS_allgather                                                                               \
    const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt,       \
        ompi_communicator_t *comm
#define LOOM_FIELDS_allgather \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt, .comm = comm
#define LOOM_UNPACK_allgather(a) (a)->sbuf, (a)->scount, (a)->sdt, (a)->rbuf, (a)->rcount, (a)->rdt, (a)->comm
#define LOOM_PARAMS_alltoall LOOM_PARAMS_allgather
#define LOOM_FIELDS_alltoall LOOM_FIELDS_allgather
#define LOOM_UNPACK_alltoall LOOM_UNPACK_allgather

#define LOOM_PARAMS_allgatherv                                                                              \
    const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *displs,  \
        ompi_datatype_t *rdt, ompi_communicator_t *comm
#define LOOM_FIELDS_allgatherv                                                                              \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts, .rdispls = displs, .rdt = rdt, \
    .comm = comm
#define LOOM_UNPACK_allgatherv(a) \
    (a)->sbuf, (a)->scount, (a)->sdt, (a)->rbuf, (a)->rcounts, (a)->rdispls, (a)->rdt, (a)->comm

#define LOOM_PARAMS_alltoallv                                                                               \
    const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt, void *rbuf,             \
        const int *rcounts, const int *rdispls, ompi_datatype_t *rdt, ompi_communicator_t *comm
#define LOOM_FIELDS_alltoallv                                                                               \
    .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts,     \
    .rdispls = rdispls, .rdt = rdt, .comm = comm
#define LOOM_UNPACK_alltoallv(a) \
    (a)->sbuf, (a)->scounts, (a)->sdispls, (a)->sdt, (a)->rbuf, (a)->rcounts, (a)->rdispls, (a)->rdt, (a)->comm

#define LOOM_PARAMS_alltoallw                                                                               \
    const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *const *sdts, void *rbuf,     \
        const int *rcounts, const int *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm
#define LOOM_FIELDS_alltoallw                                                                               \
    .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdts = sdts, .rbuf = rbuf, .rcounts = rcounts,   \
    .rdispls = rdispls, .rdts = rdts, .comm = comm
#define LOOM_UNPACK_alltoallw(a) \
    (a)->sbuf, (a)->scounts, (a)->sdispls, (a)->sdts, (a)->rbuf, (a)->rcounts, (a)->rdispls, (a)->rdts, (a)->comm

#define LOOM_PARAMS_neighbor_alltoallw                                                                      \
    const void *sbuf, const int *scounts, const MPI_Aint *sdispls, ompi_datatype_t *const *sdts, void *rbuf, \
        const int *rcounts, const MPI_Aint *rdispls, ompi_datatype_t *const *rdts, ompi_communicator_t *comm
#define LOOM_FIELDS_neighbor_alltoallw                                                                      \
    .sbuf = sbuf, .scounts = scounts, .sdispls_a = sdispls, .sdts = sdts, .rbuf = rbuf, .rcounts = rcounts, \
    .rdispls_a = rdispls, .rdts = rdts, .comm = comm
#define LOOM_UNPACK_neighbor_alltoallw(a)                                                                   \
    (a)->sbuf, (a)->scounts, (a)->sdispls_a, (a)->sdts, (a)->rbuf, (a)->rcounts, (a)->rdispls_a, (a)->rdts, \
        (a)->comm

/* gather, scatter */
#define LOOM_PARAMS_gather                                                                                  \
    const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt,       \
        int root, ompi_communicator_t *comm
#define LOOM_FIELDS_gather                                                                                  \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt, .root = root,   \
    .comm = comm
#define LOOM_UNPACK_gather(a) \
    (a)->sbuf, (a)->scount, (a)->sdt, (a)->rbuf, (a)->rcount, (a)->rdt, (a)->root, (a)->comm
#define LOOM_PARAMS_scatter LOOM_PARAMS_gather
#define LOOM_FIELDS_scatter LOOM_FIELDS_gather
#define LOOM_UNPACK_scatter LOOM_UNPACK_gather

#define LOOM_PARAMS_gatherv                                                                                 \
    const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *displs,  \
        ompi_datatype_t *rdt, int root, ompi_communicator_t *comm
#define LOOM_FIELDS_gatherv                                                                                 \
    .sbuf = sbuf, .scount = scount, .sdt = sdt, .rbuf = rbuf, .rcounts = rcounts, .rdispls = displs, .rdt = rdt, \
    .root = root, .comm = comm
#define LOOM_UNPACK_gatherv(a) \
    (a)->sbuf, (a)->scount, (a)->sdt, (a)->rbuf, (a)->rcounts, (a)->rdispls, (a)->rdt, (a)->root, (a)->comm

#define LOOM_PARAMS_scatterv                                                                                \
    const void *sbuf, const int *scounts, const int *displs, ompi_datatype_t *sdt, void *rbuf, int rcount,  \
        ompi_datatype_t *rdt, int root, ompi_communicator_t *comm
#define LOOM_FIELDS_scatterv                                                                                \
    .sbuf = sbuf, .scounts = scounts, .sdispls = displs, .sdt = sdt, .rbuf = rbuf, .rcount = rcount, .rdt = rdt, \
    .root = root, .comm = comm
#define LOOM_UNPACK_scatterv(a) \
    (a)->sbuf, (a)->scounts, (a)->sdispls, (a)->sdt, (a)->rbuf, (a)->rcount, (a)->rdt, (a)->root, (a)->comm

/* A collective's runner: its blocking and non-blocking calls (req NULL:
 * blocking), with the arguments of a. Replaying a kept call, or starting a
 * persistent one, runs it too: never the override, which would keep it again. */
typedef int (*mca_coll_loom_runner_fn_t)(const mca_coll_loom_call_args_t *a, ompi_request_t **req);
#define LOOM_DECLARE_RUNNER(name, type) \
    int mca_coll_loom_run_##name(const mca_coll_loom_call_args_t *a, ompi_request_t **req);
LOOM_BLOCKING_COLLS(LOOM_DECLARE_RUNNER)
#undef LOOM_DECLARE_RUNNER

/* The runner of name, after its mapper:
 *   static int name_any(<the type's parameters>, mca_coll_loom_module_t *m, ompi_request_t **req); */
#define LOOM_RUNNER(name, type)                                                              \
    int mca_coll_loom_run_##name(const mca_coll_loom_call_args_t *a, ompi_request_t **req)   \
    {                                                                                        \
        return name##_any(LOOM_UNPACK_##type(a), a->m, req);                                 \
    }

/* Runs a's call with the runner of its collective (coll_loom_ops.c). */
int mca_coll_loom_run(const mca_coll_loom_call_args_t *a, ompi_request_t **req);

/* A persistent init (coll_loom_persistent.c): *req becomes an inactive
 * persistent request whose every MPI_Start dispatches a copy of a (its
 * collective the non-blocking one). */
int mca_coll_loom_persistent_init(const mca_coll_loom_call_args_t *a, ompi_request_t **req);

END_C_DECLS

#endif
