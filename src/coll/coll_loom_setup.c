/*
 * loom's host-side steps, through the previous module: the probe (does every
 * rank see a GPU?), the per-call agreement while no loom communicator exists
 * (does any rank pass device buffers?), and the creation of the loom
 * communicator (unique id broadcast, the core's bootstrap allgathers, the
 * agreement that every rank succeeded).
 *
 * Every rank runs the one-time steps (probe, creation) as the previous
 * module's non-blocking twins (a blocking and a non-blocking collective never
 * match, and ranks may differ in where their buffers are). A rank that passes
 * device buffers waits for each as long as MPI would (a late rank is not an
 * error), saying once after LOOM_WARN_AFTER seconds which ranks have not
 * arrived; where LOOM_TIMEOUT is set, it gives up after that long with an
 * MPI error instead (the same bound as loom's kernels). A dead peer is the
 * MPI library's to report here (ULFM). Ranks with host buffers only wait as
 * MPI always does. A step that timed out leaves a request in flight that may still
 * complete (the late rank may arrive): it is never freed or waited for again,
 * its buffers are heap memory that is leaked on purpose, and the module is
 * broken from then on (every later call on it fails).
 *
 * A rank that gives up names the ranks that are missing: the others answer
 * roll calls while they wait in a step (coll_loom_roll_call.h).
 *
 * The per-call agreement stays blocking and unbounded: every host-buffer
 * call pays it until a loom communicator exists, and the non-blocking twin
 * costs about twice as much (docs/performance.md, "Measurements behind the
 * code"). So a rank that never arrives at a
 * communicator's first device-buffer call is caught only where that call is
 * also the communicator's first collective (the probe).
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_loom_setup.h"
#include "base/mono_clock.h"
#include "coll_loom_roll_call.h"
#include "coll_loom_neighbor_map.h"
#include "base/param_table.h"
#include "loom_component.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "opal/util/output.h"

/* Completes *req: unbounded on host-buffer ranks and where LOOM_TIMEOUT is
 * 0; else until LOOM_TIMEOUT, after which the module is broken and the
 * request abandoned. Either way the rank answers roll calls while it waits
 * (coll_loom_roll_call.h); one with device buffers calls the roll once after
 * LOOM_WARN_AFTER to say who is missing (and waits on), and again when it
 * gives up. */
static int finish_step(mca_coll_loom_module_t *m, ompi_request_t **req, const char *step)
{
    int done = 0;
    int rc = ompi_request_test(req, &done, MPI_STATUS_IGNORE); /* peers that are there answer at once */
    if (MPI_SUCCESS != rc || done) return rc;
    mca_coll_loom_roll_listen_t listen = {NULL, 0, NULL};
    bool listening = false;
    const double timeout = (double)loomParamLong("LOOM_TIMEOUT"), start = loomMonotonicSeconds(), end = start + timeout;
    const double warn_after = (double)loomParamLong("LOOM_WARN_AFTER");
    bool warned = false;
    for (;;) {
        rc = ompi_request_test(req, &done, MPI_STATUS_IGNORE); /* progresses MPI */
        if (MPI_SUCCESS != rc || done) {
            mca_coll_loom_roll_unlisten(m, &listen);
            return rc;
        }
        const double t = loomMonotonicSeconds();
        /* Past the first millisecond, roll calls are answered (questions
         * that came before wait in the queue for the receive). */
        if (!listening && t - start >= 1e-3) {
            mca_coll_loom_roll_listen(m, &listen);
            listening = true;
        }
        mca_coll_loom_roll_answer(m, &listen);
        if (m->setup_bounded && timeout > 0 && t > end) break;
        if (m->setup_bounded && !warned && warn_after > 0 && t - start >= warn_after) {
            char host[64] = "?", missing[640];
            gethostname(host, sizeof(host) - 1);
            mca_coll_loom_roll_call(m, &listen, missing, sizeof(missing));
            opal_output(mca_coll_loom_component.output,
                        "coll/loom %s rank %d comm %s (cid %u): %s has waited %.0f s: %s; waiting on (a late rank is "
                        "not an error; LOOM_TIMEOUT bounds the wait)", host, ompi_comm_rank(m->comm), m->comm->c_name,
                        mca_coll_loom_comm_cid(m->comm), step, t - start, missing);
            warned = true;
        }
        /* Spin the first millisecond (peers that are there answer in
         * microseconds), then nap: a rank waiting for a late peer must not
         * take a core from the ones still working. A rank with host buffers
         * keeps spinning, as the MPI wait it replaces did. */
        if (t - start < 1e-3 || !m->setup_bounded) {
            sched_yield();
        } else {
            const struct timespec nap = {0, 100 * 1000};
            nanosleep(&nap, NULL);
        }
    }
    char host[64] = "?", missing[640];
    gethostname(host, sizeof(host) - 1);
    mca_coll_loom_roll_call(m, &listen, missing, sizeof(missing));
    mca_coll_loom_roll_unlisten(m, &listen);
    m->gpu_state = LOOM_GPU_BROKEN;
    opal_output(mca_coll_loom_component.output,
                "coll/loom %s rank %d comm %s (cid %u): %s: some rank of the %d did not arrive within %.0f s "
                "(LOOM_TIMEOUT): %s; this rank passed device buffers and gives up: communicator unusable for "
                "collectives", host, ompi_comm_rank(m->comm), m->comm->c_name, mca_coll_loom_comm_cid(m->comm), step,
                ompi_comm_size(m->comm), timeout, missing);
    return MPI_ERR_OTHER;
}

