#include "coll_loom_request.h"

#include "coll_loom_gpu.h"

#include "loom.h"
#include "opal/class/opal_object.h"
#include "opal/runtime/opal_progress.h"

typedef struct mca_coll_loom_request_t {
    ompi_request_t super;
    mca_coll_loom_module_t *m;
    int coll;                             /* LOOM_COLL_*, for its error report */
    uint64_t ticket;                      /* loomCommMark's, on m's loom communicator */
    bool freed;                           /* MPI_Request_free came first: release on completion */
    struct mca_coll_loom_request_t *next; /* the pending list, oldest first */
    /* Persistent requests: what MPI_Start runs, its arguments (released with
     * the request), and the non-blocking call a start issued (the request
     * completes when it does; null: none in flight). */
    mca_coll_loom_start_fn_t start;
    mca_coll_loom_persistent_args_t *args;
    ompi_request_t *inner;
} mca_coll_loom_request_t;

static int loom_request_free(ompi_request_t **request);
static int loom_request_cancel(ompi_request_t *request, int complete) { (void)request; (void)complete; return MPI_SUCCESS; }

static void loom_request_construct(mca_coll_loom_request_t *r)
{
    r->m = NULL;
    r->coll = 0;
    r->ticket = 0;
    r->freed = false;
    r->next = NULL;
    r->start = NULL;
    r->args = NULL;
    r->inner = NULL;
}

OBJ_CLASS_INSTANCE(mca_coll_loom_request_t, ompi_request_t, loom_request_construct, NULL);

/* Every pending request of the process, oldest first; a module's requests
 * are in its issue order. */
static mca_coll_loom_request_t *pending_head = NULL, *pending_tail = NULL;
static bool progress_registered = false;
static int loom_progress(void);

static mca_coll_loom_request_t *new_request(mca_coll_loom_module_t *m)
{
    mca_coll_loom_request_t *r = OBJ_NEW(mca_coll_loom_request_t);
    if (NULL == r) return NULL;
    OMPI_REQUEST_INIT(&r->super, false);
    r->super.req_type = OMPI_REQUEST_COLL;
    r->super.req_state = OMPI_REQUEST_ACTIVE;
    r->super.req_free = loom_request_free;
    r->super.req_cancel = loom_request_cancel;
    r->super.req_mpi_object.comm = m->comm;
    r->super.req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    r->super.req_status.MPI_TAG = MPI_ANY_TAG;
    r->super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.req_status._cancelled = 0;
    r->super.req_status._ucount = 0;
    r->m = m;
    return r;
}

static void release(mca_coll_loom_request_t *r)
{
    if (NULL != r->args) mca_coll_loom_persistent_args_release(r->args);
    OMPI_REQUEST_FINI(&r->super);
    OBJ_RELEASE(r);
}

static void complete(mca_coll_loom_request_t *r, int rc)
{
    r->super.req_status.MPI_ERROR = rc;
    ompi_request_complete(&r->super, true);
    if (r->freed) release(r);
}

static void append(mca_coll_loom_request_t *r)
{
    if (NULL == pending_tail) pending_head = r;
    else pending_tail->next = r;
    pending_tail = r;
    if (!progress_registered) progress_registered = OPAL_SUCCESS == opal_progress_register(loom_progress);
}

