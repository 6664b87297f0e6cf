/*
 * The collective suite of test/mpi on CUDA device buffers: every collective
 * loom overrides, blocking and non-blocking, on four intracommunicators, an
 * intercommunicator and a Cartesian ring (neighbourhood collectives), compared
 * element by element with values computed on the host.
 * One process per GPU; the GPU follows the node-local rank.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"

static void cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return;
    fprintf(stderr, "coll_device: %s failed: %s\n", what, cudaGetErrorString(err));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}
static void dev_free(void *p) { cuda_check(cudaFree(p), "cudaFree"); }
static void dev_upload(void *dst, const void *src, size_t bytes)
{
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
static void dev_download(void *dst, const void *src, size_t bytes)
{
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
static const check_memory_t device_memory = {"cuda-device", dev_alloc, dev_free, dev_upload, dev_download};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    cuda_check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    cuda_check(cudaSetDevice((lr ? atoi(lr) : 0) % ndev), "cudaSetDevice");
    const size_t counts[] = {0, 1, 7, 65539, (1u << 20) + 3};
    long failures = check_on_all_comms(&device_memory, counts, 5, "coll_device");
    failures += check_intercomm(&device_memory, counts, 5, "coll_device");
    failures += check_neighbors(&device_memory, counts, 5, "coll_device");
    MPI_Finalize();
    return failures ? 1 : 0;
}