/* One host-side step as the previous module's non-blocking twin: an
 * agreement (MIN/MAX of an int: buf [in, out]), an allgather of `bytes` per
 * rank (buf [mine][everyone's]) or rank 0's `bytes` to all (buf). */
typedef struct {
    enum { STEP_AGREE, STEP_ALLGATHER, STEP_BCAST } kind;
    void *buf;
    size_t bytes;
    struct ompi_op_t *op;
} setup_step_t;

static int post_step(mca_coll_loom_module_t *m, const setup_step_t *st, ompi_request_t **req)
{
    char *buf = (char *)st->buf;
    switch (st->kind) {
    case STEP_AGREE:
        return m->prev.iallreduce(buf, buf + sizeof(int), 1, MPI_INT, st->op, m->comm, req, m->prev.iallreduce_module);
    case STEP_ALLGATHER:
        return m->prev.iallgather(buf, (int)st->bytes, MPI_BYTE, buf + st->bytes, (int)st->bytes, MPI_BYTE, m->comm,
                                  req, m->prev.iallgather_module);
    default: return m->prev.ibcast(buf, (int)st->bytes, MPI_BYTE, 0, m->comm, req, m->prev.ibcast_module);
    }
}

/* The loom communicator made on a helper thread for the non-blocking
 * set-up (coll_loom_defer.h): the helper runs the same creation as a
 * blocking call; each of its MPI steps is handed to the thread that
 * progresses MPI (only it calls into MPI, whatever the thread level), which
 * posts it and tests it at each pass (mca_coll_loom_create_comm_poll). */
struct mca_coll_loom_async_t {
    bool connect; /* the helper connects every pair (else: makes the loom communicator) */
    pthread_t thread;
    pthread_mutex_t lock; /* guards what follows; cond: a step finished */
    pthread_cond_t cond;
    int device;
    enum { JOB_NONE, JOB_ASKED, JOB_POSTED, JOB_DONE } job;
    const setup_step_t *step;
    const char *step_name;
    ompi_request_t *req;
    int rc;
    double started;
    bool finished; /* the helper is done: made says whether the communicator exists */
    int made;
    char msg[768]; /* what the helper would have printed (printed by the progressing thread) */
    int msg_level; /* 0: always, else opal_output_verbose's level */
};

/* The module whose helper this thread is (NULL on every other thread). */
static __thread mca_coll_loom_module_t *t_helper_of = NULL;

/* Runs a step and waits for it: posted here and completed by finish_step,
 * or, on a helper thread, handed to the progressing thread. */
