/*
 * The roll call of loom's host-side steps (coll_loom_setup.c): who is there?
 *
 * A step is a collective of the previous module; when it times out, it
 * cannot say which rank is missing. So every rank that waits in a step keeps
 * a receive posted for roll calls and answers each one while it waits. A
 * rank whose step timed out calls the roll: it asks every other rank and
 * names those that do not answer within 2 s: they are not
 * waiting in any of loom's set-up steps on this communicator (behind, in
 * other work, or gone). A rank that answers is named too when all do (then
 * the step itself is stuck, not a rank).
 *
 * Messages go point to point on the PML under two tags of their own, far at
 * the end of the range Open MPI leaves to coll components. Costs: a posted
 * receive and its cancellation per step; the roll call only after a
 * time-out. A question that reaches a rank after it left its steps stays
 * unmatched in its queue (a few bytes, only after a time-out elsewhere).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "coll_loom.h"

/* A rank's posted receive for roll calls while it waits in a step. */
typedef struct {
    ompi_request_t *req; /* NULL: none posted */
    int question;        /* the asker's step counter (unused but for tracing) */
} mca_coll_loom_roll_listen_t;

/* Posts the receive (where it fails, the rank just cannot answer). */
void mca_coll_loom_roll_listen(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);
/* Answers every question that came since the last look. */
void mca_coll_loom_roll_answer(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);
/* Cancels the posted receive (the step is over). */
void mca_coll_loom_roll_unlisten(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l);

/* Calls the roll (answering others meanwhile through l) and writes what it
 * found into text: "rank 1 (host h), rank 3 did not answer ..." or that
 * every rank answered. */
void mca_coll_loom_roll_call(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l, char *text, size_t len);
