/*
 * GPU correctness of the exchanges through loom: MPI_Alltoall,
 * MPI_Alltoallv (ragged counts with zeros, receive blocks in reversed order
 * with gaps that must stay untouched, displacements from -1) and
 * MPI_Alltoallw (the same at byte displacements, each block of the type or
 * of it with a hole, per rank and peer) x types {char,
 * int, double, a contiguous type of 3 shorts, a pair of ints laid out
 * differently per rank: contiguous or strided with a hole} x counts {0, 1,
 * 7, 1023, 2^20+3} x in place / not x communicators {world, dup, reversed,
 * an odd-sized split}. Every byte is compared with what its sender put there
 * (holes and gaps: untouched).
 *
 *   coll_exchange [-m device|host|mixed]
 * -m mixed: even ranks pass host buffers, odd ranks device buffers.
 */
#include "exchange_harness.h"

enum { GAP = 5, SENTINEL = 0xA5 };

/* Elements rank a sends rank b in the ragged case (symmetric when sym: an
 * in-place alltoallv sends what it receives). */
static size_t ragged(size_t base, int a, int b, int sym)
{
    if (sym && a > b) { int t = a; a = b; b = t; }
    const int k = (a * 7 + b * 3) % 4; /* 0: nothing */
    return base * (size_t)k / 2;
}

static const char *const form_names[3] = {"alltoall", "alltoallv", "alltoallw"};

/* One call of form 0 (alltoall), 1 (alltoallv) or 2 (alltoallw); returns
 * wrong bytes (+1 per error code). Send blocks in rank order, receive
 * blocks reversed with GAP elements between (alltoall: in rank order, back
 * to back); alltoallv passes its buffers one element in, so the first
 * blocks sit at displacement -1. alltoallw: alltoallv's ragged counts, each
 * block of its own type at a byte displacement. On even ranks of comm block
 * q is t or a duplicate of it (both contiguous for all but the strided
 * pair: the rank keeps its buffers); on odd ranks t or t resized with a
 * 4-byte hole after each element (same type signature, not contiguous: the
 * rank packs), chosen per peer. Its blocks start at byte 8, its gaps are
 * GAP bytes, and both buffers are passed 16 bytes in, so the first
 * displacement is -8. */
