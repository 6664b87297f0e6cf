/*
 * coll/loom component: version block, MCA parameters, per-communicator query.
 */
#include "coll_loom.h"
#include "coll_loom_defer.h"
#include "coll_loom_request.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/embed.h"
#include "base/param_table.h"
#include "loom.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"

const char *mca_coll_loom_component_version_string = "Open MPI loom collective component";

static int loom_register(void);
static int loom_open(void);
static int loom_close(void);
static void register_core_params(mca_coll_loom_component_t *lc);

mca_coll_loom_component_t mca_coll_loom_component = {
    .super = {
        .collm_version = {
            LOOM_COLL_BASE_VERSION,
            .mca_component_name = "loom",
            MCA_BASE_MAKE_VERSION(component, LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH),
            .mca_register_component_params = loom_register,
            .mca_open_component = loom_open,
            .mca_close_component = loom_close,
        },
        .collm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
        .collm_init_query = mca_coll_loom_init_query,
        .collm_comm_query = mca_coll_loom_comm_query,
    },
    .priority = 90,
    .enable = true,
    .verbose = 0,
    .stage_host_buffers = false,
    .uniform_memory = false,
    .dt_gpu = true,
    .output = -1,
};

/* The component's reports go to an opal_output stream of its own at
 * coll_loom_verbose; loom's core leaves reporting a failed call to it. */
static int loom_open(void)
{
    mca_coll_loom_component.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_coll_loom_component.output, mca_coll_loom_component.verbose);
    loomEmbedderReportsErrors(1);
    return OMPI_SUCCESS;
}

static int loom_close(void)
{
    mca_coll_loom_requests_fini();
    mca_coll_loom_defer_fini();
    if (mca_coll_loom_component.output >= 0) opal_output_close(mca_coll_loom_component.output);
    mca_coll_loom_component.output = -1;
    return OMPI_SUCCESS;
}

static int loom_register(void)
{
    mca_coll_loom_component_t *lc = &mca_coll_loom_component;
    static const struct {
        const char *name;
        const char *help;
        mca_base_var_type_t type;
        mca_base_var_info_lvl_t level;
        mca_base_var_scope_t scope;
        size_t offset; /* of the storage in the component */
    } params[] = {
        {"priority", "Priority of coll/loom; above coll/cuda (78) and tuned (30) so that loom sees every collective first",
         MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY, offsetof(mca_coll_loom_component_t, priority)},
        {"enable", "Offer loom on every intra-communicator (false: loom never selects itself)",
         MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY, offsetof(mca_coll_loom_component_t, enable)},
        {"verbose", "0: silent; 1: report selection per communicator and the path (delegated/staged/gpu) taken, "
                    "once per communicator, collective and path",
         MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL, offsetof(mca_coll_loom_component_t, verbose)},
        {"stage_host_buffers", "Testing aid: treat host buffers as device buffers so that the staging path runs without a GPU",
         MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_LOCAL,
         offsetof(mca_coll_loom_component_t, stage_host_buffers)},
        {"uniform_memory", "The application promises that every collective passes the same kind of memory on every "
                           "rank (host buffers on all ranks, or device buffers on all ranks): host-buffer calls then "
                           "go to the component Open MPI would have used even on communicators that carry "
                           "device-buffer collectives (by default loom runs them through its kernels, which is what "
                           "makes ranks that mix memory kinds in one call correct, and then they wait for SMs like "
                           "any kernel). A call that breaks the promise hangs or is wrong; a rank that passes "
                           "NULL or no buffer (a zero count) counts as passing host memory. Set it alike on every "
                           "rank",
         MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
         offsetof(mca_coll_loom_component_t, uniform_memory)},
        {"dt_gpu", "Non-contiguous datatypes on device buffers are packed and unpacked on the GPU by loom's kernels "
                   "(false: through host copies and Open MPI's convertor, the older and much slower path); "
                   "verbose >= 1 says why a call's type stays off them",
         MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL, offsetof(mca_coll_loom_component_t, dt_gpu)},
    };
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); ++i)
        mca_base_component_var_register(&lc->super.collm_version, params[i].name, params[i].help, params[i].type, NULL,
                                        0, 0, params[i].level, params[i].scope, (char *)lc + params[i].offset);
    register_core_params(lc);
    return OMPI_SUCCESS;
}

int mca_coll_loom_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    mca_coll_loom_export_core_params();
    return OMPI_SUCCESS;
}

/* Every tunable of loom's core (base/param_table.h) as an MCA parameter
 * coll_loom_<name>, with its help text, environment name, default and range. */
static long core_int[LOOM_MAX_CORE_PARAMS];
static char *core_str[LOOM_MAX_CORE_PARAMS];
static int core_var[LOOM_MAX_CORE_PARAMS];

static void register_core_params(mca_coll_loom_component_t *lc)
{
    const int n = loomParamCount() < LOOM_MAX_CORE_PARAMS ? loomParamCount() : LOOM_MAX_CORE_PARAMS;
    for (int i = 0; i < n; ++i) {
        const loomParamDef *d = loomParamAt(i);
        char help[768];
        if (LOOM_PARAM_INT == d->type)
            snprintf(help, sizeof(help), "%s (environment: %s; default: %s; range %ld..%ld)", d->help, d->env, d->shown,
                     d->lo, d->hi);
        else
            snprintf(help, sizeof(help), "%s (environment: %s; default: %s)", d->help, d->env, d->shown);
        core_int[i] = d->def;
        core_str[i] = NULL;
        core_var[i] = mca_base_component_var_register(
            &lc->super.collm_version, d->name, help,
            LOOM_PARAM_INT == d->type ? MCA_BASE_VAR_TYPE_LONG : MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_7,
            MCA_BASE_VAR_SCOPE_READONLY, LOOM_PARAM_INT == d->type ? (void *)&core_int[i] : (void *)&core_str[i]);
    }
}

/* MCA parameters of loom's core that were set (not their defaults) travel as
 * their LOOM_* environment names, which loom's core reads; an explicit
 * environment setting wins. */
void mca_coll_loom_export_core_params(void)
{
    const int n = loomParamCount() < LOOM_MAX_CORE_PARAMS ? loomParamCount() : LOOM_MAX_CORE_PARAMS;
    for (int i = 0; i < n; ++i) {
        mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
        if (core_var[i] < 0 || OPAL_SUCCESS != mca_base_var_get_value(core_var[i], NULL, &source, NULL) ||
            MCA_BASE_VAR_SOURCE_DEFAULT == source)
            continue;
        const loomParamDef *d = loomParamAt(i);
        char text[32];
        if (LOOM_PARAM_INT == d->type) snprintf(text, sizeof(text), "%ld", core_int[i]);
        if (LOOM_PARAM_INT == d->type || (NULL != core_str[i] && '\0' != core_str[i][0]))
            setenv(d->env, LOOM_PARAM_INT == d->type ? text : core_str[i], 0);
    }
}
