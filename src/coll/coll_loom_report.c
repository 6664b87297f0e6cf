/*
 * The component's reports at coll_loom_verbose >= 1: which path each
 * collective took on a communicator, and why a call on device buffers was
 * staged (once per communicator, collective and path or reason).
 */
#include "coll_loom.h"

#include <stdio.h>
#include <unistd.h>

#include "opal/util/output.h"

const char *const mca_coll_loom_coll_names[LOOM_COLL_COUNT] = {
#define LOOM_NAME(name, type) #name,
    LOOM_ALL_COLLS(LOOM_NAME)
#undef LOOM_NAME
};

static const char *const path_names[LOOM_PATH_COUNT] = {"delegated", "staged", "gpu"};

void mca_coll_loom_report(mca_coll_loom_module_t *m, const char *what)
{
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    opal_output_verbose(1, mca_coll_loom_component.output, "coll/loom %s rank %d comm %s (cid %u, size %d): %s",
                        host, ompi_comm_rank(m->comm), m->comm->c_name, mca_coll_loom_comm_cid(m->comm), ompi_comm_size(m->comm),
                        what);
}

void mca_coll_loom_report_path(mca_coll_loom_module_t *m, int coll, mca_coll_loom_path_t path)
{
    char what[96];
    m->paths_reported[coll] |= (unsigned char)(1u << path);
    snprintf(what, sizeof(what), "%s -> %s", mca_coll_loom_coll_names[coll], path_names[path]);
    mca_coll_loom_report(m, what);
}

void mca_coll_loom_report_why(mca_coll_loom_module_t *m, int coll, const char *why)
{
    if (mca_coll_loom_component.verbose <= 0 || m->why_reported[coll]) return;
    m->why_reported[coll] = true;
    char what[256];
    snprintf(what, sizeof(what), "%s on device buffers staged: %s", mca_coll_loom_coll_names[coll], why);
    mca_coll_loom_report(m, what);
}
