/*
 * loom's datatype copy kernel (device/datatype/dt_copy.h) on a GPU, with
 * the plans of src/coll/coll_loom_dtplan.h: for every type of
 * test/mpi/dt_types.h at counts 1, 3 and one of about 1 MiB, the GPU's
 * pack must give MPI_Pack's bytes, and its unpack must leave the device
 * buffer exactly as MPI_Unpack leaves a host copy (holes untouched). Then
 * the same types as blocks of one call, each block of its own type, in
 * one kernel over a packed view (device/datatype/dt_view.h): the whole
 * view and random packed ranges of it (what a FIFO chunk needs) must pack
 * to MPI_Pack's bytes of each block with the bytes between blocks and
 * outside the range untouched, and unpack as MPI_Unpack does. Then
 * the throughput the speed issue asks for: pack and unpack of a vector of
 * 256-byte blocks and of a 3-D subarray's face, against a device copy of
 * the same bytes (printed; a benchmark, not a pass/fail bound).
 *
 *   dt_pack            (one process; skips without a GPU)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_dtplan.h"
#include "dt_types.h"

int dtgpu_count(void);
void *dtgpu_plan(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t bytes);
void dtgpu_plan_free(void *h);
void *dtgpu_alloc(size_t bytes);
void dtgpu_free(void *p);
int dtgpu_put(void *dev, const void *host, size_t bytes);
int dtgpu_get(void *host, const void *dev, size_t bytes);
int dtgpu_copy(void *h, size_t count, void *user, void *packed, int unpack);
double dtgpu_time(void *h, size_t count, void *user, void *packed, int unpack, size_t bytes, int reps);
void *dtgpu_view(const loom_dt_seg_t *const *segs, const int *nsegs, const int64_t *extent, const uint64_t *bytes,
                 int nlayouts, const int *layout, const uint64_t *count, const int64_t *user_off,
                 const uint64_t *packed_off, int nblocks);
void dtgpu_view_free(void *h);
int dtgpu_view_copy(void *h, void *user, void *packed, uint64_t a, uint64_t len, int unpack);

static int failures;

/* The GPU's copy (dt_exec_fn): both buffers to the GPU, the kernel, both
 * back. */
static int run_gpu(void *dev_plan, int count, span_t *user, char *packed, size_t packed_bytes, int unpack)
{
    char *d_user = dtgpu_alloc(user->bytes), *d_packed = dtgpu_alloc(packed_bytes + 1);
    int rc = NULL == d_user || NULL == d_packed;
    if (!rc) rc = dtgpu_put(d_user, user->mem, user->bytes) || dtgpu_put(d_packed, packed, packed_bytes);
    if (!rc) rc = dtgpu_copy(dev_plan, (size_t)count, d_user + (user->base - user->mem), d_packed, unpack);
    if (!rc) rc = dtgpu_get(user->mem, d_user, user->bytes) || dtgpu_get(packed, d_packed, packed_bytes);
    dtgpu_free(d_user);
    dtgpu_free(d_packed);
    return rc;
}

static void check(const char *name, MPI_Datatype t, size_t max_segs)
{
    (void)max_segs;
    MPI_Type_commit(&t);
    int rc = 0;
    const loom_dt_plan_t *plan = mca_coll_loom_dt_plan_of((ompi_datatype_t *)t, &rc);
    void *dev = NULL == plan ? NULL : dtgpu_plan(plan->segs, (int)plan->nsegs, plan->extent, plan->bytes);
    if (NULL == dev) {
        printf("FAIL %s: no plan on the GPU (error %d)\n", name, rc);
        ++failures;
    }
    /* 1, 3, and about 1 MiB of packed bytes */
    const int big = plan && plan->bytes ? (int)((1 << 20) / plan->bytes) + 1 : 5;
    const int counts[] = {1, 3, big};
    for (int i = 0; dev && i < 3; ++i) {
        const long bad = dt_compare(t, counts[i], run_gpu, dev);
        if (bad) {
            printf("FAIL %s x %d: GPU %s differs from MPI's at byte %ld\n", name, counts[i], bad > 0 ? "pack" : "unpack",
                   (bad > 0 ? bad : -bad) - 1);
            ++failures;
        }
    }
    if (dev) printf("ok %-40s %zu segments, counts 1, 3, %d\n", name, plan->nsegs, big);
    dtgpu_plan_free(dev);
    if (MPI_INT != t && MPI_DOUBLE_INT != t) MPI_Type_free(&t);
}

