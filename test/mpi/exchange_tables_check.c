/*
 * CPU check of the exchanges' host side, end to end without a GPU:
 * mca_coll_loom_exchange_blocks (coll_loom_blocks.c, with coll_loom_pack.c)
 * turns a rank's typed send and receive blocks into the byte tables and
 * buffers loom's exchange kernel moves, packing where a type is not
 * contiguous and unpacking in the call's after-work. Here a stand-in for
 * mca_coll_loom_gpu_exec moves exactly those bytes as the kernel would (an
 * MPI_Alltoallv of MPI_BYTE over the tables, checked to stay inside the
 * buffers the call declares) and runs the after-work. The result must equal
 * Open MPI's own MPI_Alltoallw / MPI_Alltoallv of the same arguments, every
 * byte of the receive buffer (gaps and holes included): alltoallw with a
 * type per block at byte displacements (int, a duplicate, and int with a
 * hole after, before, or around it), alltoallv with one type, in place or not, ragged
 * counts with empty blocks. The blocks are built as alltoallw_gpu and
 * alltoallv_gpu (coll_loom_movement.c) build them. Host buffers; loom
 * deselected (its code is linked in).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_blocks.h"
#include "exchange_standin.h"

/* Blocks start from FIRST bytes into the buffers (rounded up to whole
 * extents), which are passed BASE bytes in (a multiple of every extent): the
 * first displacements are negative. */
enum { NTYPES = 5, K = 3, FIRST = 8, BASE = 24, GAP = 5, SENTINEL = 0xA5 };

/* Types of one int each (the same signature): int, a duplicate, int with
 * a 4-byte hole after it, int with a 4-byte hole before it (true lb 4),
 * and int with holes both sides (lb -4, extent 12). The last three are not
 * contiguous: a rank with one of them packs. */
static MPI_Datatype types[NTYPES];
static MPI_Aint extents[NTYPES];
static const char *const names[NTYPES] = {"int", "dup(int)", "int+hole", "hole+int", "resized(int,-4,12)"};

static void make_types(void)
{
    types[0] = MPI_INT;
    MPI_Type_dup(MPI_INT, &types[1]);
    MPI_Type_create_resized(MPI_INT, 0, 8, &types[2]);
    int bl = 1;
    MPI_Aint at = 4;
    MPI_Datatype t;
    MPI_Type_create_struct(1, &bl, &at, &types[0], &t);
    MPI_Type_create_resized(t, 0, 8, &types[3]);
    MPI_Type_free(&t);
    MPI_Type_create_resized(MPI_INT, -4, 12, &types[4]);
    for (int k = 0; k < NTYPES; ++k) {
        if (k) MPI_Type_commit(&types[k]);
        MPI_Aint lb;
        MPI_Type_get_extent(types[k], &lb, &extents[k]);
    }
}

/* Ints rank a sends rank b (symmetric in place; none empty there: Open MPI
 * 4.1's in-place exchanges hang after an empty pair, open-mpi/ompi#12280). */
static int ragged(int a, int b, int in_place)
{
    return in_place ? ((a + b) % 3 + 1) * K : ((a * 7 + b * 3) % 4) * K;
}

/* One call both ways; w: alltoallw (type per block, byte displacements),
 * else alltoallv with types[mix] for every block. */
