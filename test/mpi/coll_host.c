/* Every collective loom overrides, on host buffers, on four intracommunicators,
 * an intercommunicator and a Cartesian ring (neighbourhood collectives). */
#include <stdio.h>

#include "coll_check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    /* 0, 1, odd, and large enough for the pipelined algorithms of tuned. */
    const size_t counts[] = {0, 1, 7, 65539};
    long failures = check_on_all_comms(&check_host_memory, counts, 4, "coll_host");
    failures += check_intercomm(&check_host_memory, counts, 4, "coll_host");
    failures += check_neighbors(&check_host_memory, counts, 4, "coll_host");
    MPI_Finalize();
    return failures ? 1 : 0;
}
