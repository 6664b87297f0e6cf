/*
 * Persistent collectives (MPI-4's MPI_Allreduce_init and friends; Open
 * MPI 4.1's pcollreq MPIX_*_init), every one the coll framework has: init
 * (the thunk of coll_loom_overrides.c) keeps the call's arguments
 * (coll_loom_args.h, retaining its
 * communicator, op and the datatypes it reads: hold_args) in an inactive
 * persistent request; every MPI_Start dispatches the non-blocking twin with
 * them, so each start takes exactly the path a non-blocking call would
 * (loom's kernels, staged or delegated alike on every rank, kept behind a
 * set-up in flight), and the request completes with it
 * (coll_loom_request.h). All of them, not only those loom's kernels run: a
 * start that went to the previous module directly would overtake kept
 * calls on some ranks only. The w-forms' arrays (counts, displacements,
 * datatypes) are the caller's until the request is freed; the datatypes in
 * them are retained like the others.
 */
#include "coll_loom_args.h"
#include "coll_loom_defer.h"
#include "coll_loom_exchange.h"
#include "coll_loom_pack.h"
#include "coll_loom_request.h"

#include <stdlib.h>

/* Takes (+1) or drops (-1) a reference on the objects the call reads on
 * this rank: its op, and the datatypes MPI reads here (the w-forms': every
 * block's with elements). MPI lets the program free them after init, and
 * lets it pass anything (an unset or freed handle) where a type is not read:
 * a send type in place, a gather's receive type off the root, a rooted
 * call's types on an intercommunicator's MPI_PROC_NULL ranks. Open MPI's
 * binding retains nothing for a persistent request (it is complete then);
 * for a non-blocking call it retains them on the request loom returns. */
static void hold_args(const mca_coll_loom_call_args_t *a, int delta)
{
    bool s = MPI_IN_PLACE != a->sbuf, r = true;
    const bool root = mca_coll_loom_is_root(a->comm, a->root), leaf = mca_coll_loom_is_leaf(a->comm, a->root);
    switch (a->coll) {
    case LOOM_COLL_igather: case LOOM_COLL_igatherv:
        r = root;
        s = leaf && (!root || MPI_IN_PLACE != a->sbuf);
        break;
    case LOOM_COLL_iscatter: case LOOM_COLL_iscatterv:
        s = root;
        r = leaf && (!root || MPI_IN_PLACE != a->rbuf);
        break;
    case LOOM_COLL_ibcast: case LOOM_COLL_ireduce: /* one type (in sdt), read by the root and the leaves */
        s = root || leaf;
        break;
    case LOOM_COLL_iallreduce: case LOOM_COLL_ireduce_scatter: case LOOM_COLL_ireduce_scatter_block:
    case LOOM_COLL_iscan: case LOOM_COLL_iexscan: /* one type (in sdt), in place or not */
        s = true;
        break;
    default: break; /* the rest: the send side unless in place, the receive side */
    }
    if (s) mca_coll_loom_hold(a->sdt, delta);
    if (r) mca_coll_loom_hold(a->rdt, delta);
    if (s) mca_coll_loom_hold(a->op, delta);
    if (NULL == a->sdts && NULL == a->rdts) return;
    /* The w-forms: alltoallw a block per peer, neighbor_alltoallw per
     * neighbour. The arrays are the program's until the request is freed. */
    const loom_blocks_t nb = LOOM_COLL_ineighbor_alltoallw == a->coll ? mca_coll_loom_neighbor_blocks(a->comm)
                                                                      : mca_coll_loom_peer_blocks(a->comm);
    const loom_typed_blocks_t snd = {.dts = a->sdts, .n = nb.out, .counts = a->scounts};
    const loom_typed_blocks_t rcv = {.dts = a->rdts, .n = nb.in, .counts = a->rcounts};
    if (s) mca_coll_loom_hold_block_types(&snd, delta);
    mca_coll_loom_hold_block_types(&rcv, delta);
}

static void release(mca_coll_loom_call_args_t *a)
{
    hold_args(a, -1);
    OBJ_RELEASE(a->comm);
    free(a);
}

/* Each MPI_Start: the dispatcher, as the non-blocking call (a->coll). */
static int start(mca_coll_loom_call_args_t *a, ompi_request_t **inner)
{
    return mca_coll_loom_dispatch(a, inner);
}

static const mca_coll_loom_persistent_ops_t persistent_ops = {start, release};

int mca_coll_loom_persistent_init(const mca_coll_loom_call_args_t *a, ompi_request_t **req)
{
    mca_coll_loom_call_args_t *k = malloc(sizeof(*k));
    if (NULL == k) return MPI_ERR_NO_MEM;
    *k = *a;
    OBJ_RETAIN(k->comm); /* a start after MPI_Comm_free still finds it */
    hold_args(k, +1);
    return mca_coll_loom_request_persistent(k->m, &persistent_ops, k, req);
}
