/*
 * Kept non-blocking calls and the votes that decide where they go
 * (coll_loom_defer.h says why). Everything here runs on the thread that
 * makes the call or on the one that progresses MPI; the loom communicator
 * itself is made on a helper thread (coll_loom_setup.c).
 */
#include "coll_loom_defer.h"

#include <stdlib.h>

#include "base/mono_clock.h"
#include "coll_loom_profile.h"
#include "coll_loom_setup.h"
#include "coll_loom_request.h"
#include "coll_loom_stage.h"
#include "base/param_table.h"
#include "loom_component.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

typedef struct mca_coll_loom_kept_t {
    mca_coll_loom_call_args_t args;
    uint64_t index;       /* its number among the communicator's non-blocking calls */
    bool voted;           /* its vote is done (or running) */
    bool paired;          /* its connection of every pair is done (or running) */
    pthread_t owner;      /* the thread that made the call: only it starts it */
    ompi_request_t *req;  /* what the caller got: follows the call once started */
    struct mca_coll_loom_kept_t *next;
} kept_t;

/* defer_lock guards the queues and the list of modules with kept calls
 * (short sections, no call inside); pump_lock lets one thread at a time
 * start kept calls (t_pumping: this thread holds it, and comes back through
 * progress). */
static opal_mutex_t defer_lock = OPAL_MUTEX_STATIC_INIT;
static opal_mutex_t pump_lock = OPAL_MUTEX_STATIC_INIT;
static __thread bool t_pumping = false;
static mca_coll_loom_module_t *listed_head = NULL;
static bool progress_registered = false;
static int defer_progress(void);

/* 1, 2, 4, ..., 64, then every 64th. */
static bool vote_point(uint64_t index)
{
    return index <= 64 ? 0 == (index & (index - 1)) : 0 == index % 64;
}

/* Whether the call numbered index asks the vote: only while no loom
 * communicator exists, where no rank is known to lack a GPU, the previous
 * module can carry it and the creation's steps (the helper thread posts
 * nothing blocking), and LOOM_NONBLOCKING_SETUP allows it. The state it
 * reads changes only at points every rank passes in the same order. */
static bool should_vote(const mca_coll_loom_module_t *m, uint64_t index)
{
    return LOOM_GPU_UNKNOWN == m->gpu_state && 0 != m->gpu_capable && vote_point(index) &&
           NULL != m->prev.iallreduce && NULL != m->prev.iallgather && NULL != m->prev.ibcast &&
           !OMPI_COMM_IS_INTER(m->comm) && mca_coll_loom_nonblocking_setup();
}

/* Whether the call (collective coll) waits for every pair of ranks to be
 * connected first: an exchange (a neighbourhood one too) or a scan, on a loom communicator whose pairs
 * are not connected and that the non-blocking set-up has not tried to
 * connect (alike on every rank: both change at calls every rank makes in
 * the same order). */
static bool wants_pairs(mca_coll_loom_module_t *m, int coll)
{
    if (LOOM_GPU_READY != m->gpu_state || !m->pairs_unconnected || !mca_coll_loom_nonblocking_setup()) return false;
    switch (coll) {
    case LOOM_COLL_ialltoall: case LOOM_COLL_ialltoallv: case LOOM_COLL_ialltoallw:
    case LOOM_COLL_igather: case LOOM_COLL_igatherv:
    case LOOM_COLL_iscatter: case LOOM_COLL_iscatterv: case LOOM_COLL_iscan: case LOOM_COLL_iexscan: break;
    /* the neighbourhood ones run as the exchange where the topology fits it (agreed) */
    case LOOM_COLL_ineighbor_allgather: case LOOM_COLL_ineighbor_allgatherv: case LOOM_COLL_ineighbor_alltoall:
    case LOOM_COLL_ineighbor_alltoallv: case LOOM_COLL_ineighbor_alltoallw:
        if (1 != m->neighbor_fit) return false;
        break;
    default: return false;
    }
    int connected = 0;
    if (loomSuccess == loomCommPeersConnected(m->lcomm, &connected) && connected) {
        m->pairs_unconnected = false; /* a blocking exchange connected them */
        return false;
    }
    return true;
}

