/*
 * coll/loom: the Open MPI coll component that routes collectives on CUDA
 * device buffers to loom and passes everything else to the module Open MPI
 * would have used without loom (saved at module_enable: "previous").
 *
 * This glue sees only loom.h and Open MPI's headers.
 */
#ifndef MCA_COLL_LOOM_H
#define MCA_COLL_LOOM_H

#include "coll_loom_ompi.h" /* first: ompi_config.h, and what differs between Open MPI 4.1 and 5.0 */

#include "ompi/datatype/ompi_datatype.h"

#include <pthread.h>
#include "coll_loom_profile.h"

BEGIN_C_DECLS

/* Every collective loom overrides, blocking and non-blocking. X(name, type)
 * expands once per collective, type naming Open MPI's function type
 * (mca_coll_base_module_<type>_fn_t: the neighbourhood collectives share the
 * plain ones' signatures); the previous module's pointers and the override
 * table are generated from this one list. */
#define LOOM_BLOCKING_COLLS(X)                                                                       \
    X(allgather, allgather) X(allgatherv, allgatherv) X(allreduce, allreduce) X(alltoall, alltoall) \
    X(alltoallv, alltoallv) X(alltoallw, alltoallw) X(barrier, barrier) X(bcast, bcast)             \
    X(exscan, exscan) X(gather, gather) X(gatherv, gatherv) X(reduce, reduce)                       \
    X(reduce_scatter, reduce_scatter) X(reduce_scatter_block, reduce_scatter_block) X(scan, scan)   \
    X(scatter, scatter) X(scatterv, scatterv)                                                       \
    X(neighbor_allgather, allgather) X(neighbor_allgatherv, allgatherv)                             \
    X(neighbor_alltoall, alltoall) X(neighbor_alltoallv, alltoallv)                                 \
    X(neighbor_alltoallw, neighbor_alltoallw)
#define LOOM_NONBLOCKING_COLLS(X)                                                                    \
    X(iallgather, iallgather) X(iallgatherv, iallgatherv) X(iallreduce, iallreduce)                 \
    X(ialltoall, ialltoall) X(ialltoallv, ialltoallv) X(ialltoallw, ialltoallw)                     \
    X(ibarrier, ibarrier) X(ibcast, ibcast) X(iexscan, iexscan) X(igather, igather)                 \
    X(igatherv, igatherv) X(ireduce, ireduce) X(ireduce_scatter, ireduce_scatter)                   \
    X(ireduce_scatter_block, ireduce_scatter_block) X(iscan, iscan) X(iscatter, iscatter)           \
    X(iscatterv, iscatterv)                                                                         \
    X(ineighbor_allgather, iallgather) X(ineighbor_allgatherv, iallgatherv)                         \
    X(ineighbor_alltoall, ialltoall) X(ineighbor_alltoallv, ialltoallv)                             \
    X(ineighbor_alltoallw, ineighbor_alltoallw)
/* Persistent collectives (MPI-4's MPI_*_init; 4.1's pcollreq MPIX_*_init): each
 * MPI_Start runs the non-blocking twin (coll_loom_persistent.c). */
#define LOOM_PERSISTENT_COLLS(X)                                                                     \
    X(allgather_init, allgather_init) X(allgatherv_init, allgatherv_init)                           \
    X(allreduce_init, allreduce_init) X(alltoall_init, alltoall_init)                               \
    X(alltoallv_init, alltoallv_init) X(alltoallw_init, alltoallw_init)                             \
    X(barrier_init, barrier_init) X(bcast_init, bcast_init) X(exscan_init, exscan_init)             \
    X(gather_init, gather_init) X(gatherv_init, gatherv_init) X(reduce_init, reduce_init)           \
    X(reduce_scatter_init, reduce_scatter_init)                                                     \
    X(reduce_scatter_block_init, reduce_scatter_block_init) X(scan_init, scan_init)                 \
    X(scatter_init, scatter_init) X(scatterv_init, scatterv_init)                                   \
    X(neighbor_allgather_init, allgather_init) X(neighbor_allgatherv_init, allgatherv_init)         \
    X(neighbor_alltoall_init, alltoall_init) X(neighbor_alltoallv_init, alltoallv_init)             \
    X(neighbor_alltoallw_init, neighbor_alltoallw_init)
/* Not a collective, but served through the coll framework on both Open MPI
 * lines (MPI_COMM_SELF's module): MPI_Reduce_local (coll_loom_reduce_local.c). */
#define LOOM_LOCAL_OPS(X) X(reduce_local, reduce_local)
#define LOOM_ALL_COLLS(X) LOOM_BLOCKING_COLLS(X) LOOM_NONBLOCKING_COLLS(X) LOOM_PERSISTENT_COLLS(X) LOOM_LOCAL_OPS(X)

enum {
#define LOOM_ENUM(name, type) LOOM_COLL_##name,
    LOOM_ALL_COLLS(LOOM_ENUM)
#undef LOOM_ENUM
    LOOM_COLL_COUNT
};
extern const char *const mca_coll_loom_coll_names[LOOM_COLL_COUNT];