static int run_step(mca_coll_loom_module_t *m, const setup_step_t *st, const char *name)
{
    if (t_helper_of != m) {
        ompi_request_t *req = MPI_REQUEST_NULL;
        int rc = post_step(m, st, &req);
        return MPI_SUCCESS == rc ? finish_step(m, &req, name) : rc;
    }
    struct mca_coll_loom_async_t *a = m->async;
    pthread_mutex_lock(&a->lock);
    a->step = st;
    a->step_name = name;
    a->job = JOB_ASKED;
    while (JOB_DONE != a->job) pthread_cond_wait(&a->cond, &a->lock);
    a->job = JOB_NONE;
    const int rc = a->rc;
    pthread_mutex_unlock(&a->lock);
    return rc;
}

/* MIN or MAX of a flag over the communicator; *all is untouched on error.
 * per_call: the agreement of every call while no loom communicator exists,
 * blocking and unbounded on every rank (see the top). */
static int agree(mca_coll_loom_module_t *m, int mine, struct ompi_op_t *op, const char *step, bool per_call,
                 int *all)
{
    if (per_call || NULL == m->prev.iallreduce)
        return m->prev.allreduce(&mine, all, 1, MPI_INT, op, m->comm, m->prev.allreduce_module);
    int *buf = (int *)malloc(2 * sizeof(int)); /* leaked if the step times out */
    if (NULL == buf) return MPI_ERR_NO_MEM;
    buf[0] = mine;
    const setup_step_t st = {STEP_AGREE, buf, sizeof(int), op};
    int rc = run_step(m, &st, step);
    if (LOOM_GPU_BROKEN == m->gpu_state) return rc;
    if (MPI_SUCCESS == rc) *all = buf[1];
    free(buf);
    return rc;
}

/* The same agreement, 0 when it failed (a rank that cannot agree stays off). */
static int agreed(mca_coll_loom_module_t *m, int mine, struct ompi_op_t *op, const char *step)
{
    int all = 0;
    return MPI_SUCCESS == agree(m, mine, op, step, false, &all) ? all : 0;
}

/* Bootstrap for loom's core: an allgather through the previous module, via
 * heap copies (the core's buffers go away when it gives up; an abandoned
 * request may still write). */
static int bootstrap_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    mca_coll_loom_module_t *m = (mca_coll_loom_module_t *)ctx;
    if (LOOM_GPU_BROKEN == m->gpu_state) return 1;
    if (NULL == m->prev.iallgather)
        return m->prev.allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->comm,
                                 m->prev.allgather_module);
    const size_t n = (size_t)ompi_comm_size(m->comm);
    char *buf = (char *)malloc(bytes * (n + 1)); /* [mine][everyone's]; leaked on a time-out */
    if (NULL == buf) return 1;
    memcpy(buf, send, bytes);
    const setup_step_t st = {STEP_ALLGATHER, buf, bytes, NULL};
    int rc = run_step(m, &st, "creating the loom communicator (bootstrap exchange)");
    if (LOOM_GPU_BROKEN == m->gpu_state) return 1;
    if (MPI_SUCCESS == rc) memcpy(recv, buf + bytes, bytes * n);
    free(buf);
    return MPI_SUCCESS == rc ? 0 : 1;
}

/* The core's per-call records between pairs (descriptions of buffers that
 * peers read in place, during an exchange): point-to-point messages on the
 * PML under the alltoallv tag (blocking collectives on a communicator do not
 * overlap), each completed like a setup step (bounded where this rank passes
 * device buffers). Heap copies, leaked if a step times out, as above. */
