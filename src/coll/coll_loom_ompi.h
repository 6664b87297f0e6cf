/*
 * Everything that differs between the Open MPI lines the component builds
 * against (4.1 and 5.0), in one place; the rest of src/coll is written
 * against the names below. The version comes from mpi.h (OMPI_MAJOR_VERSION:
 * MPI_VERSION is 3 on both lines).
 *
 *                      4.1                               5.0
 *   mutex header       opal/threads/mutex.h              opal/mca/threads/mutex.h
 *   component type     mca_coll_base_component_2_0_0_t   mca_coll_base_component_2_4_0_t
 *   export attribute   OMPI_MODULE_DECLSPEC              OMPI_DECLSPEC
 *   communicator id    c_contextid (uint32_t)            ompi_comm_get_local_cid() (c_contextid is a struct)
 *   nbc request        16-byte data union                24-byte union + release_arrays[7]
 *   persistent colls   MPIX_*_init (pcollreq ext.)       MPI_*_init (MPI-4); same module slots
 *   a peer's death     MPI_ERR_OTHER (no such class)     MPI_ERR_PROC_FAILED (ULFM, in mpi.h)
 */
#ifndef COLL_LOOM_OMPI_H
#define COLL_LOOM_OMPI_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"

#include <stdint.h>

#if !defined(OMPI_MAJOR_VERSION) || OMPI_MAJOR_VERSION < 4 || (OMPI_MAJOR_VERSION == 4 && OMPI_MINOR_VERSION < 1)
#error "coll/loom needs Open MPI 4.1 or 5.0"
#endif

/* The class a call gets when a peer's process is gone. */
#ifdef MPI_ERR_PROC_FAILED
#define LOOM_MPI_ERR_PROC_FAILED MPI_ERR_PROC_FAILED
#elif defined(MPIX_ERR_PROC_FAILED)
#define LOOM_MPI_ERR_PROC_FAILED MPIX_ERR_PROC_FAILED
#else
#define LOOM_MPI_ERR_PROC_FAILED MPI_ERR_OTHER
#endif

#if OMPI_MAJOR_VERSION >= 5
#include "opal/mca/threads/mutex.h"
typedef mca_coll_base_component_2_4_0_t mca_coll_loom_base_component_t;
#define LOOM_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
#define LOOM_COMPONENT_DECLSPEC OMPI_DECLSPEC
static inline uint32_t mca_coll_loom_comm_cid(const ompi_communicator_t *comm) { return ompi_comm_get_local_cid(comm); }
#else
#include "opal/threads/mutex.h"
typedef mca_coll_base_component_2_0_0_t mca_coll_loom_base_component_t;
#define LOOM_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#define LOOM_COMPONENT_DECLSPEC OMPI_MODULE_DECLSPEC
static inline uint32_t mca_coll_loom_comm_cid(const ompi_communicator_t *comm) { return comm->c_contextid; }
#endif

/* The request a component returns from a non-blocking or persistent
 * collective: Open MPI's MPI_I* and MPI_*_init bindings retain the call's
 * derived datatypes and user op in it (and 5.0's free arrays it records
 * there), so a loom request starts with coll/base's
 * ompi_coll_base_nbc_request_t. Its header is used where it compiles
 * (configure: LOOM_HAVE_NBC_REQUEST_HEADER; on 5.0 always, the source tree
 * being needed anyway). Debian's 4.1 headers lack a Fortran header it
 * includes, so there 4.1's layout is spelled out, and only for 4.1. */
#ifdef LOOM_HAVE_NBC_REQUEST_HEADER
#include "ompi/mca/coll/base/coll_base_util.h"
typedef ompi_coll_base_nbc_request_t mca_coll_loom_nbc_request_t;
#elif OMPI_MAJOR_VERSION == 4
typedef struct {
    ompi_request_t super;
    void *cb;                   /* union of a completion and a free callback */
    void *req_complete_cb_data;
    void *data[2];              /* union: op and datatype, or two datatypes, or two objects */
} mca_coll_loom_nbc_request_t;
_Static_assert(sizeof(mca_coll_loom_nbc_request_t) == sizeof(ompi_request_t) + 4 * sizeof(void *),
               "Open MPI 4.1's ompi_coll_base_nbc_request_t: the request, two callback words, a two-pointer union");
#else
#error "Open MPI >= 5: coll/base's nbc request header must compile (configure's --with-ompi-src)"
#endif

#endif
