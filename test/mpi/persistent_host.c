/*
 * Persistent collectives on host buffers through loom's component (MPI-4
 * MPI_*_init; 4.1: pcollreq MPIX_*_init): every kind loom takes beyond the
 * ones coll_nonblocking.c runs on device buffers (barrier, gather(v),
 * scatter(v), allgatherv, alltoallv, alltoallw, scan, exscan,
 * reduce_scatter), started together on a fresh communicator (the first
 * start is kept behind the non-blocking set-up's vote: coll_loom_defer.h)
 * and again with new data, MPI_Startall and MPI_Start alike; every element
 * checked against a host reference. alltoallw's blocks alternate MPI_INT and
 * a derived type the program frees right after init. A visible skip
 * without the extension.
 */
#include "mpi4_persistent.h"
#include <stdio.h>
#include <stdlib.h>

#include "issue_order.h"

#if HAVE_PERSISTENT_COLLS
enum { B = 5, K = 10 }; /* ints per block; persistent requests */

static int rank, size;
static long bad;

static int v(int r, int i, int round) { return r * 100 + i * 7 + round * 1000; }

static void check(const char *what, int round, const int *got, const int *want, int n)
{
    long wrong = 0;
    int first = -1;
    for (int i = 0; i < n; ++i)
        if (got[i] != want[i] && !wrong++) first = i;
    if (wrong)
        fprintf(stderr, "FAIL rank %d persistent %s round %d: %ld of %d wrong, first at %d: %d, want %d\n", rank,
                what, round, wrong, n, first, got[first], want[first]);
    bad += wrong;
}

/* Issue order (issue_order.h): x, posted after the persistent requests r
 * were started, may not be complete while one of them is not. On a fresh communicator every one of these
 * calls is kept behind the vote (the non-blocking set-up, on by default:
 * with LOOM_NONBLOCKING_SETUP=0 they would be the previous module's own
 * requests, which loom does not order), so all are loom's requests; a
 * start kept so used to complete after the calls made after it. */
static void check_order(MPI_Request *r, MPI_Request x)
{
    MPI_Request all[K + 1];
    for (int i = 0; i < K; ++i) all[i] = r[i];
    all[K] = x;
    bad += completes_last(all, K + 1, rank, "an iallreduce after persistent starts kept behind the vote");
}

