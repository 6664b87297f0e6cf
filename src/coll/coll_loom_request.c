#include "coll_loom_request.h"

#include "coll_loom_gpu.h"
#include "coll_loom_stage.h"

#include "loom_component.h"
#include "opal/class/opal_object.h"
#include "opal/runtime/opal_progress.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct mca_coll_loom_request_t {
    mca_coll_loom_nbc_request_t super;    /* Open MPI's nbc request layout (coll_loom_ompi.h) */
    mca_coll_loom_module_t *m;
    int coll;                             /* LOOM_COLL_*, for its error report */
    uint64_t ticket;                      /* loomCommMark's, on m's loom communicator */
    loomStaged_t staged;                  /* a staged call's buffer: its output is copied back at completion */
    mca_coll_loom_after_t *after;         /* the call's after-work: run at completion, after the copies back */
    int rc;                               /* its MPI error, once finished */
    bool freed;                           /* MPI_Request_free came first: release on completion */
    bool done;                            /* completed (set after ompi_request_complete) */
    bool ordered;                         /* held to its module's issue order (decided when appended) */
    bool reached;                         /* on loom's stream: the stream got past it (copies back done) */
    bool unstarted;                       /* a kept call's request, until its call starts */
    struct mca_coll_loom_request_t *next; /* the pending list, oldest first */
    /* Persistent requests: what MPI_Start runs, its arguments (released with
     * the request), and the non-blocking call a start issued (the request
     * completes when it does; null: none in flight). */
    const mca_coll_loom_persistent_ops_t *persistent;
    mca_coll_loom_call_args_t *args;
    ompi_request_t *inner;
} mca_coll_loom_request_t;

/* Open MPI reads and writes a loom request as its nbc request. */
_Static_assert(offsetof(mca_coll_loom_request_t, super) == 0 && offsetof(mca_coll_loom_nbc_request_t, super) == 0,
               "a loom request starts with Open MPI's nbc request, which starts with its ompi_request_t");

static int loom_request_free(ompi_request_t **request);
static int loom_request_cancel(ompi_request_t *request, int complete) { (void)request; (void)complete; return MPI_SUCCESS; }

/* Everything past the ompi_request_t is zeroed: the nbc request's fields
 * (Open MPI's bindings test them for NULL) and loom's own. */
static void loom_request_construct(mca_coll_loom_request_t *r)
{
    memset((char *)r + sizeof(ompi_request_t), 0, sizeof(*r) - sizeof(ompi_request_t));
    r->rc = MPI_SUCCESS;
}

OBJ_CLASS_INSTANCE(mca_coll_loom_request_t, ompi_request_t, loom_request_construct, NULL);

/* Every pending request of the process, oldest first; a module's requests
 * are in its issue order. Finished ones move, in that order, to the done
 * list, whose head is completed next (its copies back and after-work, then
 * complete()). pending_lock (MPI_THREAD_MULTIPLE) guards both lists,
 * progress_registered, `completing` and each request's freed/done pair, and
 * spans a request's completion (complete()); it is never held while a loom
 * communicator is waited on, and is taken after a module's call_lock, never
 * before one (progress only tries call_lock). */
static mca_coll_loom_request_t *pending_head = NULL, *pending_tail = NULL;
static mca_coll_loom_request_t *done_head = NULL, *done_tail = NULL;
static bool progress_registered = false;
static opal_mutex_t pending_lock = OPAL_MUTEX_STATIC_INIT;
static int loom_progress(void);
/* One thread at a time completes the done list (`completing`, and
 * t_completing on that thread), head first, so that no request completes
 * before an earlier one of its communicator whichever thread progresses
 * (issue order); other threads' passes take nothing meanwhile. That thread
 * may pass again from inside a completion (one that frees a communicator
 * drains its module): the inner pass completes from the same list's head. */
static bool completing = false;
static __thread bool t_completing = false;
/* The modules of the requests being completed (taken off the done list,
 * lock released) by the completing thread, innermost first: still pending
 * for another thread's drain. */
