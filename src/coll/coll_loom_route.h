/*
 * The routes of a call that loom's kernels do not take, for the
 * collectives' mappers (<name>_any): host buffers go to the previous module
 * untouched (LOOM_DELEGATE), device buffers through host copies
 * (LOOM_STAGED_CALL, coll_loom_stage.h). Both run the communicator's probe
 * first (a blocking call's: collective, every rank runs it at the same
 * call whatever its path).
 */
#ifndef COLL_LOOM_ROUTE_H
#define COLL_LOOM_ROUTE_H

#include "coll_loom_args.h"
#include "coll_loom_request.h"
#include "coll_loom_setup.h"
#include "coll_loom_stage.h"

/* Index of the blocking or non-blocking twin, for path reports. */
#define LOOM_COLL_ID(req, name) ((req) ? LOOM_COLL_i##name : LOOM_COLL_##name)

/* Inside a collective whose buffers are named sbuf and rbuf: stage the pair,
 * call the previous module with the host views (hs, hr), unstage, return. */
#define LOOM_STAGED_CALL(m, req, name, s_gpu, s_span, r_gpu, r_span, ...)                      \
    do {                                                                                       \
        mca_coll_loom_probe_call(m, req);                                                      \
        if (LOOM_GPU_BROKEN == (m)->gpu_state) return MPI_ERR_OTHER;                           \
        mca_coll_loom_note(m, LOOM_COLL_ID(req, name), LOOM_PATH_STAGED);                      \
        loom_stage_t st = {.n = 0, .changed_only = true};                                     \
        const void *hs;                                                                        \
        void *hr;                                                                              \
        int rc = mca_coll_loom_stage_pair(&st, sbuf, s_gpu, s_span, rbuf, r_gpu, r_span, &hs, &hr); \
        if (MPI_SUCCESS == rc) rc = LOOM_CALL_PREV(m, req, name, __VA_ARGS__);                 \
        return mca_coll_loom_request_unstage(m, &st, rc, req);                                 \
    } while (0)

#define LOOM_DELEGATE(m, req, name, ...)                                       \
    do {                                                                       \
        mca_coll_loom_probe_call(m, req);                                      \
        if (LOOM_GPU_BROKEN == (m)->gpu_state) return MPI_ERR_OTHER;           \
        mca_coll_loom_note(m, LOOM_COLL_ID(req, name), LOOM_PATH_DELEGATED);   \
        return LOOM_CALL_PREV(m, req, name, __VA_ARGS__);                      \
    } while (0)

#endif
