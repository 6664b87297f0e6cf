/*
 * The overrides Open MPI calls, generated from the collectives' list
 * (coll_loom.h): per collective a blocking, a non-blocking and a persistent
 * init thunk that pack their parameters (coll_loom_args.h) and hand them
 * on: the first two to the dispatcher (coll_loom_defer.h), which runs or
 * keeps the call, the init to the persistent requests
 * (coll_loom_persistent.c), whose every MPI_Start goes to the dispatcher
 * as the non-blocking call.
 */
#include "coll_loom_args.h"
#include "coll_loom_defer.h"

#define LOOM_THUNKS(name, type)                                                                          \
    int mca_coll_loom_##name(LOOM_PARAMS_##type, mca_coll_base_module_t *module)                          \
    {                                                                                                    \
        const mca_coll_loom_call_args_t a = {.coll = LOOM_COLL_##name, .m = (mca_coll_loom_module_t *)module, \
                                             LOOM_FIELDS_##type};                                        \
        return mca_coll_loom_dispatch(&a, NULL);                                                         \
    }                                                                                                    \
    int mca_coll_loom_i##name(LOOM_PARAMS_##type, ompi_request_t **req, mca_coll_base_module_t *module)   \
    {                                                                                                    \
        const mca_coll_loom_call_args_t a = {.coll = LOOM_COLL_i##name, .m = (mca_coll_loom_module_t *)module, \
                                             LOOM_FIELDS_##type};                                        \
        return mca_coll_loom_dispatch(&a, req);                                                          \
    }                                                                                                    \
    int mca_coll_loom_##name##_init(LOOM_PARAMS_##type, struct ompi_info_t *info, ompi_request_t **req,  \
                                    mca_coll_base_module_t *module)                                      \
    {                                                                                                    \
        (void)info;                                                                                      \
        const mca_coll_loom_call_args_t a = {.coll = LOOM_COLL_i##name, .m = (mca_coll_loom_module_t *)module, \
                                             LOOM_FIELDS_##type};                                        \
        return mca_coll_loom_persistent_init(&a, req);                                                   \
    }
LOOM_BLOCKING_COLLS(LOOM_THUNKS)
#undef LOOM_THUNKS
