/* Device memory that CUDA IPC cannot share, for the GPU tests: VMM memory
 * (cuMemCreate with no shareable handle type), reached through the driver
 * library at run time so that the tests need no -lcuda. Managed memory and
 * cudaMallocAsync pools come from the runtime directly. */
#ifndef LOOM_TEST_MEMORY_KINDS_H
#define LOOM_TEST_MEMORY_KINDS_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    CUdeviceptr at;
    size_t size;
    CUmemGenericAllocationHandle handle;
} vmm_block_t;

typedef CUresult (*vmm_granularity_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*vmm_create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                  unsigned long long);
typedef CUresult (*vmm_reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*vmm_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*vmm_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*vmm_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*vmm_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*vmm_release_fn)(CUmemGenericAllocationHandle);

static inline void *vmm_sym(const char *name)
{
    static void *lib = NULL;
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib ? dlsym(lib, name) : NULL;
}

/* `bytes` of VMM memory on `dev`, read/write from `dev`; 0 on success. The
 * current context must be dev's primary one (cudaSetDevice + cudaFree(0)). */
static inline int vmm_alloc(vmm_block_t *b, size_t bytes, int dev)
{
    vmm_granularity_fn granularity = (vmm_granularity_fn)vmm_sym("cuMemGetAllocationGranularity");
    vmm_create_fn create = (vmm_create_fn)vmm_sym("cuMemCreate");
    vmm_reserve_fn reserve = (vmm_reserve_fn)vmm_sym("cuMemAddressReserve");
    vmm_map_fn map = (vmm_map_fn)vmm_sym("cuMemMap");
    vmm_access_fn access = (vmm_access_fn)vmm_sym("cuMemSetAccess");
    if (!granularity || !create || !reserve || !map || !access) {
        fprintf(stderr, "vmm_alloc: the driver's VMM entry points are missing\n");
        return 1;
    }
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    size_t g = 0;
    if (granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !g) return 1;
    b->size = (bytes + g - 1) / g * g;
    if (create(&b->handle, b->size, &prop, 0) != CUDA_SUCCESS) return 1;
    if (reserve(&b->at, b->size, g, 0, 0) != CUDA_SUCCESS) return 1;
    if (map(b->at, b->size, 0, b->handle, 0) != CUDA_SUCCESS) return 1;
    CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return access(b->at, b->size, &rw, 1) != CUDA_SUCCESS;
}

static inline void vmm_release(vmm_block_t *b)
{
    vmm_unmap_fn unmap = (vmm_unmap_fn)vmm_sym("cuMemUnmap");
    vmm_free_fn release_va = (vmm_free_fn)vmm_sym("cuMemAddressFree");
    vmm_release_fn release = (vmm_release_fn)vmm_sym("cuMemRelease");
    if (unmap) unmap(b->at, b->size);
    if (release_va) release_va(b->at, b->size);
    if (release) release(b->handle);
}

/* One buffer of a given kind, allocated for one call and freed after it
 * (the soak's -m kinds: addresses come back for later calls with other
 * allocations behind them), `off` bytes into its allocation. */
enum {
    KIND_DEVICE,   /* cudaMalloc */
    KIND_POOL,     /* cudaMallocAsync from the device's default pool: no IPC handle */
    KIND_MANAGED,  /* cudaMallocManaged */
    KIND_VMM,      /* cuMemCreate without a shareable handle type */
    KIND_PINNED,   /* cudaMallocHost */
    KIND_PAGEABLE, /* malloc */
    NKINDS
};
static const char *const kind_names[NKINDS] = {"device", "pool", "managed", "vmm", "pinned", "pageable"};

typedef struct {
    int kind;
    char *base, *at; /* the allocation, and the buffer `off` bytes into it */
    vmm_block_t vmm;
} kind_buf_t;

static inline int kind_on_host(int kind) { return kind == KIND_PINNED || kind == KIND_PAGEABLE; }

/* 0 on success (b->at usable for `bytes`); the current device is `dev`. */
static inline int kind_alloc(kind_buf_t *b, int kind, size_t bytes, size_t off, int dev)
{
    const size_t size = bytes + off ? bytes + off : 1;
    b->kind = kind;
    b->base = NULL;
    int bad = 0;
    switch (kind) {
    case KIND_DEVICE: bad = cudaMalloc((void **)&b->base, size) != cudaSuccess; break;
    case KIND_POOL:
        bad = cudaMallocAsync((void **)&b->base, size, 0) != cudaSuccess || cudaStreamSynchronize(0) != cudaSuccess;
        break;
    case KIND_MANAGED: bad = cudaMallocManaged((void **)&b->base, size, cudaMemAttachGlobal) != cudaSuccess; break;
    case KIND_VMM:
        bad = vmm_alloc(&b->vmm, size, dev);
        b->base = bad ? NULL : (char *)(uintptr_t)b->vmm.at;
        break;
    case KIND_PINNED: bad = cudaMallocHost((void **)&b->base, size) != cudaSuccess; break;
    default: b->base = (char *)malloc(size); bad = !b->base; break;
    }
    b->at = bad ? NULL : b->base + off;
    return bad || !b->base;
}

static inline void kind_free(kind_buf_t *b)
{
    if (!b->base) return;
    switch (b->kind) {
    case KIND_DEVICE: case KIND_MANAGED: cudaFree(b->base); break;
    case KIND_POOL: cudaFreeAsync(b->base, 0); cudaStreamSynchronize(0); break;
    case KIND_VMM: cudaDeviceSynchronize(); vmm_release(&b->vmm); break;
    case KIND_PINNED: cudaFreeHost(b->base); break;
    default: free(b->base); break;
    }
    b->base = b->at = NULL;
}

#endif
