/*
 * The roll call of loom's host-side steps (coll_loom_setup.c): who is there?
 *
 * A step is a collective of the previous module; when it times out, it
 * cannot say which rank is missing. So every rank that waits in a step (past
 * its first millisecond) keeps a receive posted for roll calls and answers
 * each one while it waits. A rank whose step timed out calls the roll: it
 * asks every other rank and names those that neither answer within 2 s nor
 * asked it themselves (a rank that asked was waiting too, and may have given
 * up before this one asked): they are not waiting in any of loom's set-up
 * steps on this communicator (behind, in other work, or gone). When every
 * rank is accounted for, the step itself is stuck, not a rank.
 *
 * A question carries its asker's deadline (wall clock): a rank that finds it
 * later (it arrived late) does not answer, so that no answer reaches a
 * communicator its asker may have freed since. Messages go point to point on
 * the PML under two tags of loom's own: negative in 32 bits (ob1: the end of
 * the range Open MPI leaves to coll components) and still negative once a
 * PML keeps only their low 24 or 20 bits (pml/ucx, mtl/ofi), where user tags
 * and MPI_ANY_TAG cannot match them. A question that reaches a rank after it
 * left its steps stays unmatched in its queue until the communicator goes
 * (a few bytes, only after a time-out elsewhere).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_loom.h"

/* A rank's posted receive for roll calls while it waits in a step. */
typedef struct {
    ompi_request_t *req; /* NULL: none posted */
    int64_t question;    /* the asker's deadline, wall-clock microseconds */
    bool *asked;         /* per rank: it asked this one (it was waiting too); NULL until the first question */
} mca_coll_loom_roll_listen_t;

/* Posts the receive (where it fails, the rank just cannot answer). */
void mca_coll_loom_roll_listen(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);
/* Answers every question that came since the last look (none posted: nothing). */
void mca_coll_loom_roll_answer(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);
/* Cancels the posted receive (the step is over) and frees what l holds. */
void mca_coll_loom_roll_unlisten(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);

/* Calls the roll (answering others meanwhile through l, which it posts if
 * it is not yet) and writes what it found into text: "rank 1 (host h),
 * rank 3 (host g) did not answer ..." or that every rank is accounted for. */
void mca_coll_loom_roll_call(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l, char *text, size_t len);