typedef struct in_flight_t {
    const mca_coll_loom_module_t *m;
    struct in_flight_t *up;
} in_flight_t;
static in_flight_t *in_flight = NULL;

/* The list heads are peeked at without the lock (loom_progress's first
 * test), so they are written atomically. */
static void set_head(mca_coll_loom_request_t **head, mca_coll_loom_request_t *r)
{
    __atomic_store_n(head, r, __ATOMIC_RELAXED);
}

/* A persistent request being started on this thread (loom_persistent_start):
 * where its call takes loom's kernels, the call's mark goes on the
 * persistent request itself instead of on a request of the call's own that
 * the persistent one would follow (a request and a progress pass fewer per
 * start); t_taken says it happened. Only that call takes it: one on the
 * same module, not kept (a kept call's request lets go of it first, so
 * that no kept call started meanwhile by progress takes it). */
static __thread mca_coll_loom_request_t *t_starting = NULL;
static __thread bool t_taken = false;

static mca_coll_loom_request_t *take_starting(const mca_coll_loom_module_t *m)
{
    mca_coll_loom_request_t *r = t_starting;
    if (NULL == r || r->m != m) return NULL;
    t_starting = NULL;
    t_taken = true;
    return r;
}

int mca_coll_loom_after_run(mca_coll_loom_after_t *after, int rc)
{
    if (NULL == after) return rc;
    const int arc = after->run(after, MPI_SUCCESS == rc);
    return MPI_SUCCESS == rc ? arc : rc;
}

static mca_coll_loom_request_t *new_request(mca_coll_loom_module_t *m)
{
    mca_coll_loom_request_t *r = OBJ_NEW(mca_coll_loom_request_t);
    if (NULL == r) return NULL;
    OMPI_REQUEST_INIT(&r->super.super, false);
    r->super.super.req_type = OMPI_REQUEST_COLL;
    r->super.super.req_state = OMPI_REQUEST_ACTIVE;
    r->super.super.req_free = loom_request_free;
    r->super.super.req_cancel = loom_request_cancel;
    r->super.super.req_mpi_object.comm = m->comm;
    r->super.super.req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    r->super.super.req_status.MPI_TAG = MPI_ANY_TAG;
    r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.super.req_status._cancelled = 0;
    r->super.super.req_status._ucount = 0;
    r->m = m;
    return r;
}

static void release(mca_coll_loom_request_t *r)
{
    if (NULL != r->args) r->persistent->release(r->args);
    OMPI_REQUEST_FINI(&r->super.super);
    OBJ_RELEASE(r);
}

/* Released exactly once when MPI_Request_free races with completion in
 * another thread: whichever of the two comes second releases. The lock
 * spans the completion itself: the waiting thread it wakes may free the
 * request (or start a persistent one again) only after done and freed are
 * settled. Open MPI's completion callbacks release datatypes and ops only;
 * none comes back into loom. */
static void complete(mca_coll_loom_request_t *r, int rc)
{
    OPAL_THREAD_LOCK(&pending_lock);
    r->super.super.req_status.MPI_ERROR = rc;
    ompi_request_complete(&r->super.super, true);
    r->done = true;
    const bool freed = r->freed;
    OPAL_THREAD_UNLOCK(&pending_lock);
    if (freed) release(r);
}

static bool is_loom_request(const ompi_request_t *req)
{
    return NULL != req && MPI_REQUEST_NULL != req && loom_request_free == req->req_free;
}

/* Under pending_lock. r is held to issue order unless it follows a kept
 * call not started yet: that call's request is appended after r once it
 * starts, and would wait behind r for ever. Any other request r follows is
 * earlier in the list, done, or the previous module's, which never waits
 * for loom. */
static void append_locked(mca_coll_loom_request_t *r)
{
    r->done = r->reached = false; /* a persistent request started again */
    r->ordered = !is_loom_request(r->inner) || !((const mca_coll_loom_request_t *)r->inner)->unstarted;
    if (NULL == pending_tail) set_head(&pending_head, r);
    else pending_tail->next = r;
    pending_tail = r;
    if (!progress_registered) progress_registered = OPAL_SUCCESS == opal_progress_register(loom_progress);
}

