/*
 * Non-blocking calls that come before a communicator's loom communicator
 * exists: the one-time set-up runs inside progress, and the calls wait for
 * it in a queue, so that no non-blocking call ever waits on the host for
 * other ranks.
 *
 * Why a queue: every rank must send a given call down the same path (loom's
 * kernels, or the previous module), and the set-up ends at a different call
 * on each rank. A rank that has not settled when a call comes keeps the call
 * (its arguments: MPI forbids touching them, count arrays included, until
 * completion) and starts it once settled, in issue order, with the settled
 * state. The result is the same on every rank because the state a call is
 * started with depends only on agreed outcomes, never on timing.
 *
 * Votes. While no loom communicator exists, the communicator's non-blocking
 * calls number 1, 2, 3, ... (every call counts, on every rank). Calls 1, 2,
 * 4, ..., 64 and every 64th after are vote points: the call waits while an
 * MPI_Iallreduce of the previous module asks whether every rank sees a GPU
 * and whether any rank passed device buffers to this call. Both: the loom
 * communicator is made (on a helper thread whose MPI steps the progressing
 * thread posts and tests: coll_loom_setup.c) and this call and the ones
 * queued behind it take loom's kernels. Some rank without a GPU: never
 * again. Host buffers everywhere: the calls go on to the previous module and
 * the next vote point asks again (a host-only program pays one extra round
 * trip at a vanishing fraction of its calls).
 *
 * Pairs. The exchanges and scans (alltoall(v, w), gather(v), scatter(v), scan,
 * exscan) need every pair of ranks connected, a collective step of its own.
 * A non-blocking one that finds its loom communicator without them is kept
 * too (every rank finds the same: the state changes only at calls every
 * rank makes in the same order): once the communicator's earlier requests
 * are done (nothing else touches the loom communicator then), the pairs are
 * connected on a helper thread as above, and the call takes loom's kernels.
 *
 * A blocking call first waits until its communicator's queue is empty (it
 * may wait for other ranks; it keeps the previous module's operations in the
 * same order on every rank).
 *
 * Persistent collectives go through the same overrides at each MPI_Start
 * (loom takes every *_init slot: coll_loom_persistent.c), so they are kept
 * alike.
 *
 * Limit. A kept call launches
 * when it starts, so two communicators' kernels may be launched in another
 * order on another rank than the program's (each communicator's own order
 * holds), as with NCCL communicators used from several streams.
 */
#ifndef COLL_LOOM_DEFER_H
#define COLL_LOOM_DEFER_H

#include "coll_loom.h"

/* One call's arguments, as its override received them (the fields its
 * signature has; the others zero). */
typedef struct mca_coll_loom_call_args_t {
    int coll; /* LOOM_COLL_i<name> */
    mca_coll_loom_module_t *m;
    ompi_communicator_t *comm;
    const void *sbuf;
    void *rbuf;
    int scount, rcount, root;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    const MPI_Aint *sdispls_a, *rdispls_a; /* ineighbor_alltoallw */
    ompi_datatype_t *sdt, *rdt;
    ompi_datatype_t *const *sdts, *const *rdts; /* the w-forms */
    struct ompi_op_t *op;
} mca_coll_loom_call_args_t;

/* The module whose kept call this thread is starting (NULL: none): that
 * call runs, it is not kept again. Per thread: another thread's call on the
 * module meanwhile is kept (the call being started is still at the head). */
extern __thread const mca_coll_loom_module_t *mca_coll_loom_replaying;

/* Runs the non-blocking override that a's collective names with a's
 * arguments (*req: its request); a kept call's start, a persistent one's. */
int mca_coll_loom_call_start(const mca_coll_loom_call_args_t *a, ompi_request_t **req);

/* Whether a non-blocking call on m must go through mca_coll_loom_defer (no
 * loom communicator yet, calls waiting, pairs maybe still to connect). */
static inline bool mca_coll_loom_may_defer(const mca_coll_loom_module_t *m)
{
    return mca_coll_loom_replaying != m && (LOOM_GPU_UNKNOWN == m->gpu_state || NULL != m->defer_head || m->pairs_unconnected);
}

/* Counts the call; true when it was kept (*req is then its request, *rc
 * MPI_SUCCESS or the error of keeping it), false when it runs now. */
bool mca_coll_loom_defer(const mca_coll_loom_call_args_t *a, ompi_request_t **req, int *rc);

/* Blocking calls: until m's kept calls have all started and no set-up step
 * is in flight (progressing MPI). */
void mca_coll_loom_defer_settle(mca_coll_loom_module_t *m);

/* Whether m has kept calls or a set-up step in flight. */
static inline bool mca_coll_loom_defer_busy(const mca_coll_loom_module_t *m)
{
    return NULL != m->defer_head || LOOM_NB_IDLE != m->nb_setup;
}

/* A module going away: settles, then leaves the list progress walks. */
void mca_coll_loom_defer_forget(mca_coll_loom_module_t *m);
/* Component close. */
void mca_coll_loom_defer_fini(void);

/* At the top of every non-blocking override (comm and req in scope): keep
 * the call when it must wait. The fields are designated initializers of
 * mca_coll_loom_call_args_t. */
#define LOOM_DEFER(module, ...)                                                           \
    do {                                                                                   \
        mca_coll_loom_module_t *dm_ = (mca_coll_loom_module_t *)(module);                  \
        if (mca_coll_loom_may_defer(dm_)) {                                                \
            const mca_coll_loom_call_args_t da_ = {.m = dm_, .comm = comm, __VA_ARGS__};   \
            int drc_ = MPI_SUCCESS;                                                        \
            if (mca_coll_loom_defer(&da_, req, &drc_)) return drc_;                        \
        }                                                                                  \
    } while (0)

#endif