/* How one call was served; printed once per (communicator, collective, path). */
typedef enum {
    LOOM_PATH_DELEGATED = 0, /* host buffers: previous module, untouched */
    LOOM_PATH_STAGED = 1,    /* device buffers copied through host memory */
    LOOM_PATH_GPU = 2,       /* loom's kernels */
    LOOM_PATH_COUNT
} mca_coll_loom_path_t;

typedef struct {
    mca_coll_loom_base_component_t super;
    int priority;
    bool enable;
    int verbose;
    /* Testing aid: treat host buffers as device buffers, so the staging path
     * (span arithmetic, copy in/out) runs on machines without a GPU. */
    bool stage_host_buffers;
    /* The application's promise that every collective passes the same kind
     * of memory on every rank (all host or all device buffers): host-buffer
     * calls then go to the previous module even where loom's communicator
     * exists, instead of through loom's kernels and its device scratch. */
    bool uniform_memory;
    /* Non-contiguous datatypes on device buffers packed and unpacked by
     * loom's kernels (coll_loom_dtgpu.h); false: through host copies. */
    bool dt_gpu;
    /* opal_output stream of the component's reports (verbosity: verbose). */
    int output;
} mca_coll_loom_component_t;

LOOM_COMPONENT_DECLSPEC extern mca_coll_loom_component_t mca_coll_loom_component;

typedef struct {
#define LOOM_PREV(name, type)               \
    mca_coll_base_module_##type##_fn_t name; \
    mca_coll_base_module_t *name##_module;
    LOOM_ALL_COLLS(LOOM_PREV)
#undef LOOM_PREV
} mca_coll_loom_previous_t;

/* Whether the loom communicator of a module exists. BROKEN: a host-side
 * step timed out (coll_loom_setup.c); every later call on the module fails. */
enum { LOOM_GPU_UNKNOWN = 0, LOOM_GPU_READY = 1, LOOM_GPU_UNAVAILABLE = 2, LOOM_GPU_BROKEN = 3 };
/* The non-blocking set-up step in flight (coll_loom_defer.h). */
enum { LOOM_NB_IDLE = 0, LOOM_NB_VOTING = 1, LOOM_NB_CREATING = 2, LOOM_NB_CONNECTING = 3 };

struct mca_coll_loom_kept_t;  /* a kept non-blocking call (coll_loom_defer.c) */
struct mca_coll_loom_async_t; /* the loom communicator made on a helper thread (coll_loom_setup.c) */

typedef struct mca_coll_loom_module_t {
    mca_coll_base_module_t super;
    ompi_communicator_t *comm;
    struct loomComm *lcomm; /* created at the first GPU-path call */
    int gpu_state;
    int gpu_device;
    int gpu_capable; /* every rank's process sees a GPU: -1 not probed yet, 0, 1 */
    bool setup_bounded; /* this call's host-side steps wait at most LOOM_TIMEOUT (device buffers here) */
    mca_coll_loom_previous_t prev;
    unsigned char paths_reported[LOOM_COLL_COUNT]; /* bit per mca_coll_loom_path_t */
    bool why_reported[LOOM_COLL_COUNT]; /* per collective: the reason for staging was printed */
    bool host_pack_reported[LOOM_COLL_COUNT]; /* per collective: why a device buffer was packed on the host */
    void *exchange_tables; /* host tables of one exchange call (coll_loom_blocks.c), grown on demand */
    size_t exchange_tables_bytes;
    mca_coll_loom_profile_t *profile; /* LOOM_PROFILE: host time per phase of GPU-path calls (coll_loom_profile.h) */
    bool busy; /* inside a call into its loom communicator: progress leaves its requests alone */
    /* Held (MPI_THREAD_MULTIPLE) while a thread is inside a call into the
     * loom communicator; progress only tries it, and leaves the module's
     * requests to a later pass when another thread holds it (busy covers the
     * same thread re-entering through progress, which OPAL_THREAD_TRYLOCK
     * does not see without threads). */
    opal_mutex_t call_lock;
    pthread_t call_owner; /* the thread inside a call (valid while busy; written before busy) */
    unsigned stalled_pass; /* progress's pass in which one of its requests was found unfinished */
    int staged_pending;    /* its pending requests whose output progress still copies back (atomic) */
    /* Non-blocking set-up (coll_loom_defer.h): kept calls, oldest first; the
     * non-blocking calls counted while no loom communicator exists; the step
     * in flight; the vote's request and
     * buffer; the helper thread's state; the next module with kept calls. */
    struct mca_coll_loom_kept_t *defer_head, *defer_tail;
    uint64_t nb_calls;
    int nb_setup;
    ompi_request_t *vote_req;
    int *vote_buf;      /* [2 in][2 out], heap (leaked if the vote is abandoned) */
    double vote_started;
    bool vote_bounded;  /* this rank's vote call had device buffers: LOOM_TIMEOUT applies */
    bool vote_warned;   /* LOOM_WARN_AFTER passed during the vote and was said */
    int vote_device;    /* the GPU of that call's buffers (-1: this thread's current one) */
    struct mca_coll_loom_async_t *async;
    struct mca_coll_loom_module_t *defer_next;
    bool defer_listed;
    bool pairs_unconnected; /* the non-blocking set-up may still connect its loom communicator's pairs */
    /* The topology's neighbourhood onto loom's exchange (coll_loom_neighbor_map.h; NULL: not built), and
     * whether it fits, agreed when the loom communicator is made (-1: not yet; 0 also without a topology). */
    struct loom_neighbor_map_t *neighbors;
    int neighbor_fit;
} mca_coll_loom_module_t;

