/* Prints the number of usable CUDA GPUs (0 when there is no driver or GPU) and
 * why, so GPU tests can skip with a visible reason. */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        printf("0 (%s)\n", cudaGetErrorString(err));
        return 0;
    }
    printf("%d\n", n);
    return 0;
}