static void run(MPI_Comm c, int fresh)
{
    const int n = size * B;
    int *in = malloc(sizeof(int) * (size_t)n), *gat = malloc(sizeof(int) * (size_t)n);
    int *gatv = malloc(sizeof(int) * (size_t)n), *sca = malloc(sizeof(int) * B), *scav = malloc(sizeof(int) * B);
    int *agv = malloc(sizeof(int) * (size_t)n), *a2v = malloc(sizeof(int) * (size_t)n);
    int *a2w = malloc(sizeof(int) * (size_t)n), *scan = malloc(sizeof(int) * B), *exs = malloc(sizeof(int) * B);
    int *rs = malloc(sizeof(int) * B), *want = malloc(sizeof(int) * (size_t)n);
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    int *bdispls = malloc(sizeof(int) * (size_t)size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)size), one_int;
    MPI_Type_contiguous(1, MPI_INT, &one_int); /* freed after init: the requests keep it */
    MPI_Type_commit(&one_int);
    for (int q = 0; q < size; ++q) {
        counts[q] = B;
        displs[q] = (size - 1 - q) * B; /* blocks in reverse order */
        bdispls[q] = displs[q] * (int)sizeof(int);
        types[q] = q % 2 ? one_int : MPI_INT;
    }
    MPI_Request r[K];
    int rc = MPI_Barrier_init(c, MPI_INFO_NULL, &r[0]);
    /* MPI reads a gather's receive type only at the root: elsewhere a stale
     * handle (of a type already freed) must do */
    MPI_Datatype stale;
    MPI_Type_contiguous(2, MPI_INT, &stale);
    MPI_Type_commit(&stale);
    const MPI_Datatype stale_copy = stale;
    MPI_Type_free(&stale);
    rc |= MPI_Gather_init(in, B, MPI_INT, gat, B, 0 == rank ? MPI_INT : stale_copy, 0, c, MPI_INFO_NULL, &r[1]);
    rc |= MPI_Gatherv_init(in, B, MPI_INT, gatv, counts, displs, MPI_INT, size - 1, c, MPI_INFO_NULL, &r[2]);
    rc |= MPI_Scatterv_init(in, counts, displs, MPI_INT, scav, B, MPI_INT, 0, c, MPI_INFO_NULL, &r[3]);
    rc |= MPI_Allgatherv_init(in, B, MPI_INT, agv, counts, displs, MPI_INT, c, MPI_INFO_NULL, &r[4]);
    rc |= MPI_Alltoallv_init(in, counts, displs, MPI_INT, a2v, counts, displs, MPI_INT, c, MPI_INFO_NULL, &r[5]);
    rc |= MPI_Alltoallw_init(in, counts, bdispls, types, a2w, counts, bdispls, types, c, MPI_INFO_NULL, &r[6]);
    rc |= MPI_Scan_init(in, scan, B, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &r[7]);
    rc |= MPI_Exscan_init(in, exs, B, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &r[8]);
    rc |= MPI_Reduce_scatter_init(in, rs, counts, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &r[9]);
    if (MPI_SUCCESS != rc) ++bad;
    MPI_Type_free(&one_int); /* MPI allows it: the persistent alltoallw still uses it at every start */
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < n; ++i) in[i] = v(rank, i, round);
        if (round % 2) {
            if (MPI_SUCCESS != MPI_Startall(K, r)) ++bad;
        } else {
            for (int k = 0; k < K; ++k) bad += MPI_SUCCESS != MPI_Start(&r[k]);
        }
        if (fresh && 0 == round) {
            int one = 1, sum = 0;
            MPI_Request x;
            if (MPI_SUCCESS != MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c, &x)) ++bad;
            else check_order(r, x);
            if (sum != size) ++bad;
        }
        if (MPI_SUCCESS != MPI_Waitall(K, r, MPI_STATUSES_IGNORE)) ++bad;
        if (0 == rank) {
            for (int q = 0; q < size; ++q)
                for (int i = 0; i < B; ++i) want[q * B + i] = v(q, i, round);
            check("gather", round, gat, want, n);
        }
        if (size - 1 == rank) {
            for (int q = 0; q < size; ++q)
                for (int i = 0; i < B; ++i) want[displs[q] + i] = v(q, i, round);
            check("gatherv", round, gatv, want, n);
        }
        for (int i = 0; i < B; ++i) want[i] = v(0, displs[rank] + i, round);
        check("scatterv", round, scav, want, B);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < B; ++i) want[displs[q] + i] = v(q, i, round);
        check("allgatherv", round, agv, want, n);
        for (int q = 0; q < size; ++q) /* block q of the output: rank q's block for this rank */
            for (int i = 0; i < B; ++i) want[displs[q] + i] = v(q, displs[rank] + i, round);
        check("alltoallv", round, a2v, want, n);
        check("alltoallw", round, a2w, want, n);
        for (int i = 0; i < B; ++i) {
            want[i] = 0;
            for (int q = 0; q <= rank; ++q) want[i] += v(q, i, round);
        }
        check("scan", round, scan, want, B);
        if (rank > 0) {
            for (int i = 0; i < B; ++i) want[i] -= v(rank, i, round);
            check("exscan", round, exs, want, B);
        }
        for (int i = 0; i < B; ++i) {
            want[i] = 0;
            for (int q = 0; q < size; ++q) want[i] += v(q, rank * B + i, round);
        }
        check("reduce_scatter", round, rs, want, B);
    }
    for (int k = 0; k < K; ++k) MPI_Request_free(&r[k]);
    free(in), free(gat), free(gatv), free(sca), free(scav), free(agv), free(a2v), free(a2w), free(scan), free(exs);
    free(rs), free(want), free(counts), free(displs), free(bdispls), free(types);
}

/* A started persistent request freed at once, then its communicator: the
 * request holds the communicator's last reference, so its completion (in
 * progress, inside the barrier or MPI_Finalize) destroys the communicator,
 * whose module drains its requests from inside that completion. The result
 * is checked after MPI_Finalize. */
static int freed_in[B], freed_out[B];

static void freed_with_its_communicator(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    for (int i = 0; i < B; ++i) freed_in[i] = v(rank, i, 7), freed_out[i] = -1;
    MPI_Request r;
    if (MPI_Allreduce_init(freed_in, freed_out, B, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &r) != MPI_SUCCESS ||
        MPI_Start(&r) != MPI_SUCCESS) {
        ++bad;
        return;
    }
    MPI_Request_free(&r);
    MPI_Comm_free(&c);
    /* Progress until the result is there, so that the completion (not
     * MPI_Finalize's tear-down) releases the communicator. */
    volatile int *out = freed_out;
    for (int spins = 0; out[B - 1] == -1 && spins < 20000000; ++spins) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    run(c, 1); /* fresh: the first starts wait behind the vote */
    run(c, 0); /* settled */
    MPI_Comm_free(&c);
    freed_with_its_communicator();
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank) printf("persistent_host: %d ranks: %ld wrong elements or errors\n", size, total);
    MPI_Finalize();
    int want[B];
    for (int i = 0; i < B; ++i) {
        want[i] = 0;
        for (int q = 0; q < size; ++q) want[i] += v(q, i, 7);
    }
    bad = 0;
    check("allreduce_init, freed with its communicator", 7, freed_out, want, B);
    return total || bad ? 1 : 0;
}
#else
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (0 == rank) printf("SKIP persistent_host: this MPI has no persistent collectives (MPI-4 MPI_*_init, or Open MPI 4.1's pcollreq MPIX_*_init)\n");
    MPI_Finalize();
    return 0;
}
#endif
