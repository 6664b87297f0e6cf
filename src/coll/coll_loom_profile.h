/*
 * Where a GPU-path call's host time goes (LOOM_PROFILE=1): per collective and
 * size class (powers of 4 of the call's largest buffer), the calls and the
 * mean microseconds of each phase of mca_coll_loom_gpu_exec over the calls
 * after the first (a first call may connect peers or map new buffers: its
 * milliseconds would hide the steady state; its total is printed apart):
 *   entry    from the component's entry point (mca_coll_loom_dispatch) to
 *            mca_coll_loom_gpu_exec: the routing (where the buffers are,
 *            which path takes the call) and packing;
 *   where    the driver's pointer queries of the call's two buffers, where
 *            the routing has not made them already;
 *   to GPU   from there until the call's work reached the GPU: a one-shot
 *            call's launch returned or its mailbox line went to the
 *            resident kernel (loomPostedNs); 0 for other calls, whose
 *            time to the launch stays in enqueue. Split, for one-shot
 *            calls, into: lock (the module's lock and staging set-up, up
 *            to loom's entry point), checks (loom's call checks and its
 *            ordering after earlier calls), choice (the algorithm),
 *            order (whether the resident kernel may take the call: the
 *            legacy-stream query) and post (the mailbox write, or the
 *            launch) (loomPostStepNs);
 *   enqueue  loom's part up to the launch (staging in, planning, host-side
 *            agreement such as the exchanges' buffer descriptions, launch),
 *            and for a resident-kernel call its wait for `done`;
 *   wait     until loom's stream is done (the kernel, and the host's wait);
 *   stage    copies out of the scratch buffer (host or other-GPU buffers).
 * One line per (collective, size class) seen, when the communicator is
 * freed. For issue 13's small-message latency: which part of a call is the
 * host's. Off: one branch per call.
 */
#ifndef MCA_COLL_LOOM_PROFILE_H
#define MCA_COLL_LOOM_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { LOOM_PROFILE_ENTRY, LOOM_PROFILE_WHERE, LOOM_PROFILE_TO_GPU, LOOM_PROFILE_ENQUEUE, LOOM_PROFILE_WAIT, LOOM_PROFILE_STAGE, LOOM_PROFILE_PHASES };
enum { LOOM_PROFILE_CLASSES = 24 }; /* 4^0 .. 4^23 bytes and more */
/* "to GPU"'s parts: lock, checks, choice, order, post. */
enum { LOOM_PROFILE_TO_GPU_PARTS = 5 };

typedef struct {
    uint64_t calls[LOOM_PROFILE_CLASSES];
    uint64_t first_ns[LOOM_PROFILE_CLASSES];                   /* the first call's total */
    uint64_t ns[LOOM_PROFILE_CLASSES][LOOM_PROFILE_PHASES];    /* the later calls' */
    uint64_t split_calls[LOOM_PROFILE_CLASSES];                /* later calls whose "to GPU" was split */
    uint64_t split_ns[LOOM_PROFILE_CLASSES][LOOM_PROFILE_TO_GPU_PARTS];
} mca_coll_loom_profile_t;

/* One call being timed: phase marks since its start. */
typedef struct {
    mca_coll_loom_profile_t *into; /* the call's collective's table; NULL: not profiling */
    size_t bytes;
    uint64_t last;                 /* ns of the previous mark */
    uint64_t ns[LOOM_PROFILE_PHASES];
    bool split;                    /* to_gpu holds "to GPU"'s parts */
    uint64_t to_gpu[LOOM_PROFILE_TO_GPU_PARTS];
} mca_coll_loom_timer_t;

/* Notes the time this thread's call entered the component (a no-op unless
 * LOOM_PROFILE); the next timer_start on this thread charges the time since
 * to "entry". */
void mca_coll_loom_profile_entered(void);
/* Starts timing a call of `coll` moving `bytes` into *table (made at the
 * first call; a no-op unless LOOM_PROFILE). */
void mca_coll_loom_timer_start(mca_coll_loom_profile_t **table, mca_coll_loom_timer_t *t, int coll, size_t bytes);
/* The time since the previous mark goes to `phase`. */
void mca_coll_loom_timer_mark(mca_coll_loom_timer_t *t, int phase);
/* The time from the previous mark to loomPostedNs() goes to "to GPU", where
 * the call posted since that mark. */
void mca_coll_loom_timer_posted(mca_coll_loom_timer_t *t);
/* Adds the call to its module's table. */
void mca_coll_loom_timer_stop(mca_coll_loom_timer_t *t);
/* Prints and frees a module's table (module destruction). */
void mca_coll_loom_profile_report(mca_coll_loom_profile_t **table, int rank, const char *comm_name);

#endif
