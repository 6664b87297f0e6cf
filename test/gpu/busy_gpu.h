/* Keeps the GPU's stream busy for `seconds` (a one-thread kernel): 0, or -1
 * when the launch failed. */
#pragma once
#include <cuda_runtime.h>
#ifdef __cplusplus
extern "C" {
#endif
int busy_gpu(double seconds, cudaStream_t stream);
#ifdef __cplusplus
}
#endif
