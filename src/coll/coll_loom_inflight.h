/*
 * User memory that pending non-blocking calls will still write, so that
 * calls crossing it keep MPI's results.
 *
 * Kernels and loom's staged copies write only a call's elements. Two kinds
 * of completion rewrite a whole span instead, holes of the datatype and
 * gaps between blocks included: a staged call's copy back (its host copy
 * was taken when the call was made: coll_loom_stage.h) and a packed
 * receive's unpack (coll_loom_pack.h). MPI lets another pending call own
 * elements in those holes and gaps (two calls filling the even and the odd
 * elements of one array), so:
 *  - a call that writes user memory first waits, progressing MPI, for every
 *    pending rewrite whose span it crosses (that rewrite would put older
 *    bytes over its elements);
 *  - a call that rewrites a span first waits for every pending call that
 *    writes inside it (its copy would hold their elements' older bytes).
 * Such a wait inside a call is what non-blocking calls otherwise avoid; it
 * happens only where spans cross, which disjoint buffers never do. With
 * nothing pending a call pays one atomic load.
 */
#ifndef COLL_LOOM_INFLIGHT_H
#define COLL_LOOM_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One pending call's writes; lives in the call's request or after-work. */
typedef struct mca_coll_loom_inflight_s {
    uintptr_t lo, hi; /* [lo, hi) */
    bool rewrites;    /* the whole span, at completion */
    bool listed;
    struct mca_coll_loom_inflight_s *prev, *next;
} mca_coll_loom_inflight_t;

/* Before a call writes [p, p + bytes) (rewrites: that whole span): waits
 * until nothing pending crosses it as above, unless this thread is starting
 * calls from inside progress (no_wait: kept calls, coll_loom_defer.h), where
 * the call it would wait for may be the one progress has to complete. */
extern __thread bool mca_coll_loom_inflight_no_wait;

void mca_coll_loom_inflight_settle(const void *p, size_t bytes, bool rewrites);
/* w lists [p, p + bytes) as a pending call's writes (bytes 0: nothing). */
void mca_coll_loom_inflight_add(mca_coll_loom_inflight_t *w, const void *p, size_t bytes, bool rewrites);
/* The call's writes are done (w not listed: nothing). */
void mca_coll_loom_inflight_done(mca_coll_loom_inflight_t *w);

#endif