/* The GPU of a call's buffers on this rank (-1: both in host memory). */
static int buffers_device(const mca_coll_loom_call_args_t *a, bool *on_gpu)
{
    loomPointerInfo_t info = {loomMemoryHost, -1};
    const void *bufs[2] = {a->rbuf, MPI_IN_PLACE == a->sbuf ? NULL : a->sbuf};
    for (int i = 0; i < 2; ++i) {
        if (NULL == bufs[i]) continue;
        info = mca_coll_loom_where(bufs[i]);
        if (loomMemoryHost != info.kind) break;
    }
    *on_gpu = loomMemoryHost != info.kind || (mca_coll_loom_component.stage_host_buffers &&
                                             (NULL != bufs[0] || NULL != bufs[1]));
    return loomMemoryHost != info.kind ? info.device : -1;
}

/* The vote of the kept call at the head: every rank posts it at the same
 * call. In: [some rank sees no GPU, this rank passed device buffers]; MAX. */
static void post_vote(mca_coll_loom_module_t *m, kept_t *k)
{
    k->voted = true;
    bool on_gpu = false;
    m->vote_device = buffers_device(&k->args, &on_gpu);
    m->vote_bounded = on_gpu;
    m->vote_buf = (int *)calloc(4, sizeof(int));
    int rc = NULL == m->vote_buf ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    if (MPI_SUCCESS == rc) {
        m->vote_buf[0] = loomCudaDeviceCount() > 0 ? 0 : 1;
        m->vote_buf[1] = on_gpu;
        m->vote_req = MPI_REQUEST_NULL;
        rc = m->prev.iallreduce(m->vote_buf, m->vote_buf + 2, 2, MPI_INT, MPI_MAX, m->comm, &m->vote_req,
                                m->prev.iallreduce_module);
    }
    if (MPI_SUCCESS != rc) { /* this rank cannot vote: the others would wait for it */
        opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: the non-blocking set-up's vote "
                    "could not be posted (error %d): communicator unusable for collectives",
                    ompi_comm_rank(m->comm), m->comm->c_name, rc);
        free(m->vote_buf);
        m->vote_buf = NULL;
        m->gpu_state = LOOM_GPU_BROKEN;
        return;
    }
    m->vote_started = loomMonotonicSeconds();
    m->vote_warned = false;
    m->nb_setup = LOOM_NB_VOTING;
}

/* The vote's outcome, once it is in: false while it is not. */
static bool vote_done(mca_coll_loom_module_t *m)
{
    if (!REQUEST_COMPLETE(m->vote_req)) {
        const double timeout = (double)loomParamLong("LOOM_TIMEOUT"), waited = loomMonotonicSeconds() - m->vote_started;
        const double warn_after = (double)loomParamLong("LOOM_WARN_AFTER");
        if (m->vote_bounded && !m->vote_warned && warn_after > 0 && waited >= warn_after) {
            m->vote_warned = true;
            opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s (cid %u): the non-blocking "
                        "set-up's vote has waited %.0f s for some rank of the %d; waiting on (a late rank is not an "
                        "error; LOOM_TIMEOUT bounds the wait)", ompi_comm_rank(m->comm), m->comm->c_name,
                        mca_coll_loom_comm_cid(m->comm), waited, ompi_comm_size(m->comm));
        }
        if (!m->vote_bounded || timeout <= 0 || waited <= timeout) return false;
        opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s (cid %u): the non-blocking set-up's "
                    "vote: some rank of the %d did not arrive within %.0f s (LOOM_TIMEOUT); this rank passed device "
                    "buffers and gives up: communicator unusable for collectives", ompi_comm_rank(m->comm),
                    m->comm->c_name, mca_coll_loom_comm_cid(m->comm), ompi_comm_size(m->comm), timeout);
        m->gpu_state = LOOM_GPU_BROKEN; /* the request and its buffer are abandoned (it may still complete) */
        m->vote_req = MPI_REQUEST_NULL;
        m->vote_buf = NULL;
        m->nb_setup = LOOM_NB_IDLE;
        return true;
    }
    const int rc = m->vote_req->req_status.MPI_ERROR;
    const int no_gpu = m->vote_buf[2], any_device = m->vote_buf[3];
    free(m->vote_buf);
    m->vote_buf = NULL;
    m->nb_setup = LOOM_NB_IDLE; /* before the free: the settled state is what anything it runs sees */
    ompi_request_free(&m->vote_req);
    if (MPI_SUCCESS != rc) {
        opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: the non-blocking set-up's vote "
                    "failed (error %d): communicator unusable for collectives", ompi_comm_rank(m->comm),
                    m->comm->c_name, rc);
        m->gpu_state = LOOM_GPU_BROKEN;
    } else if (no_gpu) {
        m->gpu_capable = 0;
        m->gpu_state = LOOM_GPU_UNAVAILABLE;
    } else {
        m->gpu_capable = 1;
        if (any_device) {
            const int device = m->vote_device >= 0 ? m->vote_device : loomCudaCurrentDevice();
            mca_coll_loom_setup_bound(m, m->vote_bounded);
            if (mca_coll_loom_create_comm_start(m, device)) m->nb_setup = LOOM_NB_CREATING;
        }
    }
    return true;
}

