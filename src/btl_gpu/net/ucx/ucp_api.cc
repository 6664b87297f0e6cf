#include "btl_gpu/net/ucx/ucp_api.h"

#include <dlfcn.h>
#include <mutex>

#include "base/debug.h"
#include "base/dl_bind.h"

namespace loom {
namespace net {

namespace {

Ucp g_ucp;
const Ucp *g_loaded = nullptr;

template <typename Fn>
bool bind(void *lib, const char *libName, const char *name, Fn *&slot) {
    return dlBind(lib, libName, name, slot, "no ucx plugin");
}

void load() {
    // libucp pulls in libucs; both are looked up by soname (ABI 0 since UCX 1.0).
    void *ucpLib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    void *ucsLib = ucpLib ? dlopen("libucs.so.0", RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!ucpLib || !ucsLib) {
        LOOM_INFO(kNet, "no libucp.so.0/libucs.so.0 (%s): no ucx plugin", dlerror());
        return;
    }
    Ucp &u = g_ucp;
    const char *p = "libucp.so.0";
    bool ok = bind(ucpLib, p, "ucp_config_read", u.configRead) &&
              bind(ucpLib, p, "ucp_config_release", u.configRelease) &&
              bind(ucpLib, p, "ucp_config_modify", u.configModify) &&
              bind(ucpLib, p, "ucp_init_version", u.initVersion) &&
              bind(ucpLib, p, "ucp_worker_create", u.workerCreate) &&
              bind(ucpLib, p, "ucp_worker_destroy", u.workerDestroy) &&
              bind(ucpLib, p, "ucp_worker_get_address", u.workerGetAddress) &&
              bind(ucpLib, p, "ucp_worker_release_address", u.workerReleaseAddress) &&
              bind(ucpLib, p, "ucp_worker_progress", u.workerProgress) &&
              bind(ucpLib, p, "ucp_ep_create", u.epCreate) && bind(ucpLib, p, "ucp_ep_close_nbx", u.epCloseNbx) &&
              bind(ucpLib, p, "ucp_ep_flush_nbx", u.epFlushNbx) &&
              bind(ucpLib, p, "ucp_tag_send_nbx", u.tagSendNbx) &&
              bind(ucpLib, p, "ucp_tag_send_sync_nbx", u.tagSendSyncNbx) && bind(ucpLib, p, "ucp_tag_recv_nbx", u.tagRecvNbx) &&
              bind(ucpLib, p, "ucp_request_check_status", u.requestCheckStatus) &&
              bind(ucpLib, p, "ucp_request_cancel", u.requestCancel) &&
              bind(ucpLib, p, "ucp_request_free", u.requestFree) &&
              bind(ucsLib, "libucs.so.0", "ucs_status_string", u.statusString);
    if (ok) g_loaded = &g_ucp;
}

} // namespace

const Ucp *ucp() {
    static std::once_flag once;
    std::call_once(once, load);
    return g_loaded;
}

} // namespace net
} // namespace loom
