/*
 * GPU correctness of the rooted collectives through loom: MPI_Gather,
 * MPI_Gatherv, MPI_Scatter and MPI_Scatterv x every root x types {char, int,
 * double, a contiguous type of 3 shorts, a pair of ints laid out differently
 * per rank (contiguous on even ranks, strided with a hole on odd ones)} x
 * counts {0, 1, 7, 1023, 2^20+3} x in place at the root / not x
 * communicators {world, dup, reversed, an odd-sized split}. v-forms: ragged
 * counts with zeros, the root's blocks in reversed rank order with gaps.
 * Every byte of every buffer is compared with what must be there: the
 * sender's bytes in the blocks, untouched sentinels in gaps and type holes;
 * leaves pass NULL for the arguments MPI ignores there on half the calls.
 *
 *   coll_rooted [-m device|host|mixed]
 * -m mixed: even ranks pass host buffers, odd ranks device buffers.
 */
#include "exchange_harness.h"
#include "large_count.h"

enum { GAP = 3, SENTINEL = 0xA5 };

/* Elements rank q has in a ragged call (0 for some). */
static int ragged(int base, int q) { return (int)((size_t)base * (size_t)((q * 7 + 3) % 4) / 2); }

typedef struct {
    int gather, vector, in_place, root, base, null_args;
} call_t;

