/*
 * A scope with a given GPU current (the one before is restored at its end):
 * for core entry points that may be called with another device current.
 */
#pragma once

#include <cuda_runtime.h>

namespace loom {

class OnDevice {
  public:
    explicit OnDevice(int dev) : dev_(dev) {
        if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
        if (prev_ != dev_) cudaSetDevice(dev_);
    }
    ~OnDevice() {
        if (prev_ >= 0 && prev_ != dev_) cudaSetDevice(prev_);
    }
    OnDevice(const OnDevice &) = delete;
    OnDevice &operator=(const OnDevice &) = delete;

  private:
    int prev_ = -1, dev_;
};

} // namespace loom
