// The GPU side of the observer: kernel, memcpy and memset records; enabled kinds; contexts.
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "state.h"

namespace gtsim::cupti {

std::atomic<bool> g_latency_timestamps{false};
std::atomic<int> g_thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};

namespace {

std::atomic<bool> g_kinds[CUPTI_ACTIVITY_KIND_COUNT];
std::atomic<int64_t> g_grid_id{0};

void kernel_record(const gtsim_gpu_op* op) {
    if (!wanted(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && !wanted(CUPTI_ACTIVITY_KIND_KERNEL)) return;
    CUpti_ActivityKernel10 r{}; // its kind: each subscriber's (emit_kernel)
    r.registersPerThread = 32;
    r.start = op->start_ns;
    r.end = op->end_ns;
    r.completed = op->end_ns;
    r.deviceId = uint32_t(op->device);
    r.contextId = uint32_t(op->device + 1);
    r.streamId = op->stream_id;
    r.gridX = int32_t(op->grid[0]), r.gridY = int32_t(op->grid[1]), r.gridZ = int32_t(op->grid[2]);
    r.blockX = int32_t(op->block[0]), r.blockY = int32_t(op->block[1]), r.blockZ = int32_t(op->block[2]);
    r.staticSharedMemory = 0;
    r.dynamicSharedMemory = int32_t(op->dynamic_shared);
    r.sharedMemoryExecuted = op->dynamic_shared;
    r.correlationId = op->correlation_id;
    r.gridId = ++g_grid_id;
    r.graphId = op->graph_id;
    r.graphNodeId = op->graph_node_id;
    r.name = op->name;
    if (g_latency_timestamps.load()) {
        r.queued = op->queued_ns;
        r.submitted = op->queued_ns;
    } else {
        r.queued = r.submitted = CUPTI_TIMESTAMP_UNKNOWN;
    }
    r.launchType = op->cooperative ? CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE : CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
    r.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
    r.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    emit_kernel(r, op->end_ns);
}

CUpti_ActivityMemcpyKind memcpy_kind(gtsim_copy_kind k) {
    switch (k) {
    case GTSIM_COPY_HTOD: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case GTSIM_COPY_DTOH: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case GTSIM_COPY_DTOD: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    case GTSIM_COPY_HTOH: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
    }
}

void copy_record(const gtsim_gpu_op* op) {
    if (!wanted(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
    CUpti_ActivityMemcpy6 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.copyKind = uint8_t(memcpy_kind(op->copy_kind));
    r.srcKind = uint8_t(op->src_kind); // gtsim_mem_kind numbers equal CUpti_ActivityMemoryKind's
    r.dstKind = uint8_t(op->dst_kind);
    r.flags = op->async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
    r.bytes = op->bytes;
    r.start = op->start_ns;
    r.end = op->end_ns;
    r.deviceId = uint32_t(op->device);
    r.contextId = uint32_t(op->device + 1);
    r.streamId = op->stream_id;
    // A runtime call and the driver call under it share one id; a driver call's copy has no runtime id.
    r.correlationId = op->correlation_id;
    r.runtimeCorrelationId = op->runtime_correlation_id;
    r.graphId = op->graph_id;
    r.graphNodeId = op->graph_node_id;
    r.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    r.copyCount = 1;
    emit(&r, sizeof r, op->end_ns);
}

void memset_record(const gtsim_gpu_op* op) {
    if (!wanted(CUPTI_ACTIVITY_KIND_MEMSET)) return;
    CUpti_ActivityMemset4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    r.value = uint32_t(op->memset_value);
    r.bytes = op->bytes;
    r.start = op->start_ns;
    r.end = op->end_ns;
    r.deviceId = uint32_t(op->device);
    r.contextId = uint32_t(op->device + 1);
    r.streamId = op->stream_id;
    r.correlationId = op->correlation_id;
    r.flags = op->async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
    r.graphId = op->graph_id;
    r.graphNodeId = op->graph_node_id;
    r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    emit(&r, sizeof r, op->end_ns);
}

} // namespace

void on_gpu_op(void*, const gtsim_gpu_op* op) {
    switch (op->kind) {
    case GTSIM_OP_KERNEL: kernel_record(op); break;
    case GTSIM_OP_MEMCPY: copy_record(op); break;
    case GTSIM_OP_MEMSET: memset_record(op); break;
    }
}

void on_gpu_ops(void* user, const gtsim_gpu_op* ops, size_t count) {
    for (size_t i = 0; i < count; ++i) on_gpu_op(user, &ops[i]);
}

namespace {
const gtsim_observer kObserver{sizeof(gtsim_observer), nullptr, on_enter, on_exit, on_gpu_op, on_gpu_ops};
} // namespace

void attach() {
    static std::once_flag once;
    std::call_once(once, [] { gtsim_set_observer(&kObserver); });
}

bool kind_enabled(CUpti_ActivityKind kind) {
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT && g_kinds[kind].load();
}

namespace {
// cuptiActivityEnableRuntimeApi/DriverApi: callback ids switched off within an enabled kind. As
// CUPTI 13.0 did on an H100 (bench/README.md): switching single ids on without the kind gives
// no record at all; the kind on, then ids off, filters.
std::array<std::atomic<bool>, CUPTI_RUNTIME_TRACE_CBID_SIZE> g_runtime_ids_off;
std::array<std::atomic<bool>, CUPTI_DRIVER_TRACE_CBID_SIZE> g_driver_ids_off;
} // namespace

bool api_records_enabled(bool runtime, uint32_t cbid) {
    if (!kind_enabled(runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER)) return false;
    return runtime ? !(cbid < g_runtime_ids_off.size() && g_runtime_ids_off[cbid].load())
                   : !(cbid < g_driver_ids_off.size() && g_driver_ids_off[cbid].load());
}

bool set_api_records(bool runtime, uint32_t cbid, bool on) {
    if (runtime ? cbid >= g_runtime_ids_off.size() : cbid >= g_driver_ids_off.size()) return false;
    (runtime ? g_runtime_ids_off[cbid] : g_driver_ids_off[cbid]).store(!on);
    return true;
}

void set_kind(CUpti_ActivityKind kind, bool on) {
    g_kinds[kind].store(on);
    // As the real library: enabling or disabling the whole kind overrides the per-id choices.
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) for (auto& id : g_runtime_ids_off) id.store(false);
    if (kind == CUPTI_ACTIVITY_KIND_DRIVER) for (auto& id : g_driver_ids_off) id.store(false);
}

void disable_all_kinds() {
    for (auto& k : g_kinds) k.store(false);
    for (auto& id : g_runtime_ids_off) id.store(false);
    for (auto& id : g_driver_ids_off) id.store(false);
}

CUcontext context_of(int device) { return static_cast<CUcontext>(gtsim_context(device)); }

int device_of(CUcontext ctx) { return ctx ? gtsim_context_device(ctx) : -1; }

uint32_t gettid_u32() { return uint32_t(syscall(SYS_gettid)); }

} // namespace gtsim::cupti