/* One call; returns wrong bytes (+1 per error code). */
static long one(MPI_Comm comm, const type_t *t, const call_t *k, const int *world_of)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const int is_root = me == k->root;
    int *cnt = malloc(sizeof(int) * n), *dsp = malloc(sizeof(int) * n);
    size_t elems = 0; /* of the root's many-block buffer */
    for (int q = 0; q < n; ++q) cnt[q] = k->vector ? ragged(k->base, q) : k->base;
    for (int q = n - 1; q >= 0; --q) { /* v: reversed with gaps; fixed: rank order, back to back */
        dsp[q] = k->vector ? (int)elems : q * k->base;
        elems += (size_t)cnt[q] + (k->vector ? GAP : 0);
    }
    if (!k->vector) elems = (size_t)n * (size_t)k->base;
    const size_t many_bytes = elems * t->extent, one_bytes = (size_t)cnt[me] * t->extent;
    /* many: the root's n blocks; own: this rank's one block (gather: sent, scatter: received). */
    uint8_t *many_h = malloc(many_bytes + 1), *own_h = malloc(one_bytes + 1), *want = malloc(many_bytes + one_bytes + 1);
    memset(many_h, SENTINEL, many_bytes);
    memset(own_h, SENTINEL, one_bytes);
    const size_t bsize = t->size;
    const int root_w = world_of[k->root];
    /* Input bytes: a gather's own block and the root's blocks when in place
     * (its own one); a scatter's root blocks. */
    if (k->gather)
        for (size_t j = 0; j < (size_t)cnt[me] * bsize; ++j) {
            uint8_t v = pattern(world_of[me], root_w, j);
            if (is_root && k->in_place) many_h[byte_at(t, (size_t)dsp[me], j)] = v;
            else own_h[byte_at(t, 0, j)] = v;
        }
    else if (is_root)
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)cnt[q] * bsize; ++j) many_h[byte_at(t, (size_t)dsp[q], j)] = pattern(root_w, world_of[q], j);
    /* Wanted: the root's many buffer after a gather; every own buffer after a scatter (in place: the root's untouched). */
    memcpy(want, many_h, many_bytes);
    memcpy(want + many_bytes, own_h, one_bytes);
    if (k->gather && is_root)
        for (int q = 0; q < n; ++q)
            for (size_t j = 0; j < (size_t)cnt[q] * bsize; ++j) want[byte_at(t, (size_t)dsp[q], j)] = pattern(world_of[q], root_w, j);
    if (!k->gather && !(is_root && k->in_place))
        for (size_t j = 0; j < (size_t)cnt[me] * bsize; ++j) want[many_bytes + byte_at(t, 0, j)] = pattern(root_w, world_of[me], j);
    void *many = is_root ? alloc(many_bytes) : NULL, *own = alloc(one_bytes);
    if (is_root) put(many, many_h, many_bytes);
    put(own, own_h, one_bytes);
    /* Arguments MPI ignores on this rank: NULL on half the calls. */
    void *many_arg = is_root ? many : k->null_args ? NULL : own;
    const int *cnt_arg = is_root || !k->null_args ? cnt : NULL, *dsp_arg = is_root || !k->null_args ? dsp : NULL;
    void *own_arg = is_root && k->in_place ? MPI_IN_PLACE : own;
    int err;
    if (k->gather)
        err = k->vector ? MPI_Gatherv(own_arg, cnt[me], t->t, many_arg, cnt_arg, dsp_arg, t->t, k->root, comm)
                        : MPI_Gather(own_arg, k->base, t->t, many_arg, k->base, t->t, k->root, comm);
    else
        err = k->vector ? MPI_Scatterv(many_arg, cnt_arg, dsp_arg, t->t, own_arg, cnt[me], t->t, k->root, comm)
                        : MPI_Scatter(many_arg, k->base, t->t, own_arg, k->base, t->t, k->root, comm);
    long bad = err != MPI_SUCCESS;
    if (is_root) take(many_h, many, many_bytes);
    take(own_h, own, one_bytes);
    for (size_t i = 0; i < many_bytes + one_bytes && !bad; ++i) {
        const uint8_t got = i < many_bytes ? many_h[i] : own_h[i - many_bytes];
        if (i < many_bytes && !is_root) continue;
        if (got != want[i]) {
            fprintf(stderr, "coll_rooted: %s%s root %d base %d type %zu/%zu in_place %d: rank %d %s byte %zu = %u, want %u\n",
                    k->gather ? "gather" : "scatter", k->vector ? "v" : "", k->root, k->base, t->size, t->extent,
                    k->in_place, me, i < many_bytes ? "root buffer" : "own buffer", i < many_bytes ? i : i - many_bytes,
                    got, want[i]);
            ++bad;
        }
    }
    if (err != MPI_SUCCESS) fprintf(stderr, "coll_rooted: rank %d: error %d\n", me, err);
    if (is_root) release(many);
    release(own);
    free(many_h); free(own_h); free(want); free(cnt); free(dsp);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *mode = harness_start(argc, argv, "coll_rooted");
    if (!mode) {
        MPI_Finalize();
        return 77;
    }
    int wr, wn;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    type_t types[HARNESS_TYPES];
    harness_types(types);
    const int counts[] = {0, 1, 7, 1023, (int)large_count((1 << 20) + 3)};
    MPI_Comm comms[HARNESS_COMMS];
    harness_comms(comms);
    long bad = 0, calls = 0;
    for (int c = 0; c < 4; ++c) {
        int n;
        MPI_Comm_size(comms[c], &n);
        int *world_of = malloc(sizeof(int) * n);
        MPI_Allgather(&wr, 1, MPI_INT, world_of, 1, MPI_INT, comms[c]);
        for (int t = 0; t < HARNESS_TYPES; ++t)
            for (size_t b = 0; b < sizeof(counts) / sizeof(counts[0]); ++b) {
                const int large = counts[b] > 1024;
                if (large && (t % 2 || c % 2)) continue; /* the large count on some cases */
                for (int root = 0; root < n; ++root) {
                    if (large && root != 0 && root != n - 1) continue;
                    for (int g = 0; g < 4; ++g, ++calls) {
                        call_t k = {g & 1, g >> 1, (int)((root + b + t) % 2), root, counts[b], (int)((c + b + g) % 2)};
                        bad += one(comms[c], &types[t], &k, world_of);
                    }
                }
            }
        free(world_of);
    }
    long tot[2] = {bad, calls};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (!wr) printf("coll_rooted: %d ranks, memory %s: %ld calls (summed over ranks), %ld wrong bytes or errors\n", wn,
                    mode, tot[1], tot[0]);
    for (int c = 0; c < 4; ++c) MPI_Comm_free(&comms[c]);
    harness_free_types(types);
    MPI_Finalize();
    return tot[0] ? 1 : 0;
}
