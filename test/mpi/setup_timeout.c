/* loom's host-side set-up steps (coll_loom_setup.c) without a GPU: with
 * coll_loom_stage_host_buffers a rank's host buffers count as device buffers,
 * so its set-up waits are bounded by LOOM_TIMEOUT.
 *
 *   setup_timeout absent T   rank 1 never calls the first allreduce (it
 *                            sleeps T + 3 s); every other rank must get an
 *                            MPI error within T + 5 s, not hang.
 *   setup_timeout late T     rank 1 comes T s late to the first allreduce
 *                            (loom's default: no LOOM_TIMEOUT): every rank
 *                            must get the right sum, the others after
 *                            about T s (the .mpitest checks that they named
 *                            rank 1 after LOOM_WARN_AFTER and waited on).
 *   setup_timeout mixed      even ranks count their buffers as device
 *                            buffers (bounded waits), odd ranks do not: 200
 *                            allreduces must all be right. A bounded rank
 *                            that ran its steps as a different kind of
 *                            collective (blocking vs non-blocking) than an
 *                            unbounded one would hang here.
 * Exit status 0 when every check held. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int absent(int rank, double timeout)
{
    if (rank == 1) {
        sleep((unsigned)(timeout + 3));
        return 0; /* never joins: its peers must have given up */
    }
    double x = 1, y = 0;
    const double t0 = wall_seconds();
    const int rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double took = wall_seconds() - t0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, msg, &len);
    printf("rank %d: allreduce returned %s after %.1f s\n", rank, rc == MPI_SUCCESS ? "success" : msg, took);
    const int bad = rc == MPI_SUCCESS || took > timeout + 5 || took < timeout - 0.5;
    if (bad) fprintf(stderr, "rank %d: expected an error after %.0f..%.0f s\n", rank, timeout, timeout + 5);
    return bad;
}

static int late(int rank, int size, double seconds)
{
    if (rank == 1) usleep((useconds_t)(seconds * 1e6));
    double x = rank, y = -1;
    const double t0 = wall_seconds();
    const int rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double took = wall_seconds() - t0;
    const int bad = rc != MPI_SUCCESS || y != (double)size * (size - 1) / 2 || (rank != 1 && took < seconds - 0.5);
    printf("rank %d: allreduce %s after %.1f s\n", rank, bad ? "FAILED" : "right", took);
    return bad;
}

static int mixed(int rank, int size)
{
    int wrong = 0;
    for (int i = 0; i < 200; ++i) {
        long x = rank + i, y = -1;
        if (MPI_SUCCESS != MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD)) ++wrong;
        else if (y != (long)size * (size - 1) / 2 + (long)size * i) ++wrong;
    }
    printf("rank %d (%s waits): 200 allreduces, %d wrong\n", rank, rank % 2 ? "unbounded" : "bounded", wrong);
    return wrong != 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "mixed";
    const char *world_rank = getenv("OMPI_COMM_WORLD_RANK");
    /* Read at MPI_Init: per rank, so ranks differ in where loom thinks their buffers are. */
    if (0 == strcmp(mode, "absent") || 0 == strcmp(mode, "late") || (NULL != world_rank && atoi(world_rank) % 2 == 0))
        setenv("OMPI_MCA_coll_loom_stage_host_buffers", "1", 1);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const double t = argc > 2 ? atof(argv[2]) : 3;
    const int bad = 0 == strcmp(mode, "absent") ? absent(rank, t)
                    : 0 == strcmp(mode, "late") ? late(rank, size, t)
                                                : mixed(rank, size);
    MPI_Finalize();
    return bad;
}