static int loom_request_free(ompi_request_t **request)
{
    mca_coll_loom_request_t *r = (mca_coll_loom_request_t *)*request;
    if (REQUEST_COMPLETE(&r->super)) release(r);
    else r->freed = true; /* the operation still completes; progress releases it then */
    *request = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* Takes r out of the pending list (prev: the one before it, or NULL). */
static void unlink_request(mca_coll_loom_request_t *prev, mca_coll_loom_request_t *r)
{
    if (NULL != prev) prev->next = r->next;
    else pending_head = r->next;
    if (pending_tail == r) pending_tail = prev;
    r->next = NULL;
}

static int loom_progress(void)
{
    int completed = 0;
    mca_coll_loom_request_t *prev = NULL, *r = pending_head;
    while (NULL != r) {
        mca_coll_loom_request_t *next = r->next;
        if (NULL != r->inner) { /* a started persistent request: done when its call is */
            if (REQUEST_COMPLETE(r->inner)) {
                const int rc = r->inner->req_status.MPI_ERROR;
                ompi_request_free(&r->inner);
                r->inner = NULL;
                unlink_request(prev, r);
                complete(r, rc);
                ++completed;
            } else {
                prev = r;
            }
            r = next;
            continue;
        }
        int done = 0;
        const loomResult_t lr = loomCommTest(r->m->lcomm, r->ticket, &done);
        if (done || loomSuccess != lr) {
            unlink_request(prev, r);
            if (loomSuccess != lr) mca_coll_loom_report_error(r->m, mca_coll_loom_coll_names[r->coll], lr);
            complete(r, loomSuccess == lr ? MPI_SUCCESS : MPI_ERR_OTHER);
            ++completed;
        } else {
            prev = r;
        }
        r = next;
    }
    return completed;
}

int mca_coll_loom_request_pending(mca_coll_loom_module_t *m, int coll, ompi_request_t **req)
{
    uint64_t ticket = 0;
    const loomResult_t lr = loomCommMark(m->lcomm, &ticket);
    if (loomSuccess != lr) {
        loomCommWait(m->lcomm); /* no mark: finish here instead */
        return mca_coll_loom_request_done(m, MPI_ERR_OTHER, req);
    }
    mca_coll_loom_request_t *r = new_request(m);
    if (NULL == r) {
        loomCommWait(m->lcomm);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->ticket = ticket;
    r->coll = coll;
    append(r);
    *req = &r->super;
    return MPI_SUCCESS;
}

int mca_coll_loom_request_done(mca_coll_loom_module_t *m, int rc, ompi_request_t **req)
{
    mca_coll_loom_request_t *r = new_request(m);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    complete(r, rc);
    *req = &r->super;
    return rc;
}

static bool any_pending(const mca_coll_loom_module_t *m)
{
    for (mca_coll_loom_request_t *r = pending_head; NULL != r; r = r->next)
        if (r->m == m) return true;
    return false;
}

void mca_coll_loom_requests_drain(mca_coll_loom_module_t *m)
{
    if (!any_pending(m)) return;
    loomCommWait(m->lcomm); /* then every plain request of m completes at once */
    while (any_pending(m)) opal_progress(); /* persistent ones: their calls' requests too */
}

static int loom_persistent_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        mca_coll_loom_request_t *r = (mca_coll_loom_request_t *)requests[i];
        r->super.req_state = OMPI_REQUEST_ACTIVE;
        r->super.req_complete = REQUEST_PENDING;
        r->super.req_status.MPI_ERROR = MPI_SUCCESS;
        r->super.req_status._cancelled = 0;
        ompi_request_t *inner = NULL;
        const int rc = r->start(r->args, &inner);
        if (MPI_SUCCESS != rc || NULL == inner) {
            if (NULL != inner) ompi_request_free(&inner);
            complete(r, rc);
            continue;
        }
        r->inner = inner;
        append(r);
    }
    return OMPI_SUCCESS;
}

int mca_coll_loom_request_persistent(mca_coll_loom_module_t *m, mca_coll_loom_start_fn_t start,
                                     mca_coll_loom_persistent_args_t *args, ompi_request_t **req)
{
    mca_coll_loom_request_t *r = new_request(m);
    if (NULL == r) {
        mca_coll_loom_persistent_args_release(args);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    OMPI_REQUEST_INIT(&r->super, true); /* inactive until MPI_Start */
    r->super.req_state = OMPI_REQUEST_INACTIVE;
    r->super.req_start = loom_persistent_start;
    r->start = start;
    r->args = args;
    *req = &r->super;
    return MPI_SUCCESS;
}

void mca_coll_loom_requests_fini(void)
{
    if (progress_registered) opal_progress_unregister(loom_progress);
    progress_registered = false;
}
