/*
 * coll/loom component: version block, MCA parameters, per-communicator query.
 */
#include "coll_loom.h"

#include <stddef.h>

#include "loom.h"
#include "opal/mca/base/mca_base_var.h"

const char *mca_coll_loom_component_version_string = "Open MPI loom collective component";

static int loom_register(void);

mca_coll_loom_component_t mca_coll_loom_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "loom",
            MCA_BASE_MAKE_VERSION(component, LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH),
            .mca_register_component_params = loom_register,
        },
        .collm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
        .collm_init_query = mca_coll_loom_init_query,
        .collm_comm_query = mca_coll_loom_comm_query,
    },
    .priority = 90,
    .enable = true,
    .verbose = 0,
    .stage_host_buffers = false,
    .topo_file = NULL,
    .topo_dump_file = NULL,
    .graph_dump_file = NULL,
};

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
        {"topo_file", "Read this host's topology from this XML file instead of detecting it (same as LOOM_TOPO_FILE)",
         MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY, offsetof(mca_coll_loom_component_t, topo_file)},
        {"topo_dump_file", "Write the detected system of each new loom communicator to this XML file (LOOM_TOPO_DUMP_FILE)",
         MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY,
         offsetof(mca_coll_loom_component_t, topo_dump_file)},
        {"graph_dump_file", "Write the rings, trees and channel count chosen for each new loom communicator to this XML "
                            "file (LOOM_GRAPH_DUMP_FILE)",
         MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY,
         offsetof(mca_coll_loom_component_t, graph_dump_file)},
    };
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); ++i)
        mca_base_component_var_register(&lc->super.collm_version, params[i].name, params[i].help, params[i].type, NULL,
                                        0, 0, params[i].level, params[i].scope, (char *)lc + params[i].offset);
    return OMPI_SUCCESS;
}
