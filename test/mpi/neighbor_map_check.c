/*
 * CPU check of the neighbourhood collectives on loom's exchange
 * (coll_loom_neighbor_map.c), without a GPU: on Cartesian, graph and
 * distributed-graph topologies (MPI_PROC_NULL neighbours, a self edge,
 * in-lists in another order than the out-lists, a rank without neighbours),
 * the map must say which
 * neighbourhoods fit the exchange (no rank listed twice), and for those
 * that fit, every neighbourhood collective's arguments through the
 * component's own steps (mca_coll_loom_neighbor_blocks_of: per-neighbour
 * blocks -> blocks by rank -> the exchange's byte tables, packing where a
 * type is not contiguous) must write every byte of
 * the receive buffer as Open MPI's own MPI_Neighbor_* does with the same
 * arguments (gaps, holes and PROC_NULL blocks untouched). The kernel's byte
 * moves are stood in by MPI (exchange_standin.h); loom itself deselected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_blocks.h"
#include "coll_loom_neighbor_map.h"
#include "exchange_standin.h"

enum { NTYPES = 3, K = 3, SENTINEL = 0xA5 };
enum { ALLGATHER, ALLTOALL, ALLGATHERV, ALLTOALLV, ALLTOALLW, NCOLLS };
static const char *const coll_names[NCOLLS] = {"allgather", "alltoall", "allgatherv", "alltoallv", "alltoallw"};
static const int coll_ids[NCOLLS] = {LOOM_COLL_neighbor_allgather, LOOM_COLL_neighbor_alltoall,
                                     LOOM_COLL_neighbor_allgatherv, LOOM_COLL_neighbor_alltoallv,
                                     LOOM_COLL_neighbor_alltoallw};

/* int, int with a hole after it, int with a hole before it (the last two pack). */
static MPI_Datatype types[NTYPES];
static const char *const type_names[NTYPES] = {"int", "int+hole", "hole+int"};

static void make_types(void)
{
    types[0] = MPI_INT;
    MPI_Type_create_resized(MPI_INT, 0, 8, &types[1]);
    int bl = 1;
    MPI_Aint at = 4;
    MPI_Datatype t;
    MPI_Type_create_struct(1, &bl, &at, &types[0], &t);
    MPI_Type_create_resized(t, 0, 8, &types[2]);
    MPI_Type_free(&t);
    MPI_Type_commit(&types[1]);
    MPI_Type_commit(&types[2]);
}

/* MPI_UNWEIGHTED out of the compiler's sight (Open MPI's is a pointer to an
 * empty object, which GCC takes for an array too short to pass). */
__attribute__((noinline)) static int *unweighted(void) { return MPI_UNWEIGHTED; }

static MPI_Aint extent_of(MPI_Datatype t)
{
    MPI_Aint lb, e;
    MPI_Type_get_extent(t, &lb, &e);
    return e;
}

typedef struct {
    const char *name;
    MPI_Comm comm;
    int fits; /* expected: no rank listed twice anywhere */
    int indeg, outdeg;
    int *in, *out; /* as MPI's own neighbour queries give them */
} topo_t;

/* This rank's lists through MPI's own queries (not loom's code). */
static void lists_of(topo_t *t)
{
    int status, r;
    MPI_Topo_test(t->comm, &status);
    MPI_Comm_rank(t->comm, &r);
    if (MPI_CART == status) {
        int nd;
        MPI_Cartdim_get(t->comm, &nd);
        t->indeg = t->outdeg = 2 * nd;
        t->in = malloc(2 * (size_t)(2 * nd + 1) * sizeof(int)), t->out = t->in + 2 * nd + 1;
        for (int d = 0; d < nd; ++d) MPI_Cart_shift(t->comm, d, 1, &t->in[2 * d], &t->in[2 * d + 1]);
        memcpy(t->out, t->in, (size_t)(2 * nd) * sizeof(int));
    } else if (MPI_GRAPH == status) {
        MPI_Graph_neighbors_count(t->comm, r, &t->indeg);
        t->outdeg = t->indeg;
        t->in = malloc(2 * (size_t)(t->indeg + 1) * sizeof(int)), t->out = t->in + t->indeg + 1;
        MPI_Graph_neighbors(t->comm, r, t->indeg, t->in);
        memcpy(t->out, t->in, (size_t)t->indeg * sizeof(int));
    } else {
        int weighted;
        MPI_Dist_graph_neighbors_count(t->comm, &t->indeg, &t->outdeg, &weighted);
        t->in = malloc(((size_t)t->indeg + (size_t)t->outdeg + 2) * sizeof(int)), t->out = t->in + t->indeg + 1;
        MPI_Dist_graph_neighbors(t->comm, t->indeg, t->in, unweighted(), t->outdeg, t->out, unweighted());
    }
}

