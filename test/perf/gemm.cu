// An application's compute for test/perf/overlap_bench: a plain tiled SGEMM
// (C = A x B, n x n, n a multiple of 64), 64 x 64 tiles of 256 threads, each
// thread 4 x 4 outputs. The GPU hosts have no cuBLAS; this kernel fills every
// SM for milliseconds, which is what the benchmark needs of it.
#include <cuda_runtime.h>

namespace {

constexpr int kTile = 64, kStep = 16, kThreads = 256;

__global__ void __launch_bounds__(kThreads) sgemm64(int n, const float *__restrict__ a, const float *__restrict__ b,
                                                    float *__restrict__ c) {
    __shared__ float as[kStep][kTile]; // a's tile, k-major
    __shared__ float bs[kStep][kTile];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < n; k0 += kStep) {
        for (int i = threadIdx.x; i < kTile * kStep; i += kThreads) {
            as[i % kStep][i / kStep] = a[(size_t)(row0 + i / kStep) * n + k0 + i % kStep];
            bs[i / kTile][i % kTile] = b[(size_t)(k0 + i / kTile) * n + col0 + i % kTile];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kStep; ++k) {
            float x[4], y[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) x[i] = as[k][ty * 4 + i], y[i] = bs[k][tx * 4 + i];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += x[i] * y[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) c[(size_t)(row0 + ty * 4 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}

} // namespace

extern "C" cudaError_t perfGemm(int n, const float *a, const float *b, float *c, cudaStream_t stream) {
    sgemm64<<<dim3(n / kTile, n / kTile), kThreads, 0, stream>>>(n, a, b, c);
    return cudaGetLastError();
}
