/*
 * Awkward and bad input on device buffers through the component: each case
 * must give the right answer (element by element against a host reference)
 * or an MPI error, never a crash or a hang, and the communicator must stay
 * usable where MPI allows (a plain allreduce after every case checks it).
 *
 *   resized types (extent > size: holes) in allgather, allgatherv and bcast;
 *   an allgather of more than INT_MAX elements (rcount x ranks);
 *   an allreduce of more than 2^31 bytes;
 *   a buffer on another GPU than the rank's current one;
 *   a user-defined op; MPI_COMM_SELF and size-1 splits; an intercommunicator;
 *   NULL buffers with count > 0 and MPI_IN_PLACE as an allgather's receive
 *   buffer (MPI errors).
 * Prints one line per case; exit status: the number of failed cases.
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_checks.h"

static int rank, size, ndev, failures;

static void report(const char *name, int bad, const char *detail)
{
    int any = 0;
    /* The verdict itself must arrive: a failed reduction of it is a failure. */
    const int rc = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc) {
        fprintf(stderr, "rank %d: %s: the verdict's host allreduce failed (%d)\n", rank, name, rc);
        any = 1;
    }
    if (bad) fprintf(stderr, "rank %d: %s: %s\n", rank, name, detail);
    if (0 == rank) printf("%s %s\n", any ? "FAIL" : "ok  ", name);
    failures += any != 0;
}

/* MPI_INT resized to an 8-byte extent: every element is followed by a hole
 * that a correct implementation leaves untouched (0xEE here). */
static void resized_types(void)
{
    MPI_Datatype rt;
    MPI_Type_create_resized(MPI_INT, 0, 8, &rt);
    MPI_Type_commit(&rt);
    char detail[128] = "";
    /* allgatherv: rank q sends q + 2 elements, placed at displacement
     * (in extents) first[q] + q (a gap of q extents before each block). */
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size), total = 0;
    for (int q = 0; q < size; ++q) {
        counts[q] = q + 2;
        displs[q] = total + q;
        total += q + 2 + q;
    }
    size_t rbytes = (size_t)total * 8, sbytes = (size_t)counts[rank] * 8;
    unsigned char *hs = malloc(sbytes), *hr = malloc(rbytes);
    memset(hs, 0xEE, sbytes);
    for (int k = 0; k < counts[rank]; ++k) {
        int v = rank * 1000 + k;
        memcpy(hs + (size_t)k * 8, &v, 4);
    }
    void *ds = dalloc(sbytes), *dr = dalloc(rbytes);
    cudaMemcpy(ds, hs, sbytes, cudaMemcpyHostToDevice);
    cudaMemset(dr, 0xEE, rbytes);
    int rc = MPI_Allgatherv(ds, counts[rank], rt, dr, counts, displs, rt, MPI_COMM_WORLD);
    cudaMemcpy(hr, dr, rbytes, cudaMemcpyDeviceToHost);
    int bad = rc != MPI_SUCCESS;
    for (size_t b = 0; !bad && b < rbytes; ++b) {
        const int e = (int)(b / 8), off = (int)(b % 8);
        int q = -1;
        for (int p = 0; p < size; ++p)
            if (e >= displs[p] && e < displs[p] + counts[p]) q = p;
        unsigned char want = 0xEE;
        if (q >= 0 && off < 4) {
            int v = q * 1000 + (e - displs[q]);
            want = ((unsigned char *)&v)[off];
        }
        if (hr[b] != want) {
            snprintf(detail, sizeof(detail), "byte %zu: %#x, want %#x", b, hr[b], want);
            bad = 1;
        }
    }
    report("allgatherv of a resized type (holes untouched)", bad || still_usable(MPI_COMM_WORLD), detail);
    /* bcast of 5 resized elements from the last rank. */
    unsigned char hb[40], want[40];
    memset(want, 0xEE, sizeof(want));
    for (int k = 0; k < 5; ++k) {
        int v = 77 + k;
        memcpy(want + k * 8, &v, 4);
    }
    void *db = dalloc(sizeof(hb));
    memset(hb, 0xEE, sizeof(hb)); /* receivers: elements zero, holes 0xEE */
    for (int k = 0; k < 5; ++k) memset(hb + k * 8, 0, 4);
    cudaMemcpy(db, rank == size - 1 ? want : hb, sizeof(hb), cudaMemcpyHostToDevice);
    rc = MPI_Bcast(db, 5, rt, size - 1, MPI_COMM_WORLD);
    cudaMemcpy(hb, db, sizeof(hb), cudaMemcpyDeviceToHost);
    bad = rc != MPI_SUCCESS || memcmp(hb, want, 36) != 0; /* the last hole is past the type's data */
    report("bcast of a resized type", bad || still_usable(MPI_COMM_WORLD), "wrong bytes");
    cudaFree(db);
    cudaFree(ds);
    cudaFree(dr);
    free(hs);
    free(hr);
    free(counts);
    free(displs);
    MPI_Type_free(&rt);
}

