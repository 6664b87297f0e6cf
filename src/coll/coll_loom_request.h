/*
 * Real MPI requests for non-blocking collectives on loom's kernels: the call
 * enqueues its kernel, marks loom's stream after it (loomCommMark) and
 * returns a pending request; Open MPI's progress engine completes it when a
 * progress callback sees the stream get past the mark (loomCommTest, which
 * never blocks); a rank whose buffers were staged (host memory) gets its
 * output copied back then (core/stage/stage_async.cc). One communicator's requests
 * complete in issue order, whatever thread progresses: those on its stream,
 * those of staged calls (which follow the previous module's request) and
 * those of calls that finished inside, of kept calls, and started
 * persistent requests (one started while its call was kept takes its place
 * once that call starts). Calls delegated to the previous module (host
 * buffers) return its own requests, which loom does not order.
 * Communicators progress independently. A request freed before it
 * completes (MPI_Request_free) still completes: the callback releases it
 * then. A module whose loom communicator goes away first waits for its
 * pending requests (mca_coll_loom_requests_drain). Persistent requests
 * (MPIX_*_init) run the non-blocking call at each MPI_Start and complete
 * with it; where that call takes loom's kernels (or finishes inside), the
 * persistent request carries its mark itself, no request of its own.
 */
#ifndef COLL_LOOM_REQUEST_H
#define COLL_LOOM_REQUEST_H

#include "coll_loom.h"
#include "coll_loom_args.h"
#include "coll_loom_gpu.h"
#include "coll_loom_stage.h"
#include "loom_component.h"

/* After c's launch on m's loom communicator: *c->req becomes a pending
 * request completed by progress, which first copies a staged call's output
 * back (staged: loomStagedCreate's, or NULL; taken either way), then runs
 * c->after (coll_loom_gpu.h: NULL or taken). MPI_SUCCESS or the error of
 * the mark. */
int mca_coll_loom_request_pending(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, loomStaged_t staged);
/* A call that already finished inside the call (staged buffers): *req
 * becomes a request carrying rc, completed now, or by progress right after
 * m's earlier pending requests (issue order). */
int mca_coll_loom_request_done(mca_coll_loom_module_t *m, int coll, int rc, ompi_request_t **req);
/* After a blocking call on m (its wait drained loom's stream): the staged
 * requests before it copy their output back now, so that a request freed
 * before completion (MPI_Request_free) has its result in place once a later
 * blocking call on the communicator returns, as on device buffers. */
void mca_coll_loom_requests_settle(mca_coll_loom_module_t *m);
/* A kept non-blocking call's request (coll_loom_defer.h): pending, in no
 * list until the call starts. A persistent request being started on this
 * thread follows it (never marked by a kept call's start). */
int mca_coll_loom_request_kept(mca_coll_loom_module_t *m, ompi_request_t **req);
/* The kept call started (rc, and its own request inner): req completes
 * when inner does, or now with rc where the start failed. */
void mca_coll_loom_request_follow(ompi_request_t *req, int rc, ompi_request_t *inner);
/* Whether m has requests on loom's stream in progress's list (started, unfinished). */
bool mca_coll_loom_requests_pending(const mca_coll_loom_module_t *m);
/* Completes every pending request of m (waiting on its stream); before m's
 * loom communicator is destroyed. */
void mca_coll_loom_requests_drain(mca_coll_loom_module_t *m);
/* Component close: the progress callback goes. */
void mca_coll_loom_requests_fini(void);

/* What the mappers call instead of mca_coll_loom_unstage (staging's
 * end for a call of m): a non-blocking call returns at once, *req then a
 * request of m that follows the previous module's and, in progress, copies
 * the receive buffers back before it completes. Blocking calls, and
 * non-blocking ones where no such request can be had, end as
 * mca_coll_loom_unstage does. */
int mca_coll_loom_request_unstage(mca_coll_loom_module_t *m, loom_stage_t *st, int rc, ompi_request_t **req);

/* Persistent collectives (MPIX_*_init, coll_loom_persistent.c): what
 * MPI_Start runs (start, with args, kept from init to free: the same call
 * as a non-blocking one, whose request *inner the persistent request
 * follows to completion), and what frees args with the request. */
typedef struct {
    int (*start)(mca_coll_loom_call_args_t *args, ompi_request_t **inner);
    void (*release)(mca_coll_loom_call_args_t *args);
} mca_coll_loom_persistent_ops_t;
/* *req: an inactive persistent request of m; takes args (released here if
 * no request can be had). */
int mca_coll_loom_request_persistent(mca_coll_loom_module_t *m, const mca_coll_loom_persistent_ops_t *ops,
                                     mca_coll_loom_call_args_t *args, ompi_request_t **req);

#endif