static void one(int w, int mix, int in_place)
{
    int r, n;
    MPI_Comm_rank(exec_comm, &r);
    MPI_Comm_size(exec_comm, &n);
    int *sc = malloc(6 * sizeof(int) * (size_t)n), *sd = sc + n, *rc = sd + n, *rd = rc + n, *sdb = rd + n,
        *rdb = sdb + n;
    MPI_Datatype *st = malloc(2 * sizeof(MPI_Datatype) * (size_t)n), *rt = st + n;
    size_t sall = FIRST, rall = FIRST;
    for (int q = 0; q < n; ++q) {
        sc[q] = ragged(r, q, in_place), rc[q] = ragged(q, r, in_place);
        st[q] = types[w ? (r + 2 * q + mix) % NTYPES : mix];
        rt[q] = types[w ? (r + q + mix) % NTYPES : mix];
    }
    const MPI_Aint ext = extents[mix];
    for (int q = 0; q < n; ++q) { /* send blocks in rank order; element displacements for alltoallv */
        MPI_Aint e;
        MPI_Type_get_extent(st[q], &(MPI_Aint){0}, &e);
        sall = (sall + (size_t)ext - 1) / (size_t)ext * (size_t)ext; /* alltoallv: at whole extents */
        sdb[q] = (int)sall - BASE, sd[q] = sdb[q] / (int)ext;
        sall += (size_t)sc[q] * (size_t)e;
    }
    for (int q = n - 1; q >= 0; --q) { /* receive blocks reversed, with gaps */
        MPI_Aint e;
        MPI_Type_get_extent(rt[q], &(MPI_Aint){0}, &e);
        rall = (rall + (size_t)ext - 1) / (size_t)ext * (size_t)ext;
        rdb[q] = (int)rall - BASE, rd[q] = rdb[q] / (int)ext;
        rall += (size_t)rc[q] * (size_t)e + GAP;
    }
    sall += BASE, rall += BASE; /* slack past the last block */
    unsigned char *sbuf = malloc(sall), *ref = malloc(rall), *got = malloc(rall);
    for (size_t i = 0; i < sall; ++i) sbuf[i] = (unsigned char)(r * 31 + i * 7 + 1);
    for (size_t i = 0; i < rall; ++i) ref[i] = in_place ? (unsigned char)(r * 29 + i * 5 + 3) : SENTINEL;
    memcpy(got, ref, rall);
    void *s0 = in_place ? MPI_IN_PLACE : (void *)(sbuf + BASE);
    int err = w ? MPI_Alltoallw(s0, sc, sdb, st, ref + BASE, rc, rdb, rt, exec_comm)
                : MPI_Alltoallv(s0, sc, sd, st[0], ref + BASE, rc, rd, rt[0], exec_comm);
    if (MPI_SUCCESS != err) ++bad;
    /* loom's side, built as alltoallw_gpu / alltoallv_gpu build it */
    mca_coll_loom_module_t m;
    memset(&m, 0, sizeof(m));
    loom_gpu_call_t c;
    void *r0 = got + BASE;
    ompi_communicator_t *comm = (ompi_communicator_t *)exec_comm;
    mca_coll_loom_exchange_call(&c, w ? LOOM_COLL_alltoallw : LOOM_COLL_alltoallv, comm, NULL, s0, false, r0, false);
    loom_typed_blocks_t snd = {.user = sbuf + BASE, .n = n, .counts = sc}, rcv = {.user = r0, .n = n, .counts = rc};
    if (w) snd.dts = st, snd.displs = sdb, rcv.dts = rt, rcv.displs = rdb;
    else snd.dt = st[0], snd.displs = sd, rcv.dt = rt[0], rcv.displs = rd;
    const long calls = exec_calls;
    err = mca_coll_loom_exchange_blocks(&m, &c, in_place ? &rcv : &snd, &rcv);
    if (MPI_SUCCESS != err || exec_calls != calls + 1) ++bad;
    for (size_t i = 0; i < rall; ++i)
        if (got[i] != ref[i]) {
            fprintf(stderr, "exchange_tables_check: %s %s%s: rank %d byte %zu = %u, Open MPI wrote %u\n",
                    w ? "alltoallw" : "alltoallv", names[mix], in_place ? " in place" : "", r, i, got[i], ref[i]);
            ++bad;
            break;
        }
    free(m.exchange_tables);
    free(sbuf), free(ref), free(got), free(sc), free(st);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    exec_comm = MPI_COMM_WORLD;
    make_types();
    long cases = 0;
    for (int w = 0; w < 2; ++w)
        for (int mix = 0; mix < NTYPES; ++mix)
            for (int in_place = 0; in_place < 2; ++in_place, ++cases) one(w, mix, in_place);
    long tot[2] = {bad, exec_calls};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (tot[1] != cases * n) ++tot[0]; /* every case ran through the stand-in on every rank */
    if (!r)
        printf("exchange_tables_check: %d ranks, %ld cases (alltoallw and alltoallv, %d types, in place or not), "
               "%ld exchanges, %ld wrong\n", n, cases, NTYPES, tot[1], tot[0]);
    for (int k = 1; k < NTYPES; ++k) MPI_Type_free(&types[k]);
    MPI_Finalize();
    return tot[0] ? 1 : 0;
}
