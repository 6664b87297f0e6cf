/*
 * loom.h: loom's public C API.
 *
 * This is the boundary between loom's C++/CUDA core and its users (the Open MPI
 * coll component, or any program that wants loom without MPI). It is shaped like
 * NCCL's: every call returns a loomResult_t, communicators are opaque handles,
 * collectives are ordered on a CUDA stream. No C++ exception crosses it.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

typedef enum {
    loomSuccess = 0,
    loomUnhandledCudaError = 1, /* a CUDA call failed */
    loomSystemError = 2,        /* a system call or allocation failed */
    loomInternalError = 3,      /* a bug in loom */
    loomInvalidArgument = 4,    /* a bad pointer, count, type or op */
    loomInvalidUsage = 5,       /* a call that is not allowed in this state */
    loomRemoteError = 6,        /* a peer failed or went away */
    loomInProgress = 7,         /* non-blocking operation not finished */
    loomNotSupported = 8,       /* valid, but loom cannot do it (caller may fall back) */
    loomNumResults = 9
} loomResult_t;

/* Where a buffer lives, as the CUDA driver sees it. Pinned host memory is host. */
typedef enum {
    loomMemoryHost = 0,
    loomMemoryDevice = 1,
    loomMemoryManaged = 2
} loomMemoryKind_t;

typedef struct {
    loomMemoryKind_t kind;
    int device; /* CUDA device ordinal for device/managed memory, -1 for host */
} loomPointerInfo_t;

loomResult_t loomGetVersion(int *version);
const char *loomGetErrorString(loomResult_t result);
/* The message of the last failure on the calling thread ("" if none). */
const char *loomGetLastError(void);

/* 1 if the CUDA driver (libcuda.so.1) could be loaded and initialised, else 0.
 * Never creates a CUDA context. */
int loomCudaDriverAvailable(void);

/* Classify a pointer. Without a driver every pointer is host memory.
 * Never creates a CUDA context, so it is safe before the application has
 * chosen its GPU. */
loomResult_t loomPointerQuery(const void *ptr, loomPointerInfo_t *info);

/* Synchronous copy between any two memories (host, device, managed). */
loomResult_t loomMemcpySync(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_H */
