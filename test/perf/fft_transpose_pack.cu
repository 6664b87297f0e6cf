// The hand-written side of test/perf/fft_transpose.c: the pack and unpack
// kernels an application writes around MPI_Alltoall for a slab transpose
// (x-slabs [n/p][n][n] to y-slabs [n][n/p][n] of complex floats), one
// launch each for every peer's block.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

// Row (x, y) of block q: n complex floats, contiguous in both layouts.
__global__ void packRows(const float2 *slab, float2 *blocks, int n, int b, bool unpack) {
    const int rows = b * b; // per block: b x-rows times b y-rows
    for (int r = blockIdx.x; r < rows * (n / b); r += gridDim.x) {
        const int q = r / rows, x = (r % rows) / b, y = r % b;
        // x-slab: [x][q*b + y][z]; packed block q: [x][y][z]; y-slab: [q*b + x][y][z]
        float2 *packed = blocks + ((size_t)q * rows + (size_t)x * b + y) * n;
        if (!unpack) {
            const float2 *row = slab + ((size_t)x * n + (size_t)q * b + y) * n;
            for (int z = threadIdx.x; z < n; z += blockDim.x) packed[z] = row[z];
        } else {
            float2 *row = const_cast<float2 *>(slab) + (((size_t)q * b + x) * b + y) * n;
            for (int z = threadIdx.x; z < n; z += blockDim.x) row[z] = packed[z];
        }
    }
}

} // namespace

extern "C" int fft_pack(const void *xslab, void *blocks, int n, int p) {
    packRows<<<2048, 256>>>(static_cast<const float2 *>(xslab), static_cast<float2 *>(blocks), n, n / p, false);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" int fft_unpack(void *yslab, const void *blocks, int n, int p) {
    packRows<<<2048, 256>>>(static_cast<const float2 *>(yslab), const_cast<float2 *>(static_cast<const float2 *>(blocks)),
                            n, n / p, true);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
