/*
 * core/zerocopy_profile.h.
 */
#include "core/algo/zerocopy/zerocopy_profile.h"

#include <cstdio>

#include <cuda_runtime.h>

#include "core/comm/params.h"

namespace loom {

ZeroCopyProfile::ZeroCopyProfile() {
    if (!paramLong("LOOM_PROFILE")) return;
    void *h = nullptr;
    if (cudaHostAlloc(&h, 4 * sizeof(uint64_t), cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer(reinterpret_cast<void **>(&stampsDev_), h, 0) != cudaSuccess) {
        cudaGetLastError();
        if (h) cudaFreeHost(h);
        stampsDev_ = nullptr;
        return;
    }
    stamps_ = static_cast<volatile uint64_t *>(h);
    for (int i = 0; i < 4; ++i) stamps_[i] = 0;
    on_ = true;
}

ZeroCopyProfile::~ZeroCopyProfile() {
    if (stamps_) cudaFreeHost(const_cast<uint64_t *>(stamps_));
}

void ZeroCopyProfile::begin() {
    // The previous kernel ended (and was not the first call's), its stamps in
    // order (a kernel still running when the last call began may have left
    // some of its own after the zeroing: skipped).
    const bool ordered = stamps_[0] && stamps_[0] <= stamps_[1] && stamps_[1] <= stamps_[2] && stamps_[2] <= stamps_[3];
    if (ordered && calls_ > 1) {
        for (int p = 0; p < kPhases; ++p) gpuNs_[p] += (double)(stamps_[p + 1] - stamps_[p]);
        ++kernels_;
    }
    for (int i = 0; i < 4; ++i) stamps_[i] = 0;
    ++calls_;
    last_ = std::chrono::steady_clock::now();
}

void ZeroCopyProfile::mark(Step step) {
    const auto now = std::chrono::steady_clock::now();
    if (calls_ > 1) ns_[step] += (double)std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
}

void ZeroCopyProfile::report(int rank, int cudaDev) const {
    if (!on_ || calls_ < 2) return;
    const double c = (double)(calls_ - 1) * 1e3, k = kernels_ ? (double)kernels_ * 1e3 : 1;
    fprintf(stderr, "loom profile rank %d GPU %d: zero-copy allreduce, %llu calls; host per call: describe %.2f us, "
            "exchange %.2f, check+map %.2f, launch %.2f, record %.2f; kernel (CTA 0, %llu calls): arrive wait %.2f "
            "us, move %.2f, done wait %.2f\n", rank, cudaDev, (unsigned long long)calls_, ns_[kDescribe] / c,
            ns_[kExchange] / c, ns_[kMap] / c, ns_[kLaunch] / c, ns_[kRecord] / c, (unsigned long long)kernels_,
            gpuNs_[kArrive] / k, gpuNs_[kMove] / k, gpuNs_[kDone] / k);
}

} // namespace loom
