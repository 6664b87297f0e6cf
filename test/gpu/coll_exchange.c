/*
 * GPU correctness of the exchanges through loom: MPI_Alltoall and
 * MPI_Alltoallv (ragged counts with zeros, receive blocks in reversed order
 * with gaps that must stay untouched, displacements from -1) x types {char,
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

/* One call; returns wrong bytes (+1 per error code). alltoallv passes its
 * buffers one element in, so the first blocks sit at displacement -1. */
static long one(MPI_Comm comm, const type_t *t, size_t base, int vector, int in_place, const int *world_of)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n), *rc = malloc(sizeof(int) * n),
        *rd = malloc(sizeof(int) * n);
    size_t sall = 0, rall = 0;
    for (int q = 0; q < n; ++q) { /* send blocks in rank order, receive blocks reversed with gaps */
        sc[q] = (int)(vector ? ragged(base, r, q, in_place) : base);
        rc[q] = (int)(vector ? ragged(base, q, r, in_place) : base);
    }
    for (int q = 0; q < n; ++q) sd[q] = (int)sall, sall += (size_t)sc[q];
    for (int q = n - 1; q >= 0; --q) rd[q] = (int)rall, rall += (size_t)rc[q] + (vector ? GAP : 0);
    if (!vector) /* alltoall: the receive blocks in rank order, back to back */
        for (int q = 0; q < n; ++q) rd[q] = q * (int)base;
    const size_t rbytes = rall * t->extent, sbytes = sall * t->extent, bsize = t->size;
    uint8_t *host = malloc(rbytes + sbytes + 1), *want = malloc(rbytes + 1);
    memset(want, SENTINEL, rbytes);
    for (int q = 0; q < n; ++q)
        for (size_t j = 0; j < (size_t)rc[q] * bsize; ++j) want[byte_at(t, (size_t)rd[q], j)] = pattern(world_of[q], world_of[r], j);
    void *sbuf = alloc(sbytes), *rbuf = alloc(rbytes);
    memset(host, SENTINEL, rbytes + sbytes);
    if (in_place) { /* the send blocks where the receive blocks are */
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)rc[q] * bsize; ++j) host[byte_at(t, (size_t)rd[q], j)] = pattern(world_of[r], world_of[q], j);
        put(rbuf, host, rbytes);
    } else {
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)sc[q] * bsize; ++j) host[byte_at(t, (size_t)sd[q], j)] = pattern(world_of[r], world_of[q], j);
        put(sbuf, host, sbytes);
        memset(host, SENTINEL, rbytes);
        put(rbuf, host, rbytes);
    }
    int err;
    if (vector) {
        for (int q = 0; q < n; ++q) --sd[q], --rd[q];
        char *s1 = (char *)sbuf + t->extent, *r1 = (char *)rbuf + t->extent;
        err = MPI_Alltoallv(in_place ? MPI_IN_PLACE : s1, sc, sd, t->t, r1, rc, rd, t->t, comm);
    } else {
        err = MPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, (int)base, t->t, rbuf, (int)base, t->t, comm);
    }
    long bad = err != MPI_SUCCESS;
    take(host, rbuf, rbytes);
    for (size_t i = 0; i < rbytes && !bad; ++i)
        if (host[i] != want[i]) {
            fprintf(stderr, "coll_exchange: %s base %zu x %zu/%zu B in_place %d: rank %d byte %zu = %u, want %u\n",
                    vector ? "alltoallv" : "alltoall", base, t->size, t->extent, in_place, r, i, host[i], want[i]);
            ++bad;
        }
    if (err != MPI_SUCCESS) fprintf(stderr, "coll_exchange: rank %d: error %d\n", r, err);
    release(sbuf);
    release(rbuf);
    free(host);
    free(want);
    free(sc); free(sd); free(rc); free(rd);
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
                for (int vector = 0; vector < 2; ++vector)
                    for (int ip = 0; ip < 2; ++ip, ++calls)
                        bad += one(comms[c], &types[t], counts[k], vector, ip, world_of);
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
