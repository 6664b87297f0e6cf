/*
 * libibverbs, opened with dlopen so loom loads and runs where rdma-core is
 * absent. Only the exported entry points are looked up; the data path
 * (ibv_post_send/recv, ibv_poll_cq) are inline calls through the provider's
 * ops table and need no symbol.
 */
#pragma once

#include <infiniband/verbs.h>

namespace loom {
namespace net {

struct Ibv {
    ibv_device **(*getDeviceList)(int *);
    void (*freeDeviceList)(ibv_device **);
    const char *(*getDeviceName)(ibv_device *);
    ibv_context *(*openDevice)(ibv_device *);
    int (*closeDevice)(ibv_context *);
    int (*queryDevice)(ibv_context *, ibv_device_attr *);
    int (*queryPort)(ibv_context *, uint8_t, ibv_port_attr *);
    int (*queryGid)(ibv_context *, uint8_t, int, ibv_gid *);
    ibv_pd *(*allocPd)(ibv_context *);
    int (*deallocPd)(ibv_pd *);
    ibv_mr *(*regMr)(ibv_pd *, void *, size_t, int);
    ibv_mr *(*regDmabufMr)(ibv_pd *, uint64_t, size_t, uint64_t, int, int); // null: not in this rdma-core
    int (*deregMr)(ibv_mr *);
    ibv_cq *(*createCq)(ibv_context *, int, void *, ibv_comp_channel *, int);
    int (*destroyCq)(ibv_cq *);
    ibv_qp *(*createQp)(ibv_pd *, ibv_qp_init_attr *);
    int (*destroyQp)(ibv_qp *);
    int (*modifyQp)(ibv_qp *, ibv_qp_attr *, int);
    int (*getAsyncEvent)(ibv_context *, ibv_async_event *);
    void (*ackAsyncEvent)(ibv_async_event *);
    const char *(*eventTypeStr)(ibv_event_type);
};

// The table, or nullptr (reason logged at INFO) without a usable libibverbs.
const Ibv *ibv();

} // namespace net
} // namespace loom
