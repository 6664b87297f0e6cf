/*
 * loom-demo: one MPI_Allreduce through Open MPI with loom selected. On CUDA
 * device buffers where GPUs exist (one per process, by node-local rank), on
 * host buffers otherwise, with a note saying so. The result is checked
 * element by element.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = argc > 1 ? atoi(argv[1]) : (1 << 20);

    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    int on_gpu = err == cudaSuccess && ndev > 0, all_gpu = 0;
    MPI_Allreduce(&on_gpu, &all_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_gpu && rank == 0)
        printf("loom-demo: note: no CUDA GPU here (%s); running on host buffers, which loom hands to Open MPI's "
               "own component\n", err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));

    float *host = malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) host[i] = (float)(rank + 1) * (float)(i % 1000);
    float *buf = host;
    if (all_gpu) {
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        cudaSetDevice((lr ? atoi(lr) : rank) % ndev);
        cudaMalloc((void **)&buf, n * sizeof(float));
        cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double ms = (MPI_Wtime() - t0) * 1e3;
    if (all_gpu) cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost);

    const float ranksum = (float)size * (float)(size + 1) / 2.0f;
    long bad = 0;
    for (int i = 0; i < n; ++i)
        if (host[i] != ranksum * (float)(i % 1000)) ++bad;
    long allbad = 0;
    MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("loom-demo: MPI_Allreduce(SUM) of %d floats on %s buffers across %d ranks: %s, %.3f ms (rc %d)\n", n,
               all_gpu ? "CUDA device" : "host", size, allbad ? "WRONG" : "correct", ms, rc);
    if (all_gpu) cudaFree(buf);
    free(host);
    MPI_Finalize();
    return (allbad || rc != MPI_SUCCESS) ? 1 : 0;
}