/* More than INT_MAX elements of MPI_CHAR in one allgather (rcount x ranks). */
static void huge_allgather(void)
{
    const size_t rcount = (size_t)INT_MAX / (size_t)size + 1, total = rcount * (size_t)size;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    int fits = free_b > total + rcount + (256u << 20), all = 0;
    MPI_Allreduce(&fits, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (0 == rank) printf("skip allgather of %zu chars: not enough GPU memory\n", total);
        return;
    }
    char *ds = dalloc(rcount), *dr = dalloc(total);
    cudaMemset(ds, rank + 1, rcount);
    cudaMemset(dr, 0, total);
    int rc = MPI_Allgather(ds, (int)rcount, MPI_CHAR, dr, (int)rcount, MPI_CHAR, MPI_COMM_WORLD);
    char *h = malloc(total);
    cudaMemcpy(h, dr, total, cudaMemcpyDeviceToHost);
    int bad = rc != MPI_SUCCESS;
    char detail[96] = "";
    for (size_t i = 0; !bad && i < total; ++i)
        if (h[i] != (char)(i / rcount + 1)) {
            snprintf(detail, sizeof(detail), "byte %zu is %d, want %d", i, h[i], (int)(i / rcount + 1));
            bad = 1;
        }
    free(h);
    cudaFree(ds);
    cudaFree(dr);
    report("allgather of more than INT_MAX chars", bad || still_usable(MPI_COMM_WORLD), detail);
}

/* An allreduce whose count x extent passes 2^31 bytes. */
static void huge_allreduce(void)
{
    const size_t count = ((size_t)1 << 29) + 17; /* floats: 2 GiB + 68 B */
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    int fits = free_b > count * 4 + (512u << 20), all = 0;
    MPI_Allreduce(&fits, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (0 == rank) printf("skip allreduce of %zu floats: not enough GPU memory\n", count);
        return;
    }
    float *d = dalloc(count * 4), *h = malloc(count * 4);
    for (size_t i = 0; i < count; ++i) h[i] = (float)((i % 13) + rank);
    cudaMemcpy(d, h, count * 4, cudaMemcpyHostToDevice);
    int rc = MPI_Allreduce(MPI_IN_PLACE, d, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    cudaMemcpy(h, d, count * 4, cudaMemcpyDeviceToHost);
    int bad = rc != MPI_SUCCESS;
    char detail[96] = "";
    for (size_t i = 0; !bad && i < count; ++i)
        if (h[i] != (float)(size * (i % 13) + size * (size - 1) / 2)) {
            snprintf(detail, sizeof(detail), "element %zu is %g", i, h[i]);
            bad = 1;
        }
    free(h);
    cudaFree(d);
    report("allreduce of more than 2^31 bytes", bad || still_usable(MPI_COMM_WORLD), detail);
}

/* A buffer allocated on the next GPU while the rank's current GPU is its own. */
static void other_gpu_buffer(void)
{
    if (ndev < 2) {
        if (0 == rank) printf("skip buffer on another GPU: one GPU\n");
        return;
    }
    const int mine = rank % ndev, other = (mine + 1) % ndev, n = 4099;
    cudaSetDevice(other);
    float *d = dalloc(n * sizeof(float));
    cudaSetDevice(mine);
    float *h = malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) h[i] = (float)(rank * 3 + i % 5);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyDefault);
    int rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDefault);
    int bad = rc != MPI_SUCCESS;
    for (int i = 0; i < n; ++i) bad |= h[i] != (float)(3 * size * (size - 1) / 2 + size * (i % 5));
    cudaFree(d);
    free(h);
    report("allreduce on a buffer of another GPU", bad || still_usable(MPI_COMM_WORLD), "wrong result or error");
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; ++i) ((float *)inout)[i] += ((float *)in)[i];
}

