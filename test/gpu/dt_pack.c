/*
 * loom's datatype copy kernel (device/datatype/dt_copy.h) on a GPU, with
 * the plans of src/coll/coll_loom_dtplan.h: for every type of
 * test/mpi/dt_types.h at counts 1, 3 and one of about 1 MiB, the GPU's
 * pack must give MPI_Pack's bytes, and its unpack must leave the device
 * buffer exactly as MPI_Unpack leaves a host copy (holes untouched). Then
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
