/*
 * loom's core reads its tunables from LOOM_* environment variables; the
 * component hands every core MCA parameter the user set (coll_loom_<name>)
 * to the core that way, without overriding an explicit environment setting.
 * After MPI_Init, each NAME=VALUE argument must hold in this process's
 * environment (NAME=: unset). Exits 1 on the first that does not.
 *   mca_env NAME=VALUE...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; ++i) {
        char name[128];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof(name)) continue;
        memcpy(name, argv[i], (size_t)(eq - argv[i]));
        name[eq - argv[i]] = '\0';
        const char *have = getenv(name), *want = eq + 1;
        const int ok = *want ? have && !strcmp(have, want) : !have;
        if (!ok) {
            fprintf(stderr, "mca_env: rank %d: %s is %s, expected %s\n", rank, name, have ? have : "unset",
                    *want ? want : "unset");
            bad = 1;
        }
    }
    int v = 1, sum = 0; /* one collective through loom (host buffers: delegated) */
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank && !bad) printf("mca_env: %d settings as expected on rank 0\n", argc - 1);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
