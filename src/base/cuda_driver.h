/*
 * The CUDA driver API, reached through dlopen("libcuda.so.1").
 *
 * loom never links -lcuda: build machines and CI have no driver, and the
 * component must load (and delegate everything) there. Loading the driver and
 * calling cuInit(0) create no context, so this is safe inside MPI_Init.
 */
#pragma once

#include <cuda.h>

namespace loom {

struct CudaDriver {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuDeviceGetCount)(int *); // optional here: 0 devices when absent
    // Optional (null before CUDA 11.7): a dma-buf fd for GPU memory, which a
    // NIC registers with ibv_reg_dmabuf_mr (GPUDirect RDMA without nvidia-peermem).
    CUresult (*cuMemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
    // Optional: a stream waits, on the GPU, for a 32-bit word to reach a
    // value (the resident kernel's `done`, core/stream/resident.h).
    CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    // Optional: a device's attributes asked of the driver itself (the
    // statically linked runtime may not know an attribute the driver does:
    // MPS, core/comm/comm.cc).
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
};

// The driver table, or nullptr when there is no usable driver (the reason is
// logged once at INFO). Thread-safe; loads on first use.
const CudaDriver *cudaDriver();

} // namespace loom
