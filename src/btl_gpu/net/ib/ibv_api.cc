#include "btl_gpu/net/ib/ibv_api.h"

#include <dlfcn.h>
#include <mutex>

#include "base/debug.h"
#include "base/dl_bind.h"

namespace loom {
namespace net {

namespace {

Ibv g_ibv;
const Ibv *g_loaded = nullptr;

template <typename Fn>
bool bind(void *lib, const char *name, Fn *&slot, bool required = true) {
    return dlBind(lib, "libibverbs.so.1", name, slot, "no ib plugin", required);
}

void load() {
    void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        LOOM_INFO(kNet, "no libibverbs.so.1 (%s): no ib plugin", dlerror());
        return;
    }
    Ibv &v = g_ibv;
    bool ok = bind(lib, "ibv_get_device_list", v.getDeviceList) && bind(lib, "ibv_free_device_list", v.freeDeviceList) &&
              bind(lib, "ibv_get_device_name", v.getDeviceName) && bind(lib, "ibv_open_device", v.openDevice) &&
              bind(lib, "ibv_close_device", v.closeDevice) && bind(lib, "ibv_query_device", v.queryDevice) &&
              bind(lib, "ibv_query_port", v.queryPort) && bind(lib, "ibv_query_gid", v.queryGid) &&
              bind(lib, "ibv_alloc_pd", v.allocPd) && bind(lib, "ibv_dealloc_pd", v.deallocPd) &&
              bind(lib, "ibv_reg_mr", v.regMr) && bind(lib, "ibv_reg_dmabuf_mr", v.regDmabufMr, false) &&
              bind(lib, "ibv_dereg_mr", v.deregMr) && bind(lib, "ibv_create_cq", v.createCq) &&
              bind(lib, "ibv_destroy_cq", v.destroyCq) && bind(lib, "ibv_create_qp", v.createQp) &&
              bind(lib, "ibv_destroy_qp", v.destroyQp) && bind(lib, "ibv_modify_qp", v.modifyQp) &&
              bind(lib, "ibv_get_async_event", v.getAsyncEvent) && bind(lib, "ibv_ack_async_event", v.ackAsyncEvent) &&
              bind(lib, "ibv_event_type_str", v.eventTypeStr);
    if (ok) g_loaded = &g_ibv;
}

} // namespace

const Ibv *ibv() {
    static std::once_flag once;
    std::call_once(once, load);
    return g_loaded;
}

} // namespace net
} // namespace loom
