/*
 * coll/loom module: one per communicator. module_enable saves (and retains)
 * the lower-priority module's function for every collective loom overrides:
 * that is where host-buffer calls go, untouched.
 */
#include "coll_loom.h"
#include "coll_loom_defer.h"
#include "coll_loom_neighbor_map.h"
#include "coll_loom_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/util/output.h"

static void loom_module_construct(mca_coll_loom_module_t *m)
{
    m->comm = NULL;
    m->lcomm = NULL;
    m->gpu_state = LOOM_GPU_UNKNOWN;
    m->gpu_device = -1;
    m->gpu_capable = -1;
    m->setup_bounded = false;
    memset(m->why_reported, 0, sizeof(m->why_reported));
    memset(m->host_pack_reported, 0, sizeof(m->host_pack_reported));
    m->exchange_tables = NULL;
    m->exchange_tables_bytes = 0;
    m->profile = NULL;
    m->busy = false;
    OBJ_CONSTRUCT(&m->call_lock, opal_mutex_t);
    m->stalled_pass = 0;
    m->staged_pending = 0;
    m->call_owner = pthread_self();
    m->defer_head = m->defer_tail = NULL;
    m->nb_calls = 0;
    m->nb_setup = LOOM_NB_IDLE;
    m->vote_req = NULL;
    m->vote_buf = NULL;
    m->vote_started = 0;
    m->vote_bounded = false;
    m->vote_device = -1;
    m->async = NULL;
    m->defer_next = NULL;
    m->defer_listed = false;
    m->pairs_unconnected = false;
    m->neighbors = NULL;
    m->neighbor_fit = -1;
    memset(&m->prev, 0, sizeof(m->prev));
    memset(m->paths_reported, 0, sizeof(m->paths_reported));
}

static void loom_module_destruct(mca_coll_loom_module_t *m)
{
    if (NULL != m->profile) /* the communicator is being freed: its rank and name are still there */
        mca_coll_loom_profile_report(&m->profile, ompi_comm_rank(m->comm), m->comm->c_name);
    mca_coll_loom_defer_forget(m);   /* kept calls start, a set-up in flight ends */
    mca_coll_loom_requests_drain(m); /* a freed communicator's operations still complete */
    if (NULL != m->lcomm) loomCommDestroy(m->lcomm);
    m->lcomm = NULL;
    free(m->exchange_tables);
    mca_coll_loom_neighbors_free(m);
#define LOOM_RELEASE(name, type) \
    if (NULL != m->prev.name##_module) OBJ_RELEASE(m->prev.name##_module);
    LOOM_ALL_COLLS(LOOM_RELEASE)
#undef LOOM_RELEASE
    OBJ_DESTRUCT(&m->call_lock);
}

OBJ_CLASS_INSTANCE(mca_coll_loom_module_t, mca_coll_base_module_t, loom_module_construct, loom_module_destruct);

/* Save what the lower-priority modules installed. A collective nobody below
 * provides is not overridden either (loom never is the only implementation). */
static int loom_module_enable(mca_coll_base_module_t *module, ompi_communicator_t *comm)
{
    mca_coll_loom_module_t *m = (mca_coll_loom_module_t *)module;
    m->comm = comm;
#define LOOM_SAVE(name, type)                                          \
    m->prev.name = comm->c_coll->coll_##name;                          \
    m->prev.name##_module = comm->c_coll->coll_##name##_module;        \
    if (NULL != m->prev.name && NULL != m->prev.name##_module) {       \
        OBJ_RETAIN(m->prev.name##_module);                             \
    } else {                                                           \
        m->prev.name = NULL;                                           \
        m->prev.name##_module = NULL;                                  \
        m->super.coll_##name = NULL;                                   \
    }
    LOOM_ALL_COLLS(LOOM_SAVE)
#undef LOOM_SAVE
    if (mca_coll_loom_component.verbose > 0) mca_coll_loom_report(m, "selected");
    return OMPI_SUCCESS;
}

/* No CUDA call here: the application has not chosen its GPU yet.
 * Single-rank communicators are taken too: coll/self crashes on device
 * buffers, and host buffers still go to it untouched. So are
 * intercommunicators: coll/inter crashes on device buffers too; there loom
 * stages them (its kernels run within one group). */
mca_coll_base_module_t *mca_coll_loom_comm_query(ompi_communicator_t *comm, int *priority)
{
    if (!mca_coll_loom_component.enable) return NULL;
    mca_coll_loom_module_t *m = OBJ_NEW(mca_coll_loom_module_t);
    if (NULL == m) return NULL;
    *priority = mca_coll_loom_component.priority;
    m->super.coll_module_enable = loom_module_enable;
#define LOOM_INSTALL(name, type) m->super.coll_##name = mca_coll_loom_##name;
    LOOM_ALL_COLLS(LOOM_INSTALL)
#undef LOOM_INSTALL
    return &m->super;
}