static long one(MPI_Comm comm, const type_t *t, size_t base, int form, int in_place, const int *world_of)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Datatype other = t->t; /* of the same signature */
    size_t other_extent = t->extent;
    if (form == 2) {
        if (r % 2) MPI_Type_create_resized(t->t, 0, (MPI_Aint)(t->extent + 4), &other);
        else MPI_Type_dup(t->t, &other);
        MPI_Type_commit(&other);
        other_extent += r % 2 ? 4 : 0;
    }
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n), *rc = malloc(sizeof(int) * n),
        *rd = malloc(sizeof(int) * n);
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * n), *rt = malloc(sizeof(MPI_Datatype) * n);
    /* each block's extent and its byte offset from the buffer's start */
    size_t *sx = malloc(sizeof(size_t) * n), *rx = malloc(sizeof(size_t) * n), *so = malloc(sizeof(size_t) * n),
           *ro = malloc(sizeof(size_t) * n);
    for (int q = 0; q < n; ++q) {
        sc[q] = (int)(form ? ragged(base, r, q, in_place) : base);
        rc[q] = (int)(form ? ragged(base, q, r, in_place) : base);
        const int other_s = form == 2 && q % 2 == 0, other_r = form == 2 && (r / 2 + q) % 2 == 1;
        st[q] = other_s ? other : t->t, sx[q] = other_s ? other_extent : t->extent;
        rt[q] = other_r ? other : t->t, rx[q] = other_r ? other_extent : t->extent;
    }
    const size_t gap = form == 2 ? GAP : form == 1 ? GAP * t->extent : 0;
    size_t sall = form == 2 ? 8 : 0, rall = sall;
    for (int q = 0; q < n; ++q) so[q] = sall, sall += (size_t)sc[q] * sx[q];
    for (int q = n - 1; q >= 0; --q) ro[q] = rall, rall += (size_t)rc[q] * rx[q] + gap;
    if (!form)
        for (int q = 0; q < n; ++q) ro[q] = (size_t)q * base * t->extent;
    const size_t bsize = t->size;
    uint8_t *host = malloc(rall + sall + 1), *want = malloc(rall + 1);
    memset(want, SENTINEL, rall);
    for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < (size_t)rc[q] * bsize; ++j) want[block_byte(t, rx[q], ro[q], j)] = pattern(world_of[q], world_of[r], j);
    void *sbuf = alloc(sall), *rbuf = alloc(rall);
    memset(host, SENTINEL, rall + sall);
    if (in_place) { /* the send blocks where the receive blocks are, of the receive types */
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)rc[q] * bsize; ++j) host[block_byte(t, rx[q], ro[q], j)] = pattern(world_of[r], world_of[q], j);
        put(rbuf, host, rall);
    } else {
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)sc[q] * bsize; ++j) host[block_byte(t, sx[q], so[q], j)] = pattern(world_of[r], world_of[q], j);
        put(sbuf, host, sall);
        memset(host, SENTINEL, rall);
        put(rbuf, host, rall);
    }
    /* displacements from the pointers passed: elements one in (alltoallv), bytes 16 in (alltoallw) */
    const ptrdiff_t in = form == 2 ? 16 : (ptrdiff_t)t->extent, unit = form == 2 ? 1 : (ptrdiff_t)t->extent;
    for (int q = 0; q < n; ++q) sd[q] = (int)(((ptrdiff_t)so[q] - in) / unit), rd[q] = (int)(((ptrdiff_t)ro[q] - in) / unit);
    char *s1 = (char *)sbuf + in, *r1 = (char *)rbuf + in;
    int err;
    if (form == 2) err = MPI_Alltoallw(in_place ? MPI_IN_PLACE : s1, sc, sd, st, r1, rc, rd, rt, comm);
    else if (form == 1) err = MPI_Alltoallv(in_place ? MPI_IN_PLACE : s1, sc, sd, t->t, r1, rc, rd, t->t, comm);
    else err = MPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, (int)base, t->t, rbuf, (int)base, t->t, comm);
    long bad = err != MPI_SUCCESS;
    take(host, rbuf, rall);
    for (size_t i = 0; i < rall && !bad; ++i)
        if (host[i] != want[i]) {
            fprintf(stderr, "coll_exchange: %s base %zu x %zu/%zu B in_place %d: rank %d byte %zu = %u, want %u\n",
                    form_names[form], base, t->size, t->extent, in_place, r, i, host[i], want[i]);
            ++bad;
        }
    if (err != MPI_SUCCESS) fprintf(stderr, "coll_exchange: rank %d: %s error %d\n", r, form_names[form], err);
    release(sbuf);
    release(rbuf);
    free(host);
    free(want);
    free(sc); free(sd); free(rc); free(rd); free(st); free(rt); free(sx); free(rx); free(so); free(ro);
    if (form == 2) MPI_Type_free(&other);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *mode = harness_start(argc, argv, "coll_exchange");
    if (!mode) {
        MPI_Finalize();
        return 77;
    }
    int wr, wn;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    type_t types[HARNESS_TYPES];
    harness_types(types);
    const size_t counts[] = {0, 1, 7, 1023, (1u << 20) + 3};
    MPI_Comm comms[HARNESS_COMMS];
    harness_comms(comms);
    long bad = 0, calls = 0;
    for (int c = 0; c < 4; ++c) {
        int n;
        MPI_Comm_size(comms[c], &n);
        int *world_of = malloc(sizeof(int) * n);
        MPI_Allgather(&wr, 1, MPI_INT, world_of, 1, MPI_INT, comms[c]);
        for (size_t t = 0; t < HARNESS_TYPES; ++t)
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
                if (counts[k] > 1024 && (t % 2 || c % 2)) continue; /* the large count on half the cases */
                for (int form = 0; form < 3; ++form) /* alltoall, alltoallv, alltoallw */
                    for (int ip = 0; ip < 2; ++ip, ++calls)
                        bad += one(comms[c], &types[t], counts[k], form, ip, world_of);
            }
        free(world_of);
    }
    long tot[2] = {bad, calls};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (!wr) printf("coll_exchange: %d ranks, memory %s: %ld calls (summed over ranks), %ld wrong bytes or errors\n", wn,
                    mode, tot[1], tot[0]);
    for (int c = 0; c < 4; ++c) MPI_Comm_free(&comms[c]);
    harness_free_types(types);
    MPI_Finalize();
    return tot[0] ? 1 : 0;
}
