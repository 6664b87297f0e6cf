/*
 * Plans of strided runs from Open MPI's datatype descriptions
 * (coll_loom_dtplan.h says what a plan is).
 */
#include "coll_loom_dtplan.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/output.h"

/* Room for n more segments. */
static bool grow(loom_dt_plan_t *p, size_t *cap)
{
    if (p->nsegs < *cap) return true;
    const size_t want = *cap ? 2 * *cap : 16;
    loom_dt_seg_t *s = (loom_dt_seg_t *)realloc(p->segs, want * sizeof(*s));
    if (NULL == s) return false;
    p->segs = s;
    *cap = want;
    return true;
}

/* Adds the run [at, at + len) after the plan's last one: it extends the
 * last segment where it continues it (the next run of its stride, or the
 * bytes right after a lone run), else starts a segment. */
static bool add_run(loom_dt_plan_t *p, size_t *cap, int64_t at, uint64_t len)
{
    if (0 == len) return true;
    if (p->nsegs > 0) {
        loom_dt_seg_t *s = &p->segs[p->nsegs - 1];
        const int64_t last = s->offset + (int64_t)(s->count - 1) * s->stride;
        if (1 == s->count && at == s->offset + (int64_t)s->len) { /* touching: one longer run */
            s->len += len;
            return true;
        }
        if (len == s->len && (1 == s->count || at - last == s->stride)) {
            if (1 == s->count) s->stride = at - s->offset;
            ++s->count;
            return true;
        }
    }
    if (!grow(p, cap)) return false;
    loom_dt_seg_t *s = &p->segs[p->nsegs++];
    s->offset = at;
    s->stride = 0;
    s->len = len;
    s->count = 1;
    s->packed = p->bytes;
    return true;
}

int mca_coll_loom_dt_plan(ompi_datatype_t *dt, loom_dt_plan_t *plan)
{
    memset(plan, 0, sizeof(*plan));
    size_t size = 0;
    ptrdiff_t lb = 0, extent = 0;
    ompi_datatype_type_size(dt, &size);
    ompi_datatype_get_extent(dt, &lb, &extent);
    plan->extent = extent;
    if (0 == size) return MPI_SUCCESS;
    opal_convertor_t *conv = opal_convertor_create(opal_local_arch, 0);
    if (NULL == conv) return MPI_ERR_NO_MEM;
    /* Addresses only, never read: a base far from 0 keeps negative
     * displacements from wrapping. */
    char *const base = (char *)(uintptr_t)((uintptr_t)1 << 46);
    int rc = MPI_SUCCESS;
    if (OPAL_SUCCESS != opal_convertor_prepare_for_send(conv, &dt->super, 1, base)) rc = MPI_ERR_INTERN;
    size_t cap = 0;
    bool done = false;
    while (MPI_SUCCESS == rc && !done) {
        struct iovec iov[64];
        uint32_t n = 64;
        size_t got = 0;
        done = 1 == opal_convertor_raw(conv, iov, &n, &got);
        for (uint32_t i = 0; i < n && MPI_SUCCESS == rc; ++i) {
            const int64_t at = (int64_t)((char *)iov[i].iov_base - base);
            if (0 == iov[i].iov_len) continue;
            if (!add_run(plan, &cap, at, iov[i].iov_len)) rc = MPI_ERR_NO_MEM;
            const int64_t end = at + (int64_t)iov[i].iov_len;
            if (0 == plan->bytes || at < plan->lo) plan->lo = at;
            if (0 == plan->bytes || end > plan->hi) plan->hi = end;
            plan->bytes += iov[i].iov_len;
        }
        if (0 == n && !done) rc = MPI_ERR_INTERN; /* no progress */
    }
    OBJ_RELEASE(conv);
    if (MPI_SUCCESS == rc && plan->bytes != size) {
        opal_output(0, "coll/loom: the layout of datatype %s adds up to %zu bytes, not its size %zu: no plan", dt->name,
                    plan->bytes, size);
        rc = MPI_ERR_INTERN;
    }
    if (MPI_SUCCESS != rc) mca_coll_loom_dt_plan_free(plan);
    plan->extent = extent;
    return rc;
}