/* The types dt_each_type visits, kept (dup'ed) for check_views. */
static MPI_Datatype kept[64];
static int nkept;
static void keep(const char *name, MPI_Datatype t, size_t max_segs)
{
    (void)name, (void)max_segs;
    if (nkept < 64) MPI_Type_dup(t, &kept[nkept]), MPI_Type_commit(&kept[nkept]), ++nkept;
    if (MPI_INT != t && MPI_DOUBLE_INT != t) MPI_Type_free(&t);
}

enum { kViewBlocks = 6 };

/* One call of kViewBlocks blocks of random kept types and counts 0..3, user
 * spans apart in one buffer, packed with 16-byte gaps: the GPU's view copies
 * against MPI_Pack / MPI_Unpack block by block. */
static void check_view(unsigned seed)
{
    const loom_dt_seg_t *segs[kViewBlocks];
    int nsegs[kViewBlocks], layout[kViewBlocks];
    int64_t extent[kViewBlocks], user_off[kViewBlocks];
    uint64_t bytes[kViewBlocks], count[kViewBlocks], packed_off[kViewBlocks];
    MPI_Datatype t[kViewBlocks];
    span_t sp[kViewBlocks];
    size_t ubytes = 0, pbytes = 16;
    for (int k = 0; k < kViewBlocks; ++k) {
        seed = seed * 1103515245u + 12345u;
        t[k] = kept[(seed >> 8) % (unsigned)nkept];
        count[k] = (seed >> 20) % 4;
        int rc = 0;
        const loom_dt_plan_t *plan = mca_coll_loom_dt_plan_of((ompi_datatype_t *)t[k], &rc);
        if (NULL == plan) {
            printf("FAIL view %u: a type without a plan (error %d)\n", seed, rc);
            ++failures;
            return;
        }
        segs[k] = plan->segs, nsegs[k] = (int)plan->nsegs, extent[k] = plan->extent, bytes[k] = plan->bytes;
        layout[k] = k;
        sp[k] = span_of(t[k], (int)count[k]);
        user_off[k] = (int64_t)(ubytes + (size_t)(sp[k].base - sp[k].mem));
        ubytes += sp[k].bytes;
        packed_off[k] = pbytes;
        pbytes += bytes[k] * count[k] + 16;
    }
    char *user = malloc(ubytes), *want = malloc(pbytes), *got = malloc(pbytes), *uwant = malloc(ubytes);
    for (size_t i = 0; i < ubytes; ++i) user[i] = (char)(i * 13 + (i >> 7) + 1), uwant[i] = (char)(i * 5 + 3);
    for (size_t i = 0; i < pbytes; ++i) want[i] = (char)(i * 71 + 9);
    for (int k = 0; k < kViewBlocks; ++k) { /* MPI's bytes of each block, and its unpack of them onto uwant */
        int pos = 0, upos = 0;
        MPI_Pack(user + user_off[k], (int)count[k], t[k], want + packed_off[k], (int)(pbytes - packed_off[k]), &pos,
                 MPI_COMM_SELF);
        MPI_Unpack(want + packed_off[k], pos, &upos, uwant + user_off[k], (int)count[k], t[k], MPI_COMM_SELF);
        free(sp[k].mem);
    }
    void *view = dtgpu_view(segs, nsegs, extent, bytes, kViewBlocks, layout, count, user_off, packed_off, kViewBlocks);
    char *d_user = dtgpu_alloc(ubytes), *d_packed = dtgpu_alloc(pbytes);
    const char *bad = NULL;
    if (NULL == view || NULL == d_user || NULL == d_packed) bad = "no view or buffers on the GPU";
    for (int r = 0; NULL == bad && r < 4; ++r) { /* r 0: the whole view; then random ranges */
        seed = seed * 1103515245u + 12345u;
        const uint64_t a = r ? (seed >> 4) % pbytes : 0, len = r ? 1 + (seed >> 12) % (pbytes - a) : pbytes;
        for (size_t i = 0; i < pbytes; ++i) got[i] = (char)(i * 71 + 9); /* the gaps' and outside's bytes */
        if (dtgpu_put(d_user, user, ubytes) || dtgpu_put(d_packed, got, pbytes) ||
            dtgpu_view_copy(view, d_user, d_packed, a, len, 0) || dtgpu_get(got, d_packed, pbytes))
            bad = "the GPU failed";
        for (uint64_t i = 0; NULL == bad && i < pbytes; ++i)
            if (got[i] != (i >= a && i < a + len ? want[i] : (char)(i * 71 + 9))) bad = "pack differs from MPI_Pack's";
    }
    for (size_t i = 0; i < ubytes; ++i) user[i] = (char)(i * 5 + 3); /* uwant's start */
    if (NULL == bad && (dtgpu_put(d_user, user, ubytes) || dtgpu_put(d_packed, want, pbytes) ||
                        dtgpu_view_copy(view, d_user, d_packed, 0, pbytes, 1) || dtgpu_get(user, d_user, ubytes)))
        bad = "the GPU failed";
    if (NULL == bad && memcmp(user, uwant, ubytes)) bad = "unpack differs from MPI_Unpack's";
    if (bad) {
        printf("FAIL view of seed %u: %s\n", seed, bad);
        ++failures;
    }
    dtgpu_view_free(view);
    dtgpu_free(d_user), dtgpu_free(d_packed);
    free(user), free(want), free(got), free(uwant);
}

