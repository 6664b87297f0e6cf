/*
 * The roll call of loom's host-side steps (coll_loom_roll_call.h).
 */
#include "coll_loom_roll_call.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono_clock.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "opal/util/proc.h"

/* INT_MIN + 2^24 - 2^19 + k: in 32 bits far at the end of the range Open
 * MPI leaves to coll components (hcoll's tags start at its other end); its
 * low 24 bits and its low 20 bits (what pml/ucx and mtl/ofi keep of a tag)
 * both read as -524277 + k, negative, as user tags never are. */
#define LOOM_TAG_ROLL_BASE (INT_MIN + (1 << 24) - (1 << 19))
#define LOOM_TAG_ROLL_ASK (LOOM_TAG_ROLL_BASE + 11)
#define LOOM_TAG_ROLL_HERE (LOOM_TAG_ROLL_BASE + 12)

/* How long a roll call waits for answers: ranks waiting in a step answer
 * within microseconds, from another host within milliseconds. */
static const double roll_call_seconds = 2.0;

/* An answer: any int; static, since sends are freed before they complete. */
static int here_word = 1;

static int64_t wall_microseconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* A send whose completion nobody waits for (the buffer outlives it). */
static void send_unwaited(mca_coll_loom_module_t *m, void *buf, struct ompi_datatype_t *type, int to, int tag)
{
    ompi_request_t *req = MPI_REQUEST_NULL;
    if (MPI_SUCCESS == MCA_PML_CALL(isend(buf, 1, type, to, tag, MCA_PML_BASE_SEND_STANDARD, m->comm, &req)))
        ompi_request_free(&req);
}

/* Cancels a posted receive and reaps it. */
static void cancel_recv(ompi_request_t **req)
{
    if (NULL == *req || MPI_REQUEST_NULL == *req) return;
    ompi_request_cancel(*req);
    ompi_request_wait(req, MPI_STATUS_IGNORE);
    *req = NULL;
}

void mca_coll_loom_roll_listen(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l)
{
    l->req = NULL;
    if (MPI_SUCCESS != MCA_PML_CALL(irecv(&l->question, 1, MPI_INT64_T, MPI_ANY_SOURCE, LOOM_TAG_ROLL_ASK, m->comm,
                                          &l->req)))
        l->req = NULL;
}

void mca_coll_loom_roll_answer(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l)
{
    while (NULL != l->req) {
        int done = 0;
        ompi_status_public_t st;
        if (MPI_SUCCESS != ompi_request_test(&l->req, &done, &st)) {
            l->req = NULL;
            return;
        }
        if (!done) return;
        const int from = st.MPI_SOURCE;
        if (NULL == l->asked) l->asked = (bool *)calloc((size_t)ompi_comm_size(m->comm), sizeof(bool));
        if (NULL != l->asked && from >= 0 && from < ompi_comm_size(m->comm)) l->asked[from] = true;
        if (wall_microseconds() < l->question) /* else its asker has moved on: no answer */
            send_unwaited(m, &here_word, MPI_INT, from, LOOM_TAG_ROLL_HERE);
        mca_coll_loom_roll_listen(m, l); /* the next question */
    }
}

void mca_coll_loom_roll_unlisten(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l)
{
    (void)m;
    cancel_recv(&l->req);
    free(l->asked);
    l->asked = NULL;
}

/* "rank 3 (host h)" appended to text. */
static void append_rank(mca_coll_loom_module_t *m, int q, bool first, char *text, size_t len)
{
    const size_t used = strlen(text);
    if (used + 1 >= len) return;
    const char *host = opal_get_proc_hostname(&ompi_comm_peer_lookup(m->comm, q)->super);
    snprintf(text + used, len - used, "%srank %d (host %s)", first ? "" : ", ", q, NULL != host ? host : "?");
}

void mca_coll_loom_roll_call(mca_coll_loom_module_t *m, mca_coll_loom_roll_listen_t *l, char *text, size_t len)
{
    const int n = ompi_comm_size(m->comm), me = ompi_comm_rank(m->comm);
    ompi_request_t **reqs = (ompi_request_t **)calloc((size_t)n, sizeof(*reqs));
    int *answers = (int *)calloc((size_t)n, sizeof(int));
    bool *here = (bool *)calloc((size_t)n, sizeof(bool));
    /* The question: this roll call's deadline, on the heap and never freed
     * (8 bytes, once per module that timed out): its sends are freed at once
     * and may still read it. */
    int64_t *deadline = (int64_t *)malloc(sizeof(*deadline));
    if (NULL == reqs || NULL == answers || NULL == here || NULL == deadline || len < 2) {
        free(reqs), free(answers), free(here), free(deadline);
        if (len > 0) snprintf(text, len, "no memory to call the roll");
        return;
    }
    if (NULL == l->req) mca_coll_loom_roll_listen(m, l);
    *deadline = wall_microseconds() + (int64_t)(roll_call_seconds * 1e6);
    int waiting = 0;
    for (int q = 0; q < n; ++q) {
        if (q == me) continue;
        if (MPI_SUCCESS != MCA_PML_CALL(irecv(&answers[q], 1, MPI_INT, q, LOOM_TAG_ROLL_HERE, m->comm, &reqs[q]))) {
            reqs[q] = NULL;
            continue;
        }
        ++waiting;
        send_unwaited(m, deadline, MPI_INT64_T, q, LOOM_TAG_ROLL_ASK);
    }
    const double end = loomMonotonicSeconds() + roll_call_seconds;
    while (waiting > 0 && loomMonotonicSeconds() < end) {
        mca_coll_loom_roll_answer(m, l); /* the others call the roll at about the same time */
        for (int q = 0; q < n; ++q) {
            int done = 0;
            if (NULL == reqs[q] || MPI_SUCCESS != ompi_request_test(&reqs[q], &done, MPI_STATUS_IGNORE) || !done)
                continue;
            reqs[q] = NULL;
            here[q] = true;
            --waiting;
        }
        const struct timespec nap = {0, 50 * 1000};
        nanosleep(&nap, NULL);
    }
    int absent = 0, named = 0;
    text[0] = '\0';
    for (int q = 0; q < n; ++q) {
        cancel_recv(&reqs[q]); /* an answer that comes later stays unmatched */
        if (q == me || here[q] || (NULL != l->asked && l->asked[q])) continue; /* asked: it was waiting too */
        if (named < 8) append_rank(m, q, 0 == named, text, len), ++named;
        ++absent;
    }
    const size_t used = strlen(text);
    if (0 == absent)
        snprintf(text, len, "every rank answered a roll call or called one: the step itself is stuck, not a rank");
    else if (used + 1 < len)
        snprintf(text + used, len - used, "%s did not answer a roll call within %.0f s: not in loom's set-up of this "
                 "communicator (behind, in other work, or gone)", absent > named ? " and others" : "",
                 roll_call_seconds);
    free(reqs), free(answers), free(here);
}