/* Plans kept with datatypes: an attribute of each type that has one. */
static int plan_key = MPI_KEYVAL_INVALID;
static opal_mutex_t plan_key_lock = OPAL_MUTEX_STATIC_INIT;
static long plans_kept;

static int drop_plan(MPI_Datatype type, int key, void *value, void *extra)
{
    (void)type, (void)key, (void)extra;
    mca_coll_loom_dt_plan_free((loom_dt_plan_t *)value);
    free(value);
    __atomic_sub_fetch(&plans_kept, 1, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

const loom_dt_plan_t *mca_coll_loom_dt_plan_of(ompi_datatype_t *dt, int *rc)
{
    OPAL_THREAD_LOCK(&plan_key_lock);
    if (MPI_KEYVAL_INVALID == plan_key) *rc = PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, drop_plan, &plan_key, NULL);
    else *rc = MPI_SUCCESS;
    OPAL_THREAD_UNLOCK(&plan_key_lock);
    if (MPI_SUCCESS != *rc) return NULL;
    void *kept = NULL;
    int found = 0;
    if (MPI_SUCCESS != (*rc = PMPI_Type_get_attr((MPI_Datatype)dt, plan_key, &kept, &found))) return NULL;
    if (found) return (const loom_dt_plan_t *)kept;
    loom_dt_plan_t *plan = (loom_dt_plan_t *)malloc(sizeof(*plan));
    if (NULL == plan) {
        *rc = MPI_ERR_NO_MEM;
        return NULL;
    }
    if (MPI_SUCCESS != (*rc = mca_coll_loom_dt_plan(dt, plan))) {
        free(plan);
        return NULL;
    }
    /* Two threads may make one at once: the later set replaces (and
     * frees, through drop_plan) the earlier, which its caller may still
     * hold; so the loser keeps its own plan out of the attribute. */
    OPAL_THREAD_LOCK(&plan_key_lock);
    *rc = PMPI_Type_get_attr((MPI_Datatype)dt, plan_key, &kept, &found);
    if (MPI_SUCCESS == *rc && !found) *rc = PMPI_Type_set_attr((MPI_Datatype)dt, plan_key, plan);
    OPAL_THREAD_UNLOCK(&plan_key_lock);
    if (MPI_SUCCESS == *rc && found) {
        mca_coll_loom_dt_plan_free(plan);
        free(plan);
        return (const loom_dt_plan_t *)kept;
    }
    if (MPI_SUCCESS != *rc) {
        mca_coll_loom_dt_plan_free(plan);
        free(plan);
        return NULL;
    }
    __atomic_add_fetch(&plans_kept, 1, __ATOMIC_RELAXED);
    return plan;
}

long mca_coll_loom_dt_plans_kept(void)
{
    return __atomic_load_n(&plans_kept, __ATOMIC_RELAXED);
}

void mca_coll_loom_dt_plan_free(loom_dt_plan_t *plan)
{
    free(plan->segs);
    memset(plan, 0, sizeof(*plan));
}

void mca_coll_loom_dt_pack_cpu(const loom_dt_plan_t *plan, size_t count, const void *user, void *packed)
{
    for (size_t e = 0; e < count; ++e) {
        const char *u = (const char *)user + (int64_t)e * plan->extent;
        char *p = (char *)packed + e * plan->bytes;
        for (size_t k = 0; k < plan->nsegs; ++k) {
            const loom_dt_seg_t *s = &plan->segs[k];
            for (uint64_t r = 0; r < s->count; ++r)
                memcpy(p + s->packed + r * s->len, u + s->offset + (int64_t)r * s->stride, s->len);
        }
    }
}

void mca_coll_loom_dt_unpack_cpu(const loom_dt_plan_t *plan, size_t count, const void *packed, void *user)
{
    for (size_t e = 0; e < count; ++e) {
        char *u = (char *)user + (int64_t)e * plan->extent;
        const char *p = (const char *)packed + e * plan->bytes;
        for (size_t k = 0; k < plan->nsegs; ++k) {
            const loom_dt_seg_t *s = &plan->segs[k];
            for (uint64_t r = 0; r < s->count; ++r)
                memcpy(u + s->offset + (int64_t)r * s->stride, p + s->packed + r * s->len, s->len);
        }
    }
}
