/*
 * The runners' table: the blocking and the non-blocking call of a
 * collective share one runner (coll_loom_args.h), chosen by the call's
 * LOOM_COLL_* (persistent starts and kept calls carry the non-blocking one).
 */
#include "coll_loom_args.h"

static const mca_coll_loom_runner_fn_t runners[LOOM_COLL_COUNT] = {
#define LOOM_RUNNERS(name, type) \
    [LOOM_COLL_##name] = mca_coll_loom_run_##name, [LOOM_COLL_i##name] = mca_coll_loom_run_##name,
    LOOM_BLOCKING_COLLS(LOOM_RUNNERS)
#undef LOOM_RUNNERS
};

int mca_coll_loom_run(const mca_coll_loom_call_args_t *a, ompi_request_t **req)
{
    const mca_coll_loom_runner_fn_t run = a->coll >= 0 && a->coll < LOOM_COLL_COUNT ? runners[a->coll] : NULL;
    return NULL != run ? run(a, req) : MPI_ERR_INTERN;
}
