#include "ompi_config.h"

#include "coll_loom_inflight.h"

#include "opal/runtime/opal_progress.h"
#include "opal/threads/mutex.h"

/* Every listed entry of the process; count: how many (read without the lock). */
static mca_coll_loom_inflight_t *head = NULL;
static int count = 0;
static opal_mutex_t lock = OPAL_MUTEX_STATIC_INIT;
__thread bool mca_coll_loom_inflight_no_wait = false;

static bool crosses(uintptr_t lo, uintptr_t hi, bool rewrites)
{
    bool any = false;
    OPAL_THREAD_LOCK(&lock);
    for (const mca_coll_loom_inflight_t *w = head; NULL != w && !any; w = w->next)
        any = (rewrites || w->rewrites) && w->lo < hi && lo < w->hi;
    OPAL_THREAD_UNLOCK(&lock);
    return any;
}

void mca_coll_loom_inflight_settle(const void *p, size_t bytes, bool rewrites)
{
    if (0 == bytes || NULL == p || 0 == __atomic_load_n(&count, __ATOMIC_ACQUIRE)) return;
    if (mca_coll_loom_inflight_no_wait) return;
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    while (crosses(lo, hi, rewrites)) opal_progress();
}

void mca_coll_loom_inflight_add(mca_coll_loom_inflight_t *w, const void *p, size_t bytes, bool rewrites)
{
    w->listed = false;
    if (0 == bytes || NULL == p) return;
    w->lo = (uintptr_t)p;
    w->hi = w->lo + bytes;
    w->rewrites = rewrites;
    OPAL_THREAD_LOCK(&lock);
    w->prev = NULL;
    w->next = head;
    if (NULL != head) head->prev = w;
    head = w;
    w->listed = true;
    __atomic_add_fetch(&count, 1, __ATOMIC_RELEASE);
    OPAL_THREAD_UNLOCK(&lock);
}

void mca_coll_loom_inflight_done(mca_coll_loom_inflight_t *w)
{
    if (!w->listed) return;
    OPAL_THREAD_LOCK(&lock);
    if (NULL != w->prev) w->prev->next = w->next;
    else head = w->next;
    if (NULL != w->next) w->next->prev = w->prev;
    w->listed = false;
    __atomic_sub_fetch(&count, 1, __ATOMIC_RELEASE);
    OPAL_THREAD_UNLOCK(&lock);
}
