/*
 * libucp / libucs, opened with dlopen (like libibverbs for the ib plugin), so
 * loom loads and runs where UCX is absent and builds need only UCX's headers.
 * The entry points the ucx plugin uses; ucp_init is an inline wrapper of
 * ucp_init_version in the headers, so that is the symbol looked up.
 */
#pragma once

#include <ucp/api/ucp.h>

namespace loom {
namespace net {

struct Ucp {
    ucs_status_t (*configRead)(const char *, const char *, ucp_config_t **);
    void (*configRelease)(ucp_config_t *);
    ucs_status_t (*configModify)(ucp_config_t *, const char *, const char *);
    ucs_status_t (*initVersion)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *, ucp_context_h *);
    ucs_status_t (*workerCreate)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
    void (*workerDestroy)(ucp_worker_h);
    ucs_status_t (*workerGetAddress)(ucp_worker_h, ucp_address_t **, size_t *);
    void (*workerReleaseAddress)(ucp_worker_h, ucp_address_t *);
    unsigned (*workerProgress)(ucp_worker_h);
    ucs_status_t (*epCreate)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
    ucs_status_ptr_t (*epCloseNbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_ptr_t (*epFlushNbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_ptr_t (*tagSendNbx)(ucp_ep_h, const void *, size_t, ucp_tag_t, const ucp_request_param_t *);
    ucs_status_ptr_t (*tagSendSyncNbx)(ucp_ep_h, const void *, size_t, ucp_tag_t, const ucp_request_param_t *);
    ucs_status_ptr_t (*tagRecvNbx)(ucp_worker_h, void *, size_t, ucp_tag_t, ucp_tag_t, const ucp_request_param_t *);
    ucs_status_t (*requestCheckStatus)(void *);
    void (*requestCancel)(ucp_worker_h, void *);
    void (*requestFree)(void *);
    const char *(*statusString)(ucs_status_t);
};

// The table, or nullptr (reason logged at INFO) without a usable libucp.
const Ucp *ucp();

} // namespace net
} // namespace loom
