// The CUDA check of test/perf's one-process tools: a failed call prints the
// tool (kPerfTool, defined by the tool before it includes this), the call,
// CUDA's error and the line, and exits 1.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s: %s: %s (line %d)\n", kPerfTool, #x, cudaGetErrorString(e_), __LINE__);              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