static void user_op(void)
{
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    const int n = 1027;
    float *d = dalloc(n * sizeof(float)), h[1027];
    for (int i = 0; i < n; ++i) h[i] = (float)(rank + i % 3);
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    int rc = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, op, MPI_COMM_WORLD);
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    int bad = rc != MPI_SUCCESS;
    for (int i = 0; i < n; ++i) bad |= h[i] != (float)(size * (size - 1) / 2 + size * (i % 3));
    cudaFree(d);
    MPI_Op_free(&op);
    report("allreduce with a user-defined op", bad || still_usable(MPI_COMM_WORLD), "wrong result or error");
}

/* Allreduce, bcast and allgather on a one-rank communicator. */
static int alone(MPI_Comm comm)
{
    const int n = 513;
    int h[513], g[513];
    for (int i = 0; i < n; ++i) h[i] = rank * 10 + i;
    int *d = dalloc(sizeof(h)), *e = dalloc(sizeof(h));
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    int bad = MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS;
    bad |= MPI_Bcast(d, n, MPI_INT, 0, comm) != MPI_SUCCESS;
    bad |= MPI_Allgather(d, n, MPI_INT, e, n, MPI_INT, comm) != MPI_SUCCESS;
    cudaMemcpy(g, e, sizeof(g), cudaMemcpyDeviceToHost);
    bad |= memcmp(g, h, sizeof(h)) != 0;
    cudaFree(d);
    cudaFree(e);
    return bad || still_usable(comm);
}

static void small_comms(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    report("MPI_COMM_SELF", alone(MPI_COMM_SELF), "wrong result or error");
    MPI_Comm one;
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &one);
    MPI_Comm_set_errhandler(one, MPI_ERRORS_RETURN);
    report("a size-1 split", alone(one), "wrong result or error");
    MPI_Comm_free(&one);
}

/* Allreduce across an intercommunicator: each group gets the other's sum. */
static void intercomm(void)
{
    if (size < 2) return;
    MPI_Comm half, inter;
    const int color = rank < size / 2 ? 0 : 1;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : size / 2, 7, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    const int n = 257;
    int h[257], *d = dalloc(sizeof(h));
    for (int i = 0; i < n; ++i) h[i] = rank + i;
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    int *r = dalloc(sizeof(h));
    int rc = MPI_Allreduce(d, r, n, MPI_INT, MPI_SUM, inter);
    cudaMemcpy(h, r, sizeof(h), cudaMemcpyDeviceToHost);
    int lo = color ? 0 : size / 2, hi = color ? size / 2 : size, bad = rc != MPI_SUCCESS;
    for (int i = 0; i < n; ++i) {
        int want = 0;
        for (int q = lo; q < hi; ++q) want += q + i;
        bad |= h[i] != want;
    }
    cudaFree(d);
    cudaFree(r);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    report("allreduce across an intercommunicator", bad || still_usable(MPI_COMM_WORLD), "wrong result or error");
}

/* Calls MPI forbids: an MPI error on every rank, and the communicator after. */
static void forbidden(void)
{
    float *d = dalloc(64 * sizeof(float));
    cudaMemset(d, 0, 64 * sizeof(float));
    int rc = MPI_Allreduce(NULL, d, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    report("allreduce with a NULL send buffer and count 64: an error", rc == MPI_SUCCESS || still_usable(MPI_COMM_WORLD),
           "no error");
    rc = MPI_Bcast(NULL, 64, MPI_FLOAT, 0, MPI_COMM_WORLD);
    report("bcast of a NULL buffer with count 64: an error", rc == MPI_SUCCESS || still_usable(MPI_COMM_WORLD), "no error");
    /* (Forbidden on every rank alike: a call forbidden on some ranks only
     * leaves the others waiting in it, as MPI allows.) */
    rc = MPI_Allgather(d, 8, MPI_FLOAT, MPI_IN_PLACE, 8, MPI_FLOAT, MPI_COMM_WORLD);
    report("allgather into MPI_IN_PLACE: an error", rc == MPI_SUCCESS || still_usable(MPI_COMM_WORLD), "no error");
    cudaFree(d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cudaGetDeviceCount(&ndev);
    if (ndev < 1) {
        if (0 == rank) printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 0;
    }
    cudaSetDevice(rank % ndev);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    resized_types();
    other_gpu_buffer();
    user_op();
    small_comms();
    intercomm();
    forbidden();
    huge_allgather();
    huge_allreduce();
    if (0 == rank) printf("bad_input: %d case(s) failed\n", failures);
    MPI_Finalize();
    return failures;
}
