#include "coll_loom_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom.h"
#include "base/mono_clock.h"
#include "base/param_table.h"
#include "loom_component.h"

/* 0: up to 1 byte, k: up to 4^k bytes. */
static int size_class(size_t bytes)
{
    int k = 0;
    for (size_t top = 1; top < bytes && k < LOOM_PROFILE_CLASSES - 1; top *= 4) ++k;
    return k;
}

static bool profiling(void)
{
    static int enabled = -1; /* read once per process */
    if (enabled < 0) enabled = loomParamLong("LOOM_PROFILE") != 0;
    return enabled;
}

/* This thread's call's entry time; 0: none noted since the last timer_start
 * (a call that did not reach the GPU path leaves it to be overwritten). */
static __thread uint64_t entered_ns;

void mca_coll_loom_profile_entered(void)
{
    if (profiling()) entered_ns = loomMonotonicNs();
}

void mca_coll_loom_timer_start(mca_coll_loom_profile_t **table, mca_coll_loom_timer_t *t, int coll, size_t bytes)
{
    t->into = NULL;
    if (!profiling()) return;
    if (NULL == *table) *table = (mca_coll_loom_profile_t *)calloc(LOOM_COLL_COUNT, sizeof(mca_coll_loom_profile_t));
    if (NULL == *table) return;
    memset(t->ns, 0, sizeof(t->ns));
    t->split = false;
    t->into = *table + coll;
    t->bytes = bytes;
    t->last = loomMonotonicNs();
    if (entered_ns && entered_ns <= t->last) t->ns[LOOM_PROFILE_ENTRY] = t->last - entered_ns;
    entered_ns = 0;
}

void mca_coll_loom_timer_mark(mca_coll_loom_timer_t *t, int phase)
{
    if (NULL == t->into) return;
    const uint64_t now = loomMonotonicNs();
    t->ns[phase] += now - t->last;
    t->last = now;
}

void mca_coll_loom_timer_posted(mca_coll_loom_timer_t *t)
{
    if (NULL == t->into) return;
    const uint64_t posted = loomPostedNs();
    if (posted <= t->last) return; /* no one-shot post in this call */
    t->ns[LOOM_PROFILE_TO_GPU] += posted - t->last;
    /* The parts, where every step of this call was marked, in order. */
    uint64_t at[LOOM_PROFILE_TO_GPU_PARTS + 1];
    at[0] = t->last;
    for (int k = 0; k < LOOM_PROFILE_TO_GPU_PARTS - 1; ++k) at[k + 1] = loomPostStepNs(k);
    at[LOOM_PROFILE_TO_GPU_PARTS] = posted;
    t->split = true; /* a step left from an earlier call lies before at[0] */
    for (int k = 1; k <= LOOM_PROFILE_TO_GPU_PARTS && t->split; ++k) t->split = at[k] >= at[k - 1];
    for (int k = 0; k < LOOM_PROFILE_TO_GPU_PARTS && t->split; ++k) t->to_gpu[k] = at[k + 1] - at[k];
    t->last = posted;
}

void mca_coll_loom_timer_stop(mca_coll_loom_timer_t *t)
{
    if (NULL == t->into) return;
    const int k = size_class(t->bytes);
    if (0 == t->into->calls[k]++) {
        for (int p = 0; p < LOOM_PROFILE_PHASES; ++p) t->into->first_ns[k] += t->ns[p];
        return;
    }
    for (int p = 0; p < LOOM_PROFILE_PHASES; ++p) t->into->ns[k][p] += t->ns[p];
    if (!t->split) return;
    ++t->into->split_calls[k];
    for (int p = 0; p < LOOM_PROFILE_TO_GPU_PARTS; ++p) t->into->split_ns[k][p] += t->to_gpu[p];
}

void mca_coll_loom_profile_report(mca_coll_loom_profile_t **table, int rank, const char *comm_name)
{
    if (NULL == *table) return;
    for (int c = 0; c < LOOM_COLL_COUNT; ++c)
        for (int k = 0; k < LOOM_PROFILE_CLASSES; ++k) {
            const mca_coll_loom_profile_t *p = *table + c;
            if (0 == p->calls[k]) continue;
            const unsigned long long lo = k ? (1ull << (2 * (k - 1))) + 1 : 0, hi = 1ull << (2 * k);
            const char *plus = k == LOOM_PROFILE_CLASSES - 1 ? "+" : "";
            const double first = (double)p->first_ns[k] / 1e3;
            if (1 == p->calls[k]) {
                opal_output(mca_coll_loom_component.output, "coll/loom profile rank %d comm %s: %s %llu..%llu%s B: "
                            "1 call, %.2f us", rank, comm_name, mca_coll_loom_coll_names[c], lo, hi, plus, first);
                continue;
            }
            double us[LOOM_PROFILE_PHASES], total = 0;
            for (int ph = 0; ph < LOOM_PROFILE_PHASES; ++ph) {
                us[ph] = (double)p->ns[k][ph] / 1e3 / (double)(p->calls[k] - 1);
                total += us[ph];
            }
            char parts[160] = "";
            if (p->split_calls[k] > 0) {
                double part[LOOM_PROFILE_TO_GPU_PARTS];
                for (int q = 0; q < LOOM_PROFILE_TO_GPU_PARTS; ++q)
                    part[q] = (double)p->split_ns[k][q] / 1e3 / (double)p->split_calls[k];
                snprintf(parts, sizeof(parts), " (%llu calls: lock %.2f, checks %.2f, choice %.2f, order %.2f, post "
                         "%.2f)", (unsigned long long)p->split_calls[k], part[0], part[1], part[2], part[3], part[4]);
            }
            opal_output(mca_coll_loom_component.output,
                        "coll/loom profile rank %d comm %s: %s %llu..%llu%s B: %llu calls; after the first, per "
                        "call: entry %.2f us, where %.2f us, to GPU %.2f us%s, enqueue %.2f us, wait %.2f us, stage %.2f us, total %.2f us; the "
                        "first %.2f us", rank, comm_name, mca_coll_loom_coll_names[c], lo, hi, plus,
                        (unsigned long long)p->calls[k], us[LOOM_PROFILE_ENTRY], us[LOOM_PROFILE_WHERE], us[LOOM_PROFILE_TO_GPU], parts, us[LOOM_PROFILE_ENQUEUE],
                        us[LOOM_PROFILE_WAIT], us[LOOM_PROFILE_STAGE], total, first);
        }
    free(*table);
    *table = NULL;
}