static int bootstrap_pairwise(void *ctx, int nsend, const int *to, const void *send, int nrecv, const int *from,
                              void *recv, size_t bytes)
{
    mca_coll_loom_module_t *m = (mca_coll_loom_module_t *)ctx;
    if (LOOM_GPU_BROKEN == m->gpu_state) return 1;
    const size_t nreq = (size_t)nsend + (size_t)nrecv;
    char *buf = (char *)malloc(bytes * nreq + 1);
    ompi_request_t **reqs = (ompi_request_t **)calloc(nreq + 1, sizeof(*reqs));
    if (NULL == buf || NULL == reqs) {
        free(buf);
        free(reqs);
        return 1;
    }
    memcpy(buf + bytes * (size_t)nrecv, send, bytes * (size_t)nsend);
    int rc = MPI_SUCCESS;
    size_t posted = 0;
    for (int j = 0; j < nrecv && MPI_SUCCESS == rc; ++j, ++posted)
        rc = MCA_PML_CALL(irecv(buf + bytes * (size_t)j, bytes, MPI_BYTE, from[j], MCA_COLL_BASE_TAG_ALLTOALLV, m->comm,
                                &reqs[posted]));
    for (int i = 0; i < nsend && MPI_SUCCESS == rc; ++i, ++posted)
        rc = MCA_PML_CALL(isend(buf + bytes * (size_t)(nrecv + i), bytes, MPI_BYTE, to[i], MCA_COLL_BASE_TAG_ALLTOALLV,
                                MCA_PML_BASE_SEND_STANDARD, m->comm, &reqs[posted]));
    for (size_t k = 0; k < posted && LOOM_GPU_BROKEN != m->gpu_state; ++k) {
        /* Peers that are there have answered: the step's text (naming the
         * peer, for a time-out's report) is made only for a wait. */
        int done = 0, rk = ompi_request_test(&reqs[k], &done, MPI_STATUS_IGNORE);
        if (MPI_SUCCESS == rk && !done) {
            char step[96];
            if (k < (size_t)nrecv) snprintf(step, sizeof(step), "exchanging buffer descriptions, receiving rank %d's", from[k]);
            else snprintf(step, sizeof(step), "exchanging buffer descriptions, sending rank %d this rank's", to[k - (size_t)nrecv]);
            rk = finish_step(m, &reqs[k], step);
        }
        if (MPI_SUCCESS == rc) rc = rk;
    }
    if (LOOM_GPU_BROKEN == m->gpu_state) return 1; /* requests abandoned with their buffers */
    if (MPI_SUCCESS == rc) memcpy(recv, buf, bytes * (size_t)nrecv);
    free(buf);
    free(reqs);
    return MPI_SUCCESS == rc ? 0 : 1;
}

/* Rank 0's unique id to every rank (bounded like the other steps). */
static int share_id(mca_coll_loom_module_t *m, loomUniqueId *id)
{
    if (NULL == m->prev.ibcast)
        return m->prev.bcast(id, (int)sizeof(*id), MPI_BYTE, 0, m->comm, m->prev.bcast_module);
    loomUniqueId *buf = (loomUniqueId *)malloc(sizeof(*buf)); /* leaked on a time-out */
    if (NULL == buf) return MPI_ERR_NO_MEM;
    *buf = *id;
    const setup_step_t st = {STEP_BCAST, buf, sizeof(*buf), NULL};
    int rc = run_step(m, &st, "creating the loom communicator (unique id)");
    if (LOOM_GPU_BROKEN == m->gpu_state) return rc;
    if (MPI_SUCCESS == rc) *id = *buf;
    free(buf);
    return rc;
}

void mca_coll_loom_probe(mca_coll_loom_module_t *m)
{
    if (m->gpu_capable >= 0) return;
    if (OMPI_COMM_IS_INTER(m->comm)) { /* staged only: no loom communicator spans two groups */
        m->gpu_capable = 0;
        m->gpu_state = LOOM_GPU_UNAVAILABLE;
        return;
    }
    m->gpu_capable = agreed(m, loomCudaDeviceCount() > 0, MPI_MIN, "probing for GPUs");
    if (!m->gpu_capable && LOOM_GPU_BROKEN != m->gpu_state) m->gpu_state = LOOM_GPU_UNAVAILABLE;
}

bool mca_coll_loom_nonblocking_setup(void)
{
    static int on = -1; /* LOOM_NONBLOCKING_SETUP (coll_loom_nonblocking_setup), read once */
    if (on < 0) on = 0 != loomParamLong("LOOM_NONBLOCKING_SETUP");
    return on;
}

void mca_coll_loom_probe_call(mca_coll_loom_module_t *m, const void *req)
{
    if (NULL == req) mca_coll_loom_probe(m);
}

void mca_coll_loom_setup_bound(mca_coll_loom_module_t *m, bool device_buffers)
{
    m->setup_bounded = device_buffers;
}

int mca_coll_loom_any_device_buffers(mca_coll_loom_module_t *m, bool mine, int *any)
{
    return agree(m, mine, MPI_MAX, "agreeing whether any rank passes device buffers", true, any);
}