/* Elements rank a sends rank b in the v- and w-forms (some pairs empty). */
static int edge_count(int a, int b) { return ((a * 7 + b * 3 + 1) % 4) * K; }
/* Elements rank a sends every neighbour in allgatherv. */
static int own_count(int a) { return (a % 3 + 1) * K; }

/* One collective with types[mix] (alltoallw: a type per block from mix on). */
static void one(const topo_t *t, int coll, int mix, loom_neighbor_map_t *map)
{
    int r;
    MPI_Comm_rank(t->comm, &r);
    const int di = t->indeg, dout = t->outdeg;
    int *sc = calloc(4 * (size_t)(di + dout) + 4, sizeof(int)), *sd = sc + dout + 1, *rc = sd + dout + 1,
        *rd = rc + di + 1;
    MPI_Aint *sdb = calloc(2 * (size_t)(di + dout) + 2, sizeof(MPI_Aint)), *rdb = sdb + dout + 1;
    MPI_Datatype *st = calloc((size_t)(di + dout) + 2, sizeof(MPI_Datatype)), *rt = st + dout + 1;
    const MPI_Datatype one_type = types[mix];
    const MPI_Aint ext = extent_of(one_type);
    size_t s_len = 0, r_len = 0; /* bytes */
    for (int j = 0; j < dout; ++j) {
        st[j] = ALLTOALLW == coll ? types[(mix + r + j) % NTYPES] : one_type;
        sc[j] = ALLTOALLV <= coll && MPI_PROC_NULL != t->out[j] ? edge_count(r, t->out[j]) : K;
        sdb[j] = (MPI_Aint)s_len, sd[j] = (int)(s_len / (size_t)ext); /* in order, a gap of one extent */
        s_len += (size_t)sc[j] * (size_t)extent_of(st[j]) + (size_t)ext;
    }
    if (ALLGATHER == coll || ALLGATHERV == coll) s_len = (size_t)(ALLGATHERV == coll ? own_count(r) : K) * ext;
    if (ALLTOALL == coll) s_len = (size_t)dout * K * ext;
    for (int j = di - 1; j >= 0; --j) { /* reversed, gaps; PROC_NULL blocks too (they stay untouched) */
        const int from = t->in[j];
        rt[j] = ALLTOALLW == coll ? types[(mix + from + 2 * j + 2) % NTYPES] : one_type;
        rc[j] = ALLTOALLV <= coll ? (MPI_PROC_NULL == from ? K : edge_count(from, r))
              : ALLGATHERV == coll ? (MPI_PROC_NULL == from ? K : own_count(from)) : K;
        rdb[j] = (MPI_Aint)r_len, rd[j] = (int)(r_len / (size_t)ext);
        r_len += (size_t)rc[j] * (size_t)extent_of(rt[j]) + (size_t)ext;
    }
    if (ALLGATHER == coll || ALLTOALL == coll) r_len = (size_t)di * K * ext;
    /* alltoallw: a receive type's signature must match its sender's; every type here is one int */
    unsigned char *sbuf = malloc(s_len + 1), *ref = malloc(r_len + 1), *got = malloc(r_len + 1);
    for (size_t i = 0; i < s_len; ++i) sbuf[i] = (unsigned char)(r * 31 + i * 7 + 1);
    memset(ref, SENTINEL, r_len + 1);
    memset(got, SENTINEL, r_len + 1);
    int err = MPI_ERR_OTHER;
    switch (coll) {
    case ALLGATHER: err = MPI_Neighbor_allgather(sbuf, K, one_type, ref, K, one_type, t->comm); break;
    case ALLTOALL: err = MPI_Neighbor_alltoall(sbuf, K, one_type, ref, K, one_type, t->comm); break;
    case ALLGATHERV:
        err = MPI_Neighbor_allgatherv(sbuf, own_count(r), one_type, ref, rc, rd, one_type, t->comm);
        break;
    case ALLTOALLV: err = MPI_Neighbor_alltoallv(sbuf, sc, sd, one_type, ref, rc, rd, one_type, t->comm); break;
    default: err = MPI_Neighbor_alltoallw(sbuf, sc, sdb, st, ref, rc, rdb, rt, t->comm);
    }
    if (MPI_SUCCESS != err) ++bad;
    /* loom's side: the call's arguments as coll_loom_neighbor.c passes them on */
    mca_coll_loom_call_args_t a = {
        .sbuf = sbuf, .rbuf = got, .sdt = one_type, .rdt = one_type, .comm = (ompi_communicator_t *)t->comm};
    switch (coll) {
    case ALLGATHER: a.scount = a.rcount = K; break;
    case ALLTOALL: a.scount = a.rcount = K; break;
    case ALLGATHERV: a.scount = own_count(r), a.rcounts = rc, a.rdispls = rd; break;
    case ALLTOALLV: a.scounts = sc, a.sdispls = sd, a.rcounts = rc, a.rdispls = rd; break;
    default:
        a.sdt = a.rdt = NULL;
        a.scounts = sc, a.sdispls_a = sdb, a.sdts = st, a.rcounts = rc, a.rdispls_a = rdb, a.rdts = rt;
    }
    loom_typed_blocks_t snd, rcv;
    int scount, rcount;
    mca_coll_loom_neighbor_blocks_of(&a, coll_ids[coll], di, dout, &snd, &scount, &rcv, &rcount);
    mca_coll_loom_module_t m;
    memset(&m, 0, sizeof(m));
    loom_gpu_call_t c;
    mca_coll_loom_exchange_call(&c, coll_ids[coll], (ompi_communicator_t *)t->comm, NULL, sbuf, false, got, false);
    const loom_typed_blocks_t snd_r = mca_coll_loom_neighbor_by_rank(map, 0, &snd, scount);
    const loom_typed_blocks_t rcv_r = mca_coll_loom_neighbor_by_rank(map, 1, &rcv, rcount);
    const long calls = exec_calls;
    exec_comm = t->comm;
    err = mca_coll_loom_exchange_blocks(&m, &c, &snd_r, &rcv_r);
    if (MPI_SUCCESS != err || exec_calls != calls + 1) ++bad;
    for (size_t i = 0; i <= r_len; ++i)
        if (got[i] != ref[i]) {
            fprintf(stderr, "neighbor_map_check: %s, neighbor_%s of %s: rank %d byte %zu = %u, Open MPI wrote %u\n",
                    t->name, coll_names[coll], type_names[mix], r, i, got[i], ref[i]);
            ++bad;
            break;
        }
    free(m.exchange_tables);
    free(sbuf), free(ref), free(got), free(sc), free(sdb), free(st);
}