static void append(mca_coll_loom_request_t *r)
{
    OPAL_THREAD_LOCK(&pending_lock);
    append_locked(r);
    OPAL_THREAD_UNLOCK(&pending_lock);
}

/* Whether m has requests not yet completed, under pending_lock: in the
 * pending list (in_order: only those kept in issue order, not those that
 * follow a request of loom's own) or in the done list. */
static bool listed_locked(const mca_coll_loom_module_t *m, bool in_order)
{
    for (mca_coll_loom_request_t *r = pending_head; NULL != r; r = r->next)
        if (r->m == m && (!in_order || r->ordered)) return true;
    for (mca_coll_loom_request_t *r = done_head; NULL != r; r = r->next)
        if (r->m == m) return true;
    /* Those being completed by another thread; never this thread's own: a
     * completion that frees a communicator drains its module from inside. */
    for (const in_flight_t *f = t_completing ? NULL : in_flight; NULL != f; f = f->up)
        if (f->m == m) return true;
    return false;
}

static int loom_request_free(ompi_request_t **request)
{
    mca_coll_loom_request_t *r = (mca_coll_loom_request_t *)*request;
    OPAL_THREAD_LOCK(&pending_lock);
    /* An inactive persistent request (never started, or its last start done) is not pending either. */
    const bool now = r->done || OMPI_REQUEST_INACTIVE == r->super.super.req_state;
    if (!now) r->freed = true; /* the operation still completes; its completion releases it then */
    OPAL_THREAD_UNLOCK(&pending_lock);
    if (now) release(r);
    *request = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* Takes r out of the pending list (prev: the one before it, or NULL). */
static void unlink_request(mca_coll_loom_request_t *prev, mca_coll_loom_request_t *r)
{
    if (NULL != prev) prev->next = r->next;
    else set_head(&pending_head, r->next);
    if (pending_tail == r) pending_tail = prev;
    r->next = NULL;
}

/* A staged call's output back to the caller's buffer, and its buffer freed
 * (ok = 0: the call failed, nothing to copy). Under the module's call_lock. */
static loomResult_t finish_staged(mca_coll_loom_request_t *r, bool ok)
{
    if (NULL == r->staged) return loomSuccess;
    const loomResult_t sr = loomStagedFinish(r->staged, ok);
    r->staged = NULL;
    __atomic_sub_fetch(&r->m->staged_pending, 1, __ATOMIC_RELEASE);
    return sr;
}

/* A pass (never re-entered, skipping modules inside a loom call, whose
 * loom communicator must not be touched from under it) moves every finished
 * request to the done list, in list order; then, unless another thread is
 * at it, the done list is completed from its head, outside the lock: that
 * may copy to the device, run Open MPI's callbacks or free a communicator
 * (and so drain its module, running progress again on this thread). An
 * ordered request waits for its module's earlier unfinished ones; a
 * request on loom's stream copies back as soon as the stream got past it
 * all the same (a blocking call's settle counts on that). */
static int progress_pass(bool *walked)
{
    static bool walking = false;
    *walked = false;
    if (NULL == __atomic_load_n(&pending_head, __ATOMIC_RELAXED) &&
        NULL == __atomic_load_n(&done_head, __ATOMIC_RELAXED))
        return 0; /* the next pass sees what came meanwhile */
    if (OPAL_THREAD_TRYLOCK(&pending_lock)) return 0; /* another thread walks */
    if (walking) {
        OPAL_THREAD_UNLOCK(&pending_lock);
        return 0;
    }
    walking = *walked = true;
    static unsigned pass = 0;
    ++pass;
    mca_coll_loom_request_t *prev = NULL, *r = pending_head;
    while (NULL != r) {
        mca_coll_loom_request_t *next = r->next;
        bool finished = false;
        bool locked = false;
        const bool held = r->ordered && r->m->stalled_pass == pass; /* an earlier one of its module is unfinished */
        if (r->reached) {
            finished = !held;
        } else if (__atomic_load_n(&r->m->busy, __ATOMIC_ACQUIRE) || (held && NULL != r->inner)) {
            /* its loom communicator is in use by the call that got here; or it waits its turn */
        } else if (OPAL_THREAD_TRYLOCK(&r->m->call_lock)) {
            /* another thread is inside a call on it */
        } else if (NULL != r->inner) { /* done when the request it follows is */
            locked = true;
            finished = REQUEST_COMPLETE(r->inner);
            if (finished) r->rc = r->inner->req_status.MPI_ERROR;
        } else {
            locked = true;
            int done = 0;
            const loomResult_t lr = loomCommTest(r->m->lcomm, r->ticket, &done);
            if (done || loomSuccess != lr) {
                const loomResult_t sr = finish_staged(r, loomSuccess == lr);
                if (loomSuccess != lr || loomSuccess != sr)
                    mca_coll_loom_report_error(r->m, mca_coll_loom_coll_names[r->coll], loomSuccess != lr ? lr : sr);
                r->rc = mca_coll_loom_mpi_error(loomSuccess != lr ? lr : loomSuccess != sr ? sr : loomSuccess);
                r->reached = true;
                finished = !held;
            }
        }
        if (locked) OPAL_THREAD_UNLOCK(&r->m->call_lock);
        if (!finished && r->ordered) r->m->stalled_pass = pass;
        if (finished) {
            unlink_request(prev, r);
            if (NULL == done_tail) set_head(&done_head, r);
            else done_tail->next = r;
            done_tail = r;
        } else {
            prev = r;
        }
        r = next;
    }
    walking = false;
    const bool outer = !completing && NULL != done_head;
    if (outer) completing = t_completing = true;
    int completed = 0;
    while (t_completing && NULL != (r = done_head)) {
        set_head(&done_head, r->next);
        if (NULL == done_head) done_tail = NULL;
        r->next = NULL;
        in_flight_t mine = {r->m, in_flight};
        in_flight = &mine;
        OPAL_THREAD_UNLOCK(&pending_lock);
        if (NULL != r->inner) ompi_request_free(&r->inner); /* r->inner = MPI_REQUEST_NULL */
        r->inner = NULL;
        r->rc = mca_coll_loom_after_run(r->after, r->rc);
        r->after = NULL;
        complete(r, r->rc);
        ++completed;
        OPAL_THREAD_LOCK(&pending_lock);
        in_flight = mine.up;
    }
    if (outer) completing = t_completing = false;
    OPAL_THREAD_UNLOCK(&pending_lock);
    return completed;
}

static int loom_progress(void)
{
    bool walked;
    return progress_pass(&walked);
}

int mca_coll_loom_request_pending(mca_coll_loom_module_t *m, const loom_gpu_call_t *c, loomStaged_t staged)
{
    const int coll = c->coll;
    mca_coll_loom_after_t *after = c->after;
    ompi_request_t **req = c->req;
    uint64_t ticket = 0;
    mca_coll_loom_request_t *own = take_starting(m);
    mca_coll_loom_request_t *r = NULL != own ? own : new_request(m);
    if (NULL == r || loomSuccess != loomCommMark(m->lcomm, &ticket)) {
        /* No request or no mark: the call finishes here instead. */
        if (NULL != r && r != own) OBJ_RELEASE(r);
        if (NULL != own) t_starting = own, t_taken = false; /* for request_done below (or not taken) */
        const bool ok = loomSuccess == loomCommWait(m->lcomm);
        int rc = ok && loomSuccess == loomStagedFinish(staged, 1) ? MPI_SUCCESS : MPI_ERR_OTHER;
        if (!ok) loomStagedFinish(staged, 0);
        rc = mca_coll_loom_after_run(after, rc);
        return MPI_SUCCESS == rc ? mca_coll_loom_request_done(m, coll, rc, req) : rc;
    }
    r->ticket = ticket;
    r->staged = staged;
    r->after = after;
    if (NULL != staged) __atomic_add_fetch(&m->staged_pending, 1, __ATOMIC_RELEASE);
    r->coll = coll;
    append(r);
    *req = &r->super.super;
    return MPI_SUCCESS;
}

int mca_coll_loom_request_done(mca_coll_loom_module_t *m, int coll, int rc, ompi_request_t **req)
{
    if (MPI_SUCCESS != rc) return rc; /* the error is the call's: no request */
    mca_coll_loom_request_t *r = take_starting(m);
    if (NULL == r) r = new_request(m);
    if (NULL == r) return MPI_ERR_NO_MEM;
    /* Earlier requests of m still to complete (listed, or being completed by
     * another thread): this one completes after them, through a mark that
     * its stream already passed. */
    uint64_t ticket = 0;
    const bool marked = NULL != m->lcomm && loomSuccess == loomCommMark(m->lcomm, &ticket);
    OPAL_THREAD_LOCK(&pending_lock);
    const bool behind = marked && (completing || listed_locked(m, true));
    if (behind) {
        r->ticket = ticket;
        r->coll = coll;
        append_locked(r);
    }
    OPAL_THREAD_UNLOCK(&pending_lock);
    if (!behind) complete(r, MPI_SUCCESS);
    *req = &r->super.super;
    return MPI_SUCCESS;
}

int mca_coll_loom_request_kept(mca_coll_loom_module_t *m, ompi_request_t **req)
{
    mca_coll_loom_request_t *r = new_request(m);
    if (NULL == r) return MPI_ERR_NO_MEM;
    r->coll = 0;
    r->unstarted = true; /* a persistent start that follows it is not held to the order */
    if (NULL != t_starting && t_starting->m == m) t_starting = NULL; /* the call kept is that start's */
    *req = &r->super.super;
    return MPI_SUCCESS;
}

void mca_coll_loom_request_follow(ompi_request_t *req, int rc, ompi_request_t *inner)
{
    mca_coll_loom_request_t *r = (mca_coll_loom_request_t *)req;
    const bool failed = MPI_SUCCESS != rc || NULL == inner || MPI_REQUEST_NULL == inner;
    OPAL_THREAD_LOCK(&pending_lock);
    r->unstarted = false;
    if (!failed) {
        r->inner = inner;
        append_locked(r);
        /* Persistent requests started while the call was kept follow r from
         * before it in the list, out of the order: behind it now, in it. */
        for (mca_coll_loom_request_t *prev = NULL, *f = pending_head; f != r;) {
            mca_coll_loom_request_t *next = f->next;
            if (f->inner == req) {
                unlink_request(prev, f);
                append_locked(f);
            } else {
                prev = f;
            }
            f = next;
        }
    }
    OPAL_THREAD_UNLOCK(&pending_lock);
    if (failed) {
        if (NULL != inner && MPI_REQUEST_NULL != inner) ompi_request_free(&inner);
        complete(r, rc);
    }
}

/* A staged non-blocking call's copies back, as the after-work of its request. */
typedef struct {
    mca_coll_loom_after_t super;
    loom_stage_t st;
} unstage_after_t;

static int unstage_after_run(mca_coll_loom_after_t *self, bool ok)
{
    unstage_after_t *u = (unstage_after_t *)self;
    const int rc = mca_coll_loom_unstage(&u->st, ok ? MPI_SUCCESS : MPI_ERR_OTHER, NULL);
    free(u);
    return rc;
}

int mca_coll_loom_request_unstage(mca_coll_loom_module_t *m, loom_stage_t *st, int rc, ompi_request_t **req)
{
    const bool pending = MPI_SUCCESS == rc && NULL != req && MPI_REQUEST_NULL != *req;
    if (pending && 0 == st->n) return rc; /* nothing staged: the previous module's request is the call's */
    unstage_after_t *u = pending ? malloc(sizeof(*u)) : NULL;
    mca_coll_loom_request_t *r = NULL != u ? new_request(m) : NULL;
    if (NULL == r) {
        free(u);
        return mca_coll_loom_unstage(st, rc, req);
    }
    u->super.run = unstage_after_run;
    u->st = *st; /* the host copies are the request's now (st->changed_only: only what the call wrote goes back) */
    u->st.aside = true; /* copied back in progress, maybe inside another call: waiting for nothing else */
    st->n = 0;
    r->after = &u->super;
    r->inner = *req;
    append(r);
    *req = &r->super.super;
    return MPI_SUCCESS;
}

void mca_coll_loom_requests_settle(mca_coll_loom_module_t *m)
{
    /* The wait before drained m's stream: the next pass that walks copies
     * them back (even those whose completion waits for an earlier request);
     * another thread's walk only delays it. */
    if (t_completing || __atomic_load_n(&m->staged_pending, __ATOMIC_ACQUIRE) <= 0) return;
    opal_progress();
    bool walked = false;
    while (!walked && __atomic_load_n(&m->staged_pending, __ATOMIC_ACQUIRE) > 0) progress_pass(&walked);
}

bool mca_coll_loom_requests_pending(const mca_coll_loom_module_t *m)
{
    /* Persistent ones and started kept calls follow another request, on this
     * list too, the previous module's, or still kept: counting them could
     * wait forever. */
    bool any = false;
    OPAL_THREAD_LOCK(&pending_lock);
    for (const mca_coll_loom_request_t *r = pending_head; NULL != r && !any; r = r->next)
        any = r->m == m && NULL == r->inner;
    OPAL_THREAD_UNLOCK(&pending_lock);
    return any;
}

/* Whether m has requests not yet completed, of any kind. */
static bool listed(const mca_coll_loom_module_t *m)
{
    OPAL_THREAD_LOCK(&pending_lock);
    const bool any = listed_locked(m, false);
    OPAL_THREAD_UNLOCK(&pending_lock);
    return any;
}

void mca_coll_loom_requests_drain(mca_coll_loom_module_t *m)
{
    if (!listed(m)) return;
    if (NULL != m->lcomm) { /* then every plain request of m completes at once */
        OPAL_THREAD_LOCK(&m->call_lock);
        loomCommWait(m->lcomm);
        OPAL_THREAD_UNLOCK(&m->call_lock);
    }
    while (listed(m)) opal_progress(); /* started persistent ones: their calls' requests too */
}

static int loom_persistent_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        mca_coll_loom_request_t *r = (mca_coll_loom_request_t *)requests[i];
        if (OMPI_REQUEST_ACTIVE == r->super.super.req_state) return MPI_ERR_REQUEST; /* started twice */
        r->super.super.req_state = OMPI_REQUEST_ACTIVE;
        r->super.super.req_complete = REQUEST_PENDING;
        r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
        r->super.super.req_status._cancelled = 0;
        ompi_request_t *inner = NULL;
        t_starting = r;
        t_taken = false;
        const int rc = r->persistent->start(r->args, &inner);
        const bool own = t_taken; /* the call marked r itself: pending or complete */
        t_starting = NULL;
        t_taken = false;
        if (own) continue;
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

int mca_coll_loom_request_persistent(mca_coll_loom_module_t *m, const mca_coll_loom_persistent_ops_t *ops,
                                     mca_coll_loom_call_args_t *args, ompi_request_t **req)
{
    mca_coll_loom_request_t *r = new_request(m);
    if (NULL == r) {
        ops->release(args);
        return MPI_ERR_NO_MEM;
    }
    OMPI_REQUEST_INIT(&r->super.super, true); /* inactive until MPI_Start */
    r->super.super.req_state = OMPI_REQUEST_INACTIVE;
    r->super.super.req_start = loom_persistent_start;
    r->persistent = ops;
    r->args = args;
    *req = &r->super.super;
    return MPI_SUCCESS;
}

void mca_coll_loom_requests_fini(void)
{
    if (progress_registered) opal_progress_unregister(loom_progress);
    progress_registered = false;
}