/* A report (verbose_level 0: always): printed now, or kept for the
 * progressing thread when this is m's helper (opal_output is not for other
 * threads; the last one kept is printed). */
static void say(mca_coll_loom_module_t *m, int verbose_level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(mca_coll_loom_module_t *m, int verbose_level, const char *fmt, ...)
{
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (t_helper_of == m) {
        snprintf(m->async->msg, sizeof(m->async->msg), "%s", text);
        m->async->msg_level = verbose_level;
    } else if (0 == verbose_level) {
        opal_output(mca_coll_loom_component.output, "%s", text);
    } else {
        opal_output_verbose(verbose_level, mca_coll_loom_component.output, "%s", text);
    }
}

void mca_coll_loom_report_error(mca_coll_loom_module_t *m, const char *what, loomResult_t r)
{
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    /* The one report of a failed loom call (the core only logs it at INFO). */
    say(m, 0, "coll/loom %s rank %d comm %s (cid %u): %s: %s: %s", host, ompi_comm_rank(m->comm), m->comm->c_name,
        mca_coll_loom_comm_cid(m->comm), what, loomGetErrorString(r), loomGetLastError());
}

int mca_coll_loom_mpi_error(loomResult_t r)
{
    switch (r) {
    case loomSuccess: return MPI_SUCCESS;
    case loomInvalidArgument: return MPI_ERR_ARG;
    case loomSystemError: return MPI_ERR_NO_MEM;
    case loomInternalError: return MPI_ERR_INTERN;
    case loomProcFailed: return LOOM_MPI_ERR_PROC_FAILED;
    default: return MPI_ERR_OTHER; /* a peer that failed, a CUDA error, a state loom refuses: the message says which */
    }
}

int mca_coll_loom_create_comm(mca_coll_loom_module_t *m, int device)
{
    loomUniqueId id;
    int rank = ompi_comm_rank(m->comm);
    if (0 == rank) loomGetUniqueId(&id);
    if (MPI_SUCCESS != share_id(m, &id)) return 0;
    loomBootstrap_t bs = {m, bootstrap_allgather, bootstrap_pairwise};
    loomComm_t lcomm = NULL;
    loomResult_t r = loomCommInitRank(&lcomm, ompi_comm_size(m->comm), id, rank, device, &bs);
    if (LOOM_GPU_BROKEN == m->gpu_state) { /* a bootstrap step timed out: said above */
        if (NULL != lcomm) loomCommDestroy(lcomm);
        return 0;
    }
    if (loomSuccess != r && loomNotSupported != r) mca_coll_loom_report_error(m, "creating the loom communicator", r);
    if (loomNotSupported == r && mca_coll_loom_component.verbose > 0)
        say(m, 1, "coll/loom rank %d comm %s: no loom communicator: %s", rank, m->comm->c_name, loomGetLastError());
    if (agreed(m, loomSuccess == r, MPI_MIN, "agreeing that every rank created the loom communicator")) {
        m->lcomm = lcomm;
        /* A distributed graph's neighbour lists are local: whether they fit loom's exchange is agreed. */
        m->neighbor_fit = !OMPI_COMM_IS_TOPO(m->comm)
                              ? 0
                              : agreed(m, mca_coll_loom_neighbors_fit_here(m), MPI_MIN,
                                       "agreeing whether the neighbourhood fits loom's exchange");
        return 1;
    }
    if (NULL != lcomm) loomCommDestroy(lcomm);
    return 0;
}

static void *creation_helper(void *arg)
{
    mca_coll_loom_module_t *m = (mca_coll_loom_module_t *)arg;
    struct mca_coll_loom_async_t *a = m->async;
    t_helper_of = m;
    int made = 0;
    if (!a->connect) {
        made = mca_coll_loom_create_comm(m, a->device);
    } else {
        const loomResult_t r = loomCommConnectPeers(m->lcomm);
        if (loomSuccess != r && loomNotSupported != r)
            mca_coll_loom_report_error(m, "connecting every pair of ranks (exchanges and scans stay staged)", r);
    }
    pthread_mutex_lock(&a->lock);
    a->made = made;
    a->finished = true;
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* Where the gpu state goes once the communicator is made (or not). */
static void creation_settle(mca_coll_loom_module_t *m, int made)
{
    if (LOOM_GPU_BROKEN == m->gpu_state) return;
    m->gpu_state = made ? LOOM_GPU_READY : LOOM_GPU_UNAVAILABLE;
    if (made) loomCommDevice(m->lcomm, &m->gpu_device);
    m->pairs_unconnected = made;
}

/* After an attempt to connect every pair: made or not (all ranks alike),
 * the non-blocking set-up does not try again (a blocking exchange may). */
static void connect_settle(mca_coll_loom_module_t *m)
{
    m->pairs_unconnected = false;
}

static bool helper_start(mca_coll_loom_module_t *m, int device, bool connect)
{
    struct mca_coll_loom_async_t *a = (struct mca_coll_loom_async_t *)calloc(1, sizeof(*a));
    bool threaded = NULL != a;
    if (threaded) {
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->cond, NULL);
        a->connect = connect;
        a->device = device;
        a->job = JOB_NONE;
        m->async = a;
        threaded = 0 == pthread_create(&a->thread, NULL, creation_helper, m);
        if (!threaded) {
            m->async = NULL;
            pthread_cond_destroy(&a->cond);
            pthread_mutex_destroy(&a->lock);
            free(a);
        }
    }
    if (threaded) return true;
    /* No helper: the same steps here, blocking (every rank makes them either way). */
    if (connect) {
        loomCommConnectPeers(m->lcomm);
        connect_settle(m);
    } else {
        creation_settle(m, mca_coll_loom_create_comm(m, device));
    }
    return false;
}

bool mca_coll_loom_create_comm_start(mca_coll_loom_module_t *m, int device)
{
    return helper_start(m, device, false);
}

bool mca_coll_loom_connect_peers_start(mca_coll_loom_module_t *m)
{
    return helper_start(m, m->gpu_device, true);
}

bool mca_coll_loom_create_comm_poll(mca_coll_loom_module_t *m)
{
    struct mca_coll_loom_async_t *a = m->async;
    pthread_mutex_lock(&a->lock);
    if (JOB_ASKED == a->job) {
        a->req = MPI_REQUEST_NULL;
        a->rc = post_step(m, a->step, &a->req);
        a->job = MPI_SUCCESS == a->rc ? JOB_POSTED : JOB_DONE;
        a->started = loomMonotonicSeconds();
    }
    if (JOB_POSTED == a->job) {
        const double timeout = (double)loomParamLong("LOOM_TIMEOUT");
        if (REQUEST_COMPLETE(a->req)) {
            a->rc = a->req->req_status.MPI_ERROR;
            ompi_request_free(&a->req);
            a->job = JOB_DONE;
        } else if (m->setup_bounded && timeout > 0 && loomMonotonicSeconds() - a->started > timeout) {
            /* The request and its buffer are abandoned (it may still complete). */
            m->gpu_state = LOOM_GPU_BROKEN;
            opal_output(mca_coll_loom_component.output,
                        "coll/loom rank %d comm %s (cid %u): %s: some rank of the %d did not arrive within %.0f s "
                        "(LOOM_TIMEOUT); this rank passed device buffers and gives up: communicator unusable for "
                        "collectives", ompi_comm_rank(m->comm), m->comm->c_name, mca_coll_loom_comm_cid(m->comm),
                        a->step_name, ompi_comm_size(m->comm), timeout);
            a->rc = MPI_ERR_OTHER;
            a->job = JOB_DONE;
        }
    }
    if (JOB_DONE == a->job) pthread_cond_signal(&a->cond);
    const bool finished = a->finished;
    pthread_mutex_unlock(&a->lock);
    if (!finished) return false;
    pthread_join(a->thread, NULL);
    if ('\0' != a->msg[0]) {
        if (0 == a->msg_level) opal_output(mca_coll_loom_component.output, "%s", a->msg);
        else opal_output_verbose(a->msg_level, mca_coll_loom_component.output, "%s", a->msg);
    }
    m->async = NULL;
    if (a->connect) connect_settle(m);
    else creation_settle(m, a->made);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    free(a);
    return true;
}
