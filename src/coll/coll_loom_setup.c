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
 * device buffers waits for each at most LOOM_TIMEOUT seconds (the same
 * watchdog as loom's kernels): a peer that never arrives gives it an MPI
 * error instead of a hang. Ranks with host buffers only wait as MPI always
 * does. A step that timed out leaves a request in flight that may still
 * complete (the late rank may arrive): it is never freed or waited for again,
 * its buffers are heap memory that is leaked on purpose, and the module is
 * broken from then on (every later call on it fails).
 *
 * A rank that gives up names the ranks that are missing: the others answer
 * roll calls while they wait in a step (coll_loom_roll_call.h).
 *
 * The per-call agreement stays blocking and unbounded: every host-buffer
 * call pays it until a loom communicator exists, and the non-blocking twin
 * costs twice as much (4-byte MAX at 2 ranks, no loom: allreduce 0.64 us,
 * iallreduce + wait 1.34 us). So a rank that never arrives at a
 * communicator's first device-buffer call is caught only where that call is
 * also the communicator's first collective (the probe).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_loom_gpu.h"
#include "coll_loom_roll_call.h"
#include "core/param_table.h"
#include "loom.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "opal/util/output.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Completes *req: unbounded on host-buffer ranks; else until LOOM_TIMEOUT,
 * after which the module is broken and the request abandoned. Either way the
 * rank answers roll calls while it waits (coll_loom_roll_call.h), and one
 * that gives up calls the roll to name who is missing. */
static int finish_step(mca_coll_loom_module_t *m, ompi_request_t **req, const char *step)
{
    int done = 0;
    int rc = ompi_request_test(req, &done, MPI_STATUS_IGNORE); /* peers that are there answer at once */
    if (MPI_SUCCESS != rc || done) return rc;
    mca_coll_loom_roll_listen_t listen = {NULL, 0, NULL};
    bool listening = false;
    const double timeout = (double)loomParamLong("LOOM_TIMEOUT"), start = now_seconds(), end = start + timeout;
    for (;;) {
        rc = ompi_request_test(req, &done, MPI_STATUS_IGNORE); /* progresses MPI */
        if (MPI_SUCCESS != rc || done) {
            mca_coll_loom_roll_unlisten(m, &listen);
            return rc;
        }
        const double t = now_seconds();
        /* Past the first millisecond, roll calls are answered (questions
         * that came before wait in the queue for the receive). */
        if (!listening && t - start >= 1e-3) {
            mca_coll_loom_roll_listen(m, &listen);
            listening = true;
        }
        mca_coll_loom_roll_answer(m, &listen);
        if (m->setup_bounded && t > end) break;
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
                "collectives", host, ompi_comm_rank(m->comm), m->comm->c_name, m->comm->c_contextid, step,
                ompi_comm_size(m->comm), timeout, missing);
    return MPI_ERR_OTHER;
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
    ompi_request_t *req = MPI_REQUEST_NULL;
    int rc = m->prev.iallreduce(buf, buf + 1, 1, MPI_INT, op, m->comm, &req, m->prev.iallreduce_module);
    if (MPI_SUCCESS == rc) rc = finish_step(m, &req, step);
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
    ompi_request_t *req = MPI_REQUEST_NULL;
    int rc = m->prev.iallgather(buf, (int)bytes, MPI_BYTE, buf + bytes, (int)bytes, MPI_BYTE, m->comm, &req,
                                m->prev.iallgather_module);
    if (MPI_SUCCESS == rc) rc = finish_step(m, &req, "creating the loom communicator (bootstrap exchange)");
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
    ompi_request_t *req = MPI_REQUEST_NULL;
    int rc = m->prev.ibcast(buf, (int)sizeof(*buf), MPI_BYTE, 0, m->comm, &req, m->prev.ibcast_module);
    if (MPI_SUCCESS == rc) rc = finish_step(m, &req, "creating the loom communicator (unique id)");
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

void mca_coll_loom_setup_bound(mca_coll_loom_module_t *m, bool device_buffers)
{
    m->setup_bounded = device_buffers;
}

int mca_coll_loom_any_device_buffers(mca_coll_loom_module_t *m, bool mine, int *any)
{
    return agree(m, mine, MPI_MAX, "agreeing whether any rank passes device buffers", true, any);
}

void mca_coll_loom_report_error(mca_coll_loom_module_t *m, const char *what, loomResult_t r)
{
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    /* The one report of a failed loom call (the core only logs it at INFO). */
    opal_output(mca_coll_loom_component.output, "coll/loom %s rank %d comm %s (cid %u): %s: %s: %s", host,
                ompi_comm_rank(m->comm), m->comm->c_name, m->comm->c_contextid, what, loomGetErrorString(r),
                loomGetLastError());
}

int mca_coll_loom_create_comm(mca_coll_loom_module_t *m, int device)
{
    loomUniqueId id;
    int rank = ompi_comm_rank(m->comm);
    if (0 == rank) loomGetUniqueId(&id);
    if (MPI_SUCCESS != share_id(m, &id)) return 0;
    loomBootstrap_t bs = {m, bootstrap_allgather, bootstrap_pairwise};
    loomResult_t r = loomCommInitRank(&m->lcomm, ompi_comm_size(m->comm), id, rank, device, &bs);
    if (LOOM_GPU_BROKEN == m->gpu_state) { /* a bootstrap step timed out: said above */
        if (NULL != m->lcomm) loomCommDestroy(m->lcomm);
        m->lcomm = NULL;
        return 0;
    }
    if (loomSuccess != r && loomNotSupported != r) mca_coll_loom_report_error(m, "creating the loom communicator", r);
    if (loomNotSupported == r && mca_coll_loom_component.verbose > 0)
        opal_output_verbose(1, mca_coll_loom_component.output, "coll/loom rank %d comm %s: no loom communicator: %s",
                            rank, m->comm->c_name, loomGetLastError());
    if (agreed(m, loomSuccess == r, MPI_MIN, "agreeing that every rank created the loom communicator")) return 1;
    if (NULL != m->lcomm) loomCommDestroy(m->lcomm);
    m->lcomm = NULL;
    return 0;
}