/* Takes the head of m's queue (under defer_lock). */
static kept_t *pop_head(mca_coll_loom_module_t *m)
{
    OPAL_THREAD_LOCK(&defer_lock);
    kept_t *k = m->defer_head;
    m->defer_head = k->next;
    if (NULL == m->defer_head) m->defer_tail = NULL;
    OPAL_THREAD_UNLOCK(&defer_lock);
    return k;
}

/* Moves m's set-up on and starts the kept calls it allows, in order; the
 * number of calls started. A kept call starts on the thread that made it
 * (any thread moves the set-up on): its kernel is launched in that thread's
 * order of calls, as it would have been without keeping, and with that
 * thread's current device. Launched from whichever thread progressed, two
 * communicators' kernels went in a different order on each rank, and 3 in
 * 12 runs of test/gpu/coll_threads hung (2x H200). force: the module goes
 * away, any thread starts them. */
static int pump(mca_coll_loom_module_t *m, bool force)
{
    int started = 0;
    for (;;) {
        if (LOOM_NB_VOTING == m->nb_setup && !vote_done(m)) return started;
        if (LOOM_NB_CREATING == m->nb_setup || LOOM_NB_CONNECTING == m->nb_setup) {
            if (!mca_coll_loom_create_comm_poll(m)) return started;
            m->nb_setup = LOOM_NB_IDLE;
        }
        kept_t *k = m->defer_head; /* only this (pumping) thread takes from the head */
        if (NULL == k || (!force && !pthread_equal(k->owner, pthread_self()))) return started;
        if (!k->voted && should_vote(m, k->index)) {
            post_vote(m, k);
            continue;
        }
        if (!k->paired && wants_pairs(m, k->args.coll)) {
            /* Once the communicator's earlier calls are done: nothing else
             * uses the loom communicator while the helper connects. */
            if (mca_coll_loom_requests_pending(m)) return started;
            k->paired = true;
            bool on_gpu = false;
            buffers_device(&k->args, &on_gpu);
            mca_coll_loom_setup_bound(m, on_gpu);
            if (mca_coll_loom_connect_peers_start(m)) m->nb_setup = LOOM_NB_CONNECTING;
            continue;
        }
        /* Started while still at the head: another thread's call on m
         * meanwhile is kept behind it. Its runner, not its override: it is
         * not kept again. */
        ompi_request_t *inner = MPI_REQUEST_NULL;
        int rc = mca_coll_loom_run(&k->args, &inner);
        /* Its request takes its place in the pending list before the head
         * goes: until then another thread's call on m is still kept behind
         * it, and cannot take a place before it. */
        mca_coll_loom_request_follow(k->req, rc, inner);
        pop_head(m);
        free(k);
        ++started;
    }
}

/* Every listed module's pump; modules with nothing left leave the list. */
static int pump_all(const mca_coll_loom_module_t *force)
{
    if (t_pumping) return 0; /* this thread, back through progress */
    if (OPAL_THREAD_TRYLOCK(&pump_lock)) return 0;
    t_pumping = true;
    int started = 0;
    for (mca_coll_loom_module_t *m = listed_head; NULL != m; m = m->defer_next)
        if (!__atomic_load_n(&m->busy, __ATOMIC_ACQUIRE)) started += pump(m, m == force);
    OPAL_THREAD_LOCK(&defer_lock);
    for (mca_coll_loom_module_t **p = &listed_head; NULL != *p;) {
        mca_coll_loom_module_t *m = *p;
        if (mca_coll_loom_defer_busy(m)) {
            p = &m->defer_next;
            continue;
        }
        *p = m->defer_next;
        m->defer_next = NULL;
        m->defer_listed = false;
    }
    OPAL_THREAD_UNLOCK(&defer_lock);
    t_pumping = false;
    OPAL_THREAD_UNLOCK(&pump_lock);
    return started;
}

static int defer_progress(void)
{
    if (NULL == listed_head) return 0; /* a racy peek: a module listed meanwhile waits for the next pass */
    return pump_all(NULL);
}