/* Pack and unpack throughput of count elements of t against a device copy
 * of the same packed bytes. */
static void throughput(const char *name, MPI_Datatype t, int count)
{
    MPI_Type_commit(&t);
    int rc = 0;
    const loom_dt_plan_t *plan = mca_coll_loom_dt_plan_of((ompi_datatype_t *)t, &rc);
    void *dev = NULL == plan ? NULL : dtgpu_plan(plan->segs, (int)plan->nsegs, plan->extent, plan->bytes);
    span_t s = span_of(t, count);
    free(s.mem); /* only its size and base offset */
    const size_t bytes = plan ? plan->bytes * (size_t)count : 0;
    char *d_user = dtgpu_alloc(s.bytes), *d_packed = dtgpu_alloc(bytes), *d_copy = dtgpu_alloc(bytes);
    if (NULL == dev || NULL == d_user || NULL == d_packed || NULL == d_copy) {
        printf("FAIL %s: no room for the throughput run\n", name);
        ++failures;
    } else {
        char *user = d_user + (s.base - s.mem);
        const double pack = dtgpu_time(dev, (size_t)count, user, d_packed, 0, bytes, 10);
        const double unpack = dtgpu_time(dev, (size_t)count, user, d_packed, 1, bytes, 10);
        const double copy = dtgpu_time(NULL, 0, d_copy, d_packed, 0, bytes, 10);
        printf("throughput %-40s %8.1f MiB: pack %7.1f us (%3.0f%% of copy), unpack %7.1f us (%3.0f%%), copy %7.1f us"
               " (%.0f GB/s)\n", name, bytes / 1048576.0, pack, 100.0 * copy / pack, unpack, 100.0 * copy / unpack,
               copy, bytes / copy / 1e3);
    }
    dtgpu_free(d_user);
    dtgpu_free(d_packed);
    dtgpu_free(d_copy);
    dtgpu_plan_free(dev);
    MPI_Type_free(&t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (dtgpu_count() <= 0) {
        printf("SKIP: needs a CUDA GPU\n");
        MPI_Finalize();
        return 77;
    }
    dt_each_type(check);
    dt_each_type(keep);
    const int before = failures;
    for (unsigned v = 0; v < 200; ++v) check_view(v + 1);
    if (failures == before) printf("ok views: 200 calls of %d blocks of the types above, whole and in ranges\n", kViewBlocks);
    for (int k = 0; k < nkept; ++k) MPI_Type_free(&kept[k]);
    MPI_Datatype t;
    /* 256-byte blocks every 512 bytes: 64 MiB packed */
    MPI_Type_vector(1 << 18, 64, 128, MPI_FLOAT, &t);
    throughput("vector of 256 B blocks", t, 1);
    /* a pencil transpose's face: a quarter of the last dimension of 256x256x512 complex floats */
    const int sz[] = {256, 256, 512}, sub[] = {256, 256, 128}, st[] = {0, 0, 128};
    MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_C_FLOAT_COMPLEX, &t);
    throughput("3-D subarray face 256x256x128 of 256x256x512", t, 1);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
