#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_loom_blocks.h"
#include "exchange_standin.h"

/* What the linked code reads of the component and the GPU path
 * (mca_coll_loom_after_run: as coll_loom_request.c's, which needs a GPU stack). */
mca_coll_loom_component_t mca_coll_loom_component;
const char mca_coll_loom_why_intercomm[] = "an intercommunicator";
/* ... and of the GPU packing (coll_loom_dtgpu.c), which host buffers never reach */
const char *const mca_coll_loom_coll_names[LOOM_COLL_COUNT] = {0};
void mca_coll_loom_report_error(mca_coll_loom_module_t *m, const char *what, loomResult_t r)
{
    (void)m, (void)what, (void)r;
}
int mca_coll_loom_mpi_error(loomResult_t r) { return loomSuccess == r ? MPI_SUCCESS : MPI_ERR_OTHER; }

MPI_Comm exec_comm;
long exec_calls, bad;

int mca_coll_loom_after_run(mca_coll_loom_after_t *after, int rc)
{
    if (NULL == after) return rc;
    const int r = after->run(after, MPI_SUCCESS == rc);
    return MPI_SUCCESS != rc ? rc : r;
}

/* The kernel's part: block q of c->send_counts[q] bytes at c->in +
 * c->send_displs[q] to peer q, into c->out + c->displs[q] there. */
int mca_coll_loom_gpu_exec(mca_coll_loom_module_t *m, const loom_gpu_call_t *c)
{
    (void)m;
    int n;
    MPI_Comm_size(exec_comm, &n);
    int *sc = malloc(4 * sizeof(int) * (size_t)n), *sd = sc + n, *rc = sd + n, *rd = rc + n;
    for (int q = 0; q < n; ++q) {
        sc[q] = (int)c->send_counts[q], sd[q] = (int)c->send_displs[q];
        rc[q] = (int)c->counts[q], rd[q] = (int)c->displs[q];
        if ((sc[q] && c->send_displs[q] + c->send_counts[q] > c->in_bytes) ||
            (rc[q] && c->displs[q] + c->counts[q] > c->out_bytes)) {
            fprintf(stderr, "exchange stand-in: block %d outside the call's buffers\n", q);
            ++bad;
        }
    }
    char *in = malloc(c->in_bytes ? c->in_bytes : 1); /* in may lie inside out (in place) */
    memcpy(in, c->in, c->in_bytes);
    int err = MPI_Alltoallv(in, sc, sd, MPI_BYTE, c->out, rc, rd, MPI_BYTE, exec_comm);
    free(in);
    free(sc);
    ++exec_calls;
    return mca_coll_loom_after_run(c->after, err);
}