/* Whether a non-blocking call on m may have to wait (no loom communicator
 * yet, calls waiting, pairs maybe still to connect): mca_coll_loom_defer
 * then counts it and decides. */
static bool may_defer(const mca_coll_loom_module_t *m)
{
    return LOOM_GPU_UNKNOWN == m->gpu_state || NULL != m->defer_head || m->pairs_unconnected;
}

/* Counts the call; true when it was kept (*req is then its request, *rc
 * MPI_SUCCESS or the error of keeping it), false when it runs now. */
static bool keep(const mca_coll_loom_call_args_t *a, ompi_request_t **req, int *rc)
{
    mca_coll_loom_module_t *m = a->m;
    const uint64_t index = ++m->nb_calls;
    *rc = MPI_SUCCESS;
    /* Kept: behind others, behind a step in flight, or at a vote. */
    if (!mca_coll_loom_defer_busy(m) && !should_vote(m, index) && !wants_pairs(m, a->coll)) return false;
    kept_t *k = (kept_t *)calloc(1, sizeof(*k));
    if (NULL == k) {
        *rc = MPI_ERR_NO_MEM;
        return true;
    }
    k->args = *a;
    k->index = index;
    k->owner = pthread_self();
    *rc = mca_coll_loom_request_kept(m, &k->req);
    if (MPI_SUCCESS != *rc) {
        free(k);
        return true;
    }
    ompi_request_t *kept = k->req; /* k is another thread's progress's once linked */
    OPAL_THREAD_LOCK(&defer_lock);
    if (NULL == m->defer_tail) m->defer_head = k;
    else m->defer_tail->next = k;
    m->defer_tail = k;
    if (!m->defer_listed) {
        m->defer_listed = true;
        m->defer_next = listed_head;
        listed_head = m;
    }
    if (!progress_registered) progress_registered = OPAL_SUCCESS == opal_progress_register(defer_progress);
    OPAL_THREAD_UNLOCK(&defer_lock);
    *req = kept;
    pump_all(NULL); /* the vote goes out now; a settled module starts the call now */
    return true;
}

static int dispatch_call(const mca_coll_loom_call_args_t *a, ompi_request_t **req)
{
    if (NULL == req) {
        mca_coll_loom_defer_settle(a->m);
    } else if (may_defer(a->m)) {
        int rc = MPI_SUCCESS;
        if (keep(a, req, &rc)) return rc;
    }
    return mca_coll_loom_run(a, req);
}

int mca_coll_loom_dispatch(const mca_coll_loom_call_args_t *a, ompi_request_t **req)
{
    mca_coll_loom_profile_entered();
    mca_coll_loom_where_enter(); /* the call's pointer memo (coll_loom_where_memo.h) */
    const int rc = dispatch_call(a, req);
    mca_coll_loom_where_leave();
    return rc;
}

void mca_coll_loom_defer_settle(mca_coll_loom_module_t *m)
{
    if (t_pumping && mca_coll_loom_defer_busy(m)) {
        /* A blocking call, or a communicator freed, from inside a kept call's
         * start on this thread: the pump is below us and cannot run. */
        opal_output(mca_coll_loom_component.output, "coll/loom rank %d comm %s: a blocking call or a free from "
                    "inside the start of a kept non-blocking call; its kept calls are left as they are",
                    ompi_comm_rank(m->comm), m->comm->c_name);
        return;
    }
    while (mca_coll_loom_defer_busy(m)) {
        pump_all(m);
        if (mca_coll_loom_defer_busy(m)) opal_progress();
    }
}

void mca_coll_loom_defer_forget(mca_coll_loom_module_t *m)
{
    mca_coll_loom_defer_settle(m);
    if (!m->defer_listed) return;
    const bool lock = !t_pumping; /* inside a pump of this thread: its walk is below us, and holds the lock */
    if (lock) OPAL_THREAD_LOCK(&pump_lock);
    OPAL_THREAD_LOCK(&defer_lock);
    for (mca_coll_loom_module_t **p = &listed_head; NULL != *p; p = &(*p)->defer_next) {
        if (*p != m) continue;
        *p = m->defer_next;
        break;
    }
    m->defer_next = NULL;
    m->defer_listed = false;
    OPAL_THREAD_UNLOCK(&defer_lock);
    if (lock) OPAL_THREAD_UNLOCK(&pump_lock);
}

void mca_coll_loom_defer_fini(void)
{
    if (progress_registered) opal_progress_unregister(defer_progress);
    progress_registered = false;
}
