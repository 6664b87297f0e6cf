/*
 * Issue order, loom's promise for one communicator's requests (not MPI's):
 * r[n - 1], posted last, may not be complete while one of r[0 .. n - 2] is
 * not. MPI_Testsome judges them all after the same progress, until all are
 * complete (persistent ones are left inactive, the others MPI_REQUEST_NULL).
 * Returns the violations seen, each said on stderr with `what`, plus one
 * for a failing MPI_Testsome.
 */
#ifndef LOOM_TEST_ISSUE_ORDER_H
#define LOOM_TEST_ISSUE_ORDER_H

#include <mpi.h>
#include <stdio.h>

enum { ISSUE_ORDER_MAX = 16 };

static inline long completes_last(MPI_Request *r, int n, int rank, const char *what)
{
    int finished[ISSUE_ORDER_MAX] = {0}, idx[ISSUE_ORDER_MAX], k, left = n;
    long wrong = 0;
    if (n > ISSUE_ORDER_MAX) return 1;
    while (left > 0) {
        if (MPI_SUCCESS != MPI_Testsome(n, r, &k, idx, MPI_STATUSES_IGNORE) || MPI_UNDEFINED == k) return wrong + 1;
        for (int j = 0; j < k; ++j) finished[idx[j]] = 1, --left;
        int before = 0; /* requests posted before the last one, not complete yet */
        for (int i = 0; i < n - 1; ++i) before += !finished[i];
        for (int j = 0; j < k; ++j)
            if (n - 1 == idx[j] && before) {
                fprintf(stderr, "FAIL rank %d: %s: the last request completed before %d posted before it\n", rank,
                        what, before);
                ++wrong;
            }
    }
    return wrong;
}

#endif
