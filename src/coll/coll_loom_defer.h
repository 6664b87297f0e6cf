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
 * Persistent collectives go through the same dispatcher at each MPI_Start
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

#include "coll_loom_args.h"

/* The dispatcher every override calls (coll_loom_overrides.c), and every
 * persistent start: a blocking call (req NULL) first waits until m's kept
 * calls have started (mca_coll_loom_defer_settle), once, then runs; a
 * non-blocking one is kept where it must wait (mca_coll_loom_defer), else
 * runs. Running is the collective's runner (coll_loom_args.h); a kept
 * call's start runs it too, never the override. */
int mca_coll_loom_dispatch(const mca_coll_loom_call_args_t *a, ompi_request_t **req);


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

#endif
