/*
 * LOOM_HD: a function of a schedule header that the kernels (nvcc) and the
 * host and CPU simulators (plain C++) both call.
 */
#ifndef LOOM_HOST_DEVICE_H
#define LOOM_HOST_DEVICE_H

#ifdef __CUDACC__
#define LOOM_HD __host__ __device__ __forceinline__
#else
#define LOOM_HD inline
#endif

#endif
