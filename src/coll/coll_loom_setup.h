/*
 * The component's host-side steps (coll_loom_setup.c), through the
 * previous module: the probe, the agreements, the loom communicator's
 * creation (blocking, or on a helper thread for the non-blocking set-up),
 * and the one report of a failed loom call. Nothing here calls the paths
 * above it (the GPU path, the requests, the dispatcher).
 */
#ifndef COLL_LOOM_SETUP_H
#define COLL_LOOM_SETUP_H

#include "coll_loom.h"
#include "loom.h"

/* Once per communicator, at its first collective, before anything else that
 * communicates (every path of a call runs it): do all ranks' processes see a GPU? */
void mca_coll_loom_probe(mca_coll_loom_module_t *m);
/* LOOM_NONBLOCKING_SETUP (default 1): a communicator's non-blocking calls
 * may make its loom communicator, inside progress (coll_loom_defer.h). */
bool mca_coll_loom_nonblocking_setup(void);
/* The probe for a call on a path other than loom's kernels (req: NULL when
 * blocking; the dispatcher has started the communicator's kept
 * non-blocking calls before a blocking one runs).
 * The probe is collective: every rank runs it at the same call, whichever
 * path that call takes on it. Only blocking calls run it (non-blocking ones
 * learn the same from the vote, coll_loom_defer.h):
 * Open MPI makes non-blocking calls from inside progress (context ids of new
 * communicators), where a blocking wait deadlocks under MPI_THREAD_MULTIPLE. */
void mca_coll_loom_probe_call(mca_coll_loom_module_t *m, const void *req);

/* This call's steps are bounded by LOOM_TIMEOUT (where set) when
 * device_buffers (a time-out breaks the module: gpu_state LOOM_GPU_BROKEN,
 * said once). */
void mca_coll_loom_setup_bound(mca_coll_loom_module_t *m, bool device_buffers);
/* *any: whether some rank passes device buffers (MAX of mine). */
int mca_coll_loom_any_device_buffers(mca_coll_loom_module_t *m, bool mine, int *any);
/* Collective: creates the loom communicator on every rank (on `device`, or
 * the current GPU when -1); 1 when every rank succeeded. */
int mca_coll_loom_create_comm(mca_coll_loom_module_t *m, int device);
/* The same creation on a helper thread (the non-blocking set-up,
 * coll_loom_defer.h): true when the helper runs (poll it from the thread
 * that progresses MPI); false when none could be started and the creation
 * ran here, blocking (gpu_state settled either way). */
bool mca_coll_loom_create_comm_start(mca_coll_loom_module_t *m, int device);
/* Connects every pair of m's loom communicator on a helper thread (as
 * above; false: none could be started and the pairs were connected here,
 * blocking). Polled with mca_coll_loom_create_comm_poll. */
bool mca_coll_loom_connect_peers_start(mca_coll_loom_module_t *m);
/* Posts and tests the helper's MPI steps; true once it is done (joined;
 * gpu_state READY, UNAVAILABLE or BROKEN). */
bool mca_coll_loom_create_comm_poll(mca_coll_loom_module_t *m);
/* The one report of a failed loom call. */
void mca_coll_loom_report_error(mca_coll_loom_module_t *m, const char *what, loomResult_t r);
/* The MPI error class of a loom result (a peer's death: MPI_ERR_PROC_FAILED where Open MPI has it). */
int mca_coll_loom_mpi_error(loomResult_t r);

#endif