/* The topologies at n ranks; fits: expected fit. */
static int make_topologies(topo_t *t, int n)
{
    int k = 0, r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    int dims1[1] = {n}, per1[1] = {1};
    t[k] = (topo_t){.name = "periodic 1-D Cartesian ring", .comm = MPI_COMM_NULL, .fits = n >= 3};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &t[k++].comm);
    int dims2[2] = {0, 0}, flat[2] = {0, 0}, per2[2] = {1, 1};
    MPI_Dims_create(n, 2, dims2);
    t[k] = (topo_t){.name = "non-periodic 2-D Cartesian grid (MPI_PROC_NULL edges)", .comm = MPI_COMM_NULL, .fits = 1};
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, flat, 0, &t[k++].comm);
    t[k] = (topo_t){.name = "periodic 2-D Cartesian grid (a dimension of 1 or 2 ranks)", .comm = MPI_COMM_NULL, .fits = 0};
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, per2, 0, &t[k++].comm);
    int *index = malloc(3 * (size_t)n * sizeof(int)), *edges = index + n; /* ring: r - 1, r + 1 */
    for (int p = 0; p < n; ++p) {
        index[p] = 2 * (p + 1);
        edges[2 * p] = (p + n - 1) % n, edges[2 * p + 1] = (p + 1) % n;
    }
    t[k] = (topo_t){.name = "graph ring", .comm = MPI_COMM_NULL, .fits = n >= 3};
    MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &t[k++].comm);
    free(index);
    /* out: r + 1, r + 2, r (a self edge); in, in another order: r, r - 2, r - 1 */
    const int out3[3] = {(r + 1) % n, (r + 2) % n, r}, in3[3] = {r, (r + n - 2) % n, (r + n - 1) % n};
    t[k] = (topo_t){.name = "distributed graph with a self edge", .comm = MPI_COMM_NULL, .fits = n >= 3};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 3, in3, unweighted(), 3, out3, unweighted(), MPI_INFO_NULL, 0,
                                   &t[k++].comm);
    /* ranks 0..n-2 in a ring (a rank its own neighbour at n = 2), rank n-1 without neighbours */
    const int inner = r < n - 1, m = n > 1 ? n - 1 : 1;
    const int ring_out[1] = {(r + 1) % m}, ring_in[1] = {(r + m - 1) % m};
    t[k] = (topo_t){.name = "distributed graph with a rank outside it", .comm = MPI_COMM_NULL, .fits = 1};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, inner, ring_in, unweighted(), inner, ring_out, unweighted(),
                                   MPI_INFO_NULL, 0, &t[k++].comm);
    /* Not MPI_Dist_graph_create (Open MPI derives the lists): Open MPI
     * 5.0's hangs now and then with loom deselected (docs/testing.md). */
    /* rank 0 sends rank 1 twice: a fit on every other rank, none agreed */
    const int twice = 0 == r ? 2 : 0, back = 1 == r ? 2 : 0, zero[2] = {0, 0}, one_[2] = {1, 1};
    t[k] = (topo_t){.name = "distributed graph with a parallel edge", .comm = MPI_COMM_NULL, .fits = 0};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, back, zero, unweighted(), twice, one_, unweighted(),
                                   MPI_INFO_NULL, 0, &t[k++].comm);
    for (int i = 0; i < k; ++i) lists_of(&t[i]);
    return k;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    make_types();
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    topo_t t[8];
    const int nt = make_topologies(t, n);
    long cases = 0, fitting = 0;
    for (int i = 0; i < nt; ++i) {
        loom_neighbor_map_t map;
        const int rc = mca_coll_loom_neighbor_map_build((ompi_communicator_t *)t[i].comm, &map);
        int here = MPI_SUCCESS == rc && map.fit, all = 0;
        MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_MIN, t[i].comm); /* as the loom communicator's creation agrees it */
        if (MPI_SUCCESS != rc || map.indeg != t[i].indeg || map.outdeg != t[i].outdeg || all != t[i].fits) {
            if (!r) fprintf(stderr, "neighbor_map_check: %s: built %d, degrees %d/%d (MPI: %d/%d), fit %d, expected %d\n",
                            t[i].name, rc, map.indeg, map.outdeg, t[i].indeg, t[i].outdeg, all, t[i].fits);
            ++bad;
        }
        if (MPI_SUCCESS == rc && all) {
            ++fitting;
            for (int coll = 0; coll < NCOLLS; ++coll)
                for (int mix = 0; mix < NTYPES; ++mix, ++cases) one(&t[i], coll, mix, &map);
        }
        if (MPI_SUCCESS == rc) mca_coll_loom_neighbor_map_free(&map);
        free(t[i].in);
        MPI_Comm_free(&t[i].comm);
    }
    long tot[2] = {bad, exec_calls};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (tot[1] != cases * n) ++tot[0]; /* every case ran through the stand-in on every rank */
    if (!r)
        printf("neighbor_map_check: %d ranks, %d topologies (%ld fit the exchange), %ld cases (5 neighbourhood "
               "collectives x %d types), %ld exchanges, %ld wrong\n", n, nt, fitting, cases, NTYPES, tot[1], tot[0]);
    MPI_Type_free(&types[1]);
    MPI_Type_free(&types[2]);
    MPI_Finalize();
    return tot[0] ? 1 : 0;
}
