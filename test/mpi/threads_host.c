/*
 * MPI_THREAD_MULTIPLE with loom selected, host buffers (runs without a GPU):
 * communicators made while loom's modules are fresh (Open MPI agrees on a
 * new communicator's context id with MPI_Iallreduce on its parent, from
 * inside progress: a blocking agreement of loom's there deadlocked under
 * MPI_THREAD_MULTIPLE), then threads, each on a communicator of its own,
 * making blocking and non-blocking collectives and new communicators at
 * once. Every result checked.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static int me, np;

typedef struct {
    MPI_Comm comm;
    long bad;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = (worker_t *)arg;
    for (int it = 0; it < 200; ++it) {
        int v = me + it, sum = 0, b = me == it % np ? it : -1;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, w->comm);
        w->bad += sum != np * (np - 1) / 2 + np * it;
        MPI_Request r[2];
        MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_MAX, w->comm, &r[0]);
        MPI_Ibcast(&b, 1, MPI_INT, it % np, w->comm, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        w->bad += sum != np - 1 + it;
        w->bad += b != it;
        if (it % 50 == 0) { /* a communicator made and freed inside the thread */
            MPI_Comm d;
            MPI_Comm_dup(w->comm, &d);
            MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, d);
            w->bad += sum != np * (np - 1) / 2 + np * it;
            MPI_Comm_free(&d);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (me == 0) printf("SKIP: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
        MPI_Finalize();
        return 77;
    }
    enum { T = 3 };
    worker_t w[T];
    pthread_t tid[T];
    for (int t = 0; t < T; ++t) {
        w[t].bad = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
    }
    for (int t = 0; t < T; ++t) pthread_create(&tid[t], NULL, work, &w[t]);
    long bad = 0;
    for (int t = 0; t < T; ++t) {
        pthread_join(tid[t], NULL);
        bad += w[t].bad;
        MPI_Comm_free(&w[t].comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) printf("threads_host: %d ranks x %d threads: %ld wrong results\n", np, T, bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