OBJ_CLASS_DECLARATION(mca_coll_loom_module_t);
typedef mca_coll_loom_module_t loom_t;
#define LOOM(module) ((loom_t *)(module))

/* component / module */
int mca_coll_loom_init_query(bool enable_progress_threads, bool enable_mpi_threads);

/* Room for the core's tunables (base/param_table.h) as MCA parameters. */
#define LOOM_MAX_CORE_PARAMS 96
/* Sets LOOM_* for every core MCA parameter the user set (environment wins). */
void mca_coll_loom_export_core_params(void);
mca_coll_base_module_t *mca_coll_loom_comm_query(ompi_communicator_t *comm, int *priority);

/* Reports of the component (coll_loom_report.c), at verbose >= 1: one line
 * naming the host, rank and communicator. */
void mca_coll_loom_report(mca_coll_loom_module_t *m, const char *what);
/* Once per (communicator, collective, path) with verbose >= 1. */
void mca_coll_loom_report_path(mca_coll_loom_module_t *m, int coll, mca_coll_loom_path_t path);
/* Once per (communicator, collective) with verbose >= 1: why a call on
 * device buffers was staged. */
void mca_coll_loom_report_why(mca_coll_loom_module_t *m, int coll, const char *why);

static inline void mca_coll_loom_note(mca_coll_loom_module_t *m, int coll, mca_coll_loom_path_t path)
{
    if (OPAL_UNLIKELY(mca_coll_loom_component.verbose > 0) && !(m->paths_reported[coll] & (1u << path))) {
        mca_coll_loom_report_path(m, coll, path);
    }
}

/* Blocks of a collective's per-peer buffers: one per rank of the remote group
 * on an intercommunicator, of the group itself otherwise (Open MPI's
 * ompi_comm_remote_size is 0 on an intracommunicator). */
static inline size_t mca_coll_loom_peers(ompi_communicator_t *comm)
{
    return (size_t)(OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm));
}

/* Takes (delta +1) or drops (-1) a reference on an Open MPI object (a
 * datatype, an op); NULL: nothing. */
static inline void mca_coll_loom_hold(void *object, int delta)
{
    opal_object_t *o = (opal_object_t *)object;
    if (NULL == o) return;
    if (delta > 0) {
        OBJ_RETAIN(o);
    } else {
        OBJ_RELEASE(o);
    }
}

/* Whether this rank is a rooted collective's root: its own rank on an
 * intracommunicator, MPI_ROOT on an intercommunicator. */
static inline bool mca_coll_loom_is_root(ompi_communicator_t *comm, int root)
{
    return OMPI_COMM_IS_INTER(comm) ? MPI_ROOT == root : ompi_comm_rank(comm) == root;
}

/* Whether this rank's non-root buffer (what it sends to a root or receives
 * from one) takes part: every rank's, the root's too, on an
 * intracommunicator; on an intercommunicator only the other group's (the
 * root's group passes MPI_ROOT or MPI_PROC_NULL). */
static inline bool mca_coll_loom_is_leaf(ompi_communicator_t *comm, int root)
{
    return !OMPI_COMM_IS_INTER(comm) || (MPI_ROOT != root && MPI_PROC_NULL != root);
}

/* Call the previous module's function: blocking when req is NULL, otherwise
 * its non-blocking twin (name prefixed with i). */
#define LOOM_CALL_PREV(m, req, name, ...)                                            \
    ((req) ? (m)->prev.i##name(__VA_ARGS__, (req), (m)->prev.i##name##_module)       \
           : (m)->prev.name(__VA_ARGS__, (m)->prev.name##_module))

/* The overrides, blocking and non-blocking, declared with exactly the types of
 * Open MPI's function pointers (typeof of the pointee is a function type). */
#define LOOM_DECLARE_OVERRIDE(name, type) __typeof__(*(mca_coll_base_module_##type##_fn_t)0) mca_coll_loom_##name;
LOOM_ALL_COLLS(LOOM_DECLARE_OVERRIDE)
#undef LOOM_DECLARE_OVERRIDE

END_C_DECLS

#endif /* MCA_COLL_LOOM_H */
