/*
 * NCCL for the benchmarks that compare against it (loom-bench, overlap_bench):
 * the slice of NCCL's ABI they use, from the system libnccl.so.2 opened with
 * dlopen (nccl.h is not needed to build). load_nccl: 1 when every entry point
 * was found.
 */
#ifndef LOOM_TEST_PERF_NCCL_DL_H
#define LOOM_TEST_PERF_NCCL_DL_H

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stddef.h>

typedef struct { char internal[128]; } nccl_id_t;
typedef void *nccl_comm_t;
enum { NCCL_INT8 = 0, NCCL_FLOAT32 = 7, NCCL_SUM = 0 };
static struct {
    int (*get_unique_id)(nccl_id_t *);
    int (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm_t, cudaStream_t);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*comm_destroy)(nccl_comm_t);
    const char *(*error_string)(int);
    int (*group_start)(void);
    int (*group_end)(void);
    int (*send)(const void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*recv)(void *, size_t, int, int, nccl_comm_t, cudaStream_t);
} nccl;

static int load_nccl(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    *(void **)&nccl.get_unique_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&nccl.comm_init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&nccl.all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&nccl.broadcast = dlsym(lib, "ncclBroadcast");
    *(void **)&nccl.reduce = dlsym(lib, "ncclReduce");
    *(void **)&nccl.all_gather = dlsym(lib, "ncclAllGather");
    *(void **)&nccl.reduce_scatter = dlsym(lib, "ncclReduceScatter");
    *(void **)&nccl.comm_destroy = dlsym(lib, "ncclCommDestroy");
    *(void **)&nccl.error_string = dlsym(lib, "ncclGetErrorString");
    *(void **)&nccl.group_start = dlsym(lib, "ncclGroupStart");
    *(void **)&nccl.group_end = dlsym(lib, "ncclGroupEnd");
    *(void **)&nccl.send = dlsym(lib, "ncclSend");
    *(void **)&nccl.recv = dlsym(lib, "ncclRecv");
    return nccl.get_unique_id && nccl.comm_init_rank && nccl.all_reduce && nccl.broadcast && nccl.reduce &&
           nccl.all_gather && nccl.reduce_scatter && nccl.comm_destroy && nccl.group_start && nccl.group_end &&
           nccl.send && nccl.recv;
}

#endif
