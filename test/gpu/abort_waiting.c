/* MPI_Abort while loom's kernels wait. After one allreduce that every rank
 * joins (it makes loom's communicator), rank 0 comes to no more collectives:
 * it sleeps 2 s and calls MPI_Abort. The other ranks are inside a device
 * allreduce whose kernels wait for rank 0 without limit (loom's default).
 * The job must end promptly with MPI_Abort's status and leave no process
 * behind (the .mpitest's EXPECT_ABORT): a waiting GPU kernel keeps no
 * process alive. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "device_checks.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!use_gpu_or_finalize(rank)) return 77;
    const int n = 1 << 18;
    float *d = (float *)dalloc(n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        sleep(2);
        printf("abort_waiting: rank 0 calls MPI_Abort while the others wait in a device allreduce\n");
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("abort_waiting: rank %d: the allreduce returned, which it cannot without rank 0\n", rank);
    MPI_Finalize();
    return 1;
}
