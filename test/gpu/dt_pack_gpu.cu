// The CUDA side of test/gpu/dt_pack.c: a plan to the GPU, loom's datatype
// copy kernel (device/datatype/dt_copy.h) on it, buffers, and timings.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "device/datatype/dt_copy.h"
#include "device/datatype/dt_view_build.h"

namespace {
struct DevView {
    loom::DtView v;
    void *table;
};
struct DevPlan {
    loom::DtPlanDev p;
    void *table; // the plan's device table past kDtInlineSegs segments (else null)
};
bool ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "dt_pack: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}
} // namespace

extern "C" {

int dtgpu_count(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void *dtgpu_plan(const loom_dt_seg_t *segs, int nsegs, int64_t extent, uint64_t bytes) {
    DevPlan *d = new DevPlan{};
    const size_t tableBytes = loom::dtTableBytes(nsegs);
    std::vector<char> host(tableBytes);
    if (tableBytes && !ok(cudaMalloc(&d->table, tableBytes), "plan table")) return nullptr;
    loom::dtPlanDev(segs, nsegs, extent, bytes, host.data(), d->table, &d->p);
    if (tableBytes && !ok(cudaMemcpy(d->table, host.data(), tableBytes, cudaMemcpyHostToDevice), "plan upload"))
        return nullptr;
    return d;
}

void dtgpu_plan_free(void *h) {
    DevPlan *d = static_cast<DevPlan *>(h);
    if (!d) return;
    cudaFree(d->table);
    delete d;
}

void *dtgpu_alloc(size_t bytes) {
    void *p = nullptr;
    return ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc") ? p : nullptr;
}
void dtgpu_free(void *p) { cudaFree(p); }
int dtgpu_put(void *dev, const void *host, size_t bytes) {
    return ok(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "to the GPU") ? 0 : 1;
}
int dtgpu_get(void *host, const void *dev, size_t bytes) {
    return ok(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "from the GPU") ? 0 : 1;
}

// One copy (pack: user -> packed; unpack: packed -> user), finished.
int dtgpu_copy(void *h, size_t count, void *user, void *packed, int unpack) {
    const DevPlan *d = static_cast<DevPlan *>(h);
    if (!ok(loom::launchDtCopy(d->p, count, user, packed, unpack != 0, 0, nullptr), "dt copy launch")) return 1;
    return ok(cudaDeviceSynchronize(), "dt copy") ? 0 : 1;
}

// Best time in microseconds of reps copies: the plan's (h), or (h null) a
// cudaMemcpyAsync of bytes device to device.
double dtgpu_time(void *h, size_t count, void *user, void *packed, int unpack, size_t bytes, int reps) {
    const DevPlan *d = static_cast<DevPlan *>(h);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best = 1e30f;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(a);
        if (d) loom::launchDtCopy(d->p, count, user, packed, unpack != 0, 0, nullptr);
        else cudaMemcpyAsync(packed, user, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (ms < best) best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ok(cudaGetLastError(), "timing") ? best * 1e3 : -1;
}

// A packed view of nblocks blocks (block k: count[k] elements of layout
// layout[k] at user_off[k] bytes from the user pointer, packed at
// packed_off[k]) with its tables on the GPU; null where the builder refused.
void *dtgpu_view(const loom_dt_seg_t *const *segs, const int *nsegs, const int64_t *extent, const uint64_t *bytes,
                 int nlayouts, const int *layout, const uint64_t *count, const int64_t *user_off,
                 const uint64_t *packed_off, int nblocks) {
    std::vector<loom::DtViewLayout> ls;
    for (int k = 0; k < nlayouts; ++k) ls.push_back(loom::DtViewLayout{segs[k], nsegs[k], extent[k], bytes[k]});
    std::vector<loom::DtViewInput> in;
    for (int k = 0; k < nblocks; ++k) in.push_back(loom::DtViewInput{layout[k], count[k], user_off[k], packed_off[k]});
    std::vector<char> image;
    DevView *d = new DevView{};
    if (!loom::dtViewBuild(ls.data(), nlayouts, in.data(), nblocks, nullptr, &image, &d->v) ||
        !ok(cudaMalloc(&d->table, image.size() ? image.size() : 1), "view table")) {
        delete d;
        return nullptr;
    }
    loom::dtViewBuild(ls.data(), nlayouts, in.data(), nblocks, d->table, &image, &d->v);
    if (!ok(cudaMemcpy(d->table, image.data(), image.size(), cudaMemcpyHostToDevice), "view upload")) return nullptr;
    return d;
}

void dtgpu_view_free(void *h) {
    DevView *d = static_cast<DevView *>(h);
    if (!d) return;
    cudaFree(d->table);
    delete d;
}

// Packed bytes [a, a + len) of the view between user and packed (+ a), finished.
int dtgpu_view_copy(void *h, void *user, void *packed, uint64_t a, uint64_t len, int unpack) {
    const DevView *d = static_cast<DevView *>(h);
    if (!ok(loom::launchDtViewCopy(d->v, user, packed, a, len, unpack != 0, nullptr), "view copy launch")) return 1;
    return ok(cudaDeviceSynchronize(), "view copy") ? 0 : 1;
}

} // extern "C"
