// The cudart observer: turns API calls and scheduled GPU ops into callbacks and activity records.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <deque>

#include "state.h"

namespace gtsim::cupti {

std::atomic<bool> g_latency_timestamps{false};
std::atomic<int> g_thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};

namespace {

std::atomic<bool> g_kinds[CUPTI_ACTIVITY_KIND_COUNT];
std::atomic<int64_t> g_grid_id{0};
char g_contexts[64]; // addresses only: CUcontext is opaque to clients

// Per call on this thread: the 64-bit slot CUPTI shares between enter and exit callbacks.
struct Slot {
    uint32_t correlation;
    uint64_t data;
};
thread_local std::deque<Slot> t_slots; // deque: nested calls must not move a slot in use
// Runtime calls made from inside a subscriber callback do not call back again.
thread_local int t_in_callback = 0;

uint32_t thread_id() {
    if (g_thread_id_type.load() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return gettid_u32();
    return static_cast<uint32_t>(pthread_self()); // CUPTI's DEFAULT on Linux
}

void dispatch(const gtsim_api_info* info, CUpti_ApiCallbackSite site, uint64_t* slot) {
    Subscriber& s = subscriber();
    if (t_in_callback || !s.active.load() || info->cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE || !s.runtime[info->cbid].load())
        return;
    CUpti_CallbackFunc fn;
    void* user;
    {
        std::lock_guard lk(s.mu);
        if (!s.active.load() || !s.fn) return;
        fn = s.fn;
        user = s.user;
    }
    CUpti_CallbackData d{};
    d.callbackSite = site;
    d.functionName = info->function_name;
    d.functionParams = info->params;
    d.functionReturnValue = site == CUPTI_API_EXIT ? const_cast<int*>(&info->return_value) : nullptr;
    d.symbolName = info->symbol_name;
    d.context = context_of(info->device);
    d.contextUid = uint32_t(info->device + 1);
    d.correlationData = slot;
    d.correlationId = info->correlation_id;
    ++t_in_callback;
    fn(user, CUPTI_CB_DOMAIN_RUNTIME_API, info->cbid, &d);
    --t_in_callback;
}

void on_enter(void*, const gtsim_api_info* info) {
    t_slots.push_back(Slot{info->correlation_id, 0});
    dispatch(info, CUPTI_API_ENTER, &t_slots.back().data);
}

void api_record(const gtsim_api_info* info) {
    CUpti_ActivityAPI r{};
    r.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    r.cbid = info->cbid;
    r.start = info->enter_ns;
    r.end = info->exit_ns;
    r.processId = uint32_t(getpid());
    r.threadId = thread_id();
    r.correlationId = info->correlation_id;
    r.returnValue = uint32_t(info->return_value);
    Buffers::get().append(&r, sizeof r, 0);
}

void sync_record(const gtsim_api_info* info) {
    CUpti_ActivitySynchronization2 r{};
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.start = info->enter_ns;
    r.end = info->exit_ns;
    r.correlationId = info->correlation_id;
    r.contextId = uint32_t(info->device + 1);
    r.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    switch (info->cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
        r.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
        r.streamId = info->stream_id;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
        r.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
        r.cudaEventId = info->event_id;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
        r.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
        break;
    default: return;
    }
    Buffers::get().append(&r, sizeof r, 0);
}

void memory_record(const gtsim_api_info* info) {
    CUpti_ActivityMemory4 r{};
    switch (info->cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
        r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020:
        r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
        r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        break;
    default: return;
    }
    if (info->address == 0) return; // size 0 or NULL free: nothing happened
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.correlationId = info->correlation_id;
    r.address = info->address;
    r.bytes = info->bytes;
    r.timestamp = info->exit_ns;
    r.processId = uint32_t(getpid());
    r.deviceId = uint32_t(info->device);
    r.contextId = uint32_t(info->device + 1);
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    Buffers::get().append(&r, sizeof r, 0);
}

void on_exit(void*, const gtsim_api_info* info) {
    uint64_t unused = 0;
    bool paired = !t_slots.empty() && t_slots.back().correlation == info->correlation_id;
    dispatch(info, CUPTI_API_EXIT, paired ? &t_slots.back().data : &unused);
    if (paired) t_slots.pop_back();
    if (kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME)) api_record(info);
    if (info->return_value != 0) return;
    if (kind_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) sync_record(info);
    if (kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) memory_record(info);
}

void kernel_record(const gtsim_gpu_op* op) {
    bool concurrent = kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (!concurrent && !kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL)) return;
    CUpti_ActivityKernel10 r{};
    r.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
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
    r.name = op->name;
    if (g_latency_timestamps.load()) {
        r.queued = op->queued_ns;
        r.submitted = op->queued_ns;
    } else {
        r.queued = r.submitted = CUPTI_TIMESTAMP_UNKNOWN;
    }
    r.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
    r.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
    r.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    Buffers::get().append(&r, sizeof r, op->end_ns);
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
    if (!kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
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
    // A runtime call and the driver call under it share one correlation id in CUPTI.
    r.correlationId = op->correlation_id;
    r.runtimeCorrelationId = op->correlation_id;
    r.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    r.copyCount = 1;
    Buffers::get().append(&r, sizeof r, op->end_ns);
}

void memset_record(const gtsim_gpu_op* op) {
    if (!kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
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
    r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    Buffers::get().append(&r, sizeof r, op->end_ns);
}

void on_gpu_op(void*, const gtsim_gpu_op* op) {
    switch (op->kind) {
    case GTSIM_OP_KERNEL: kernel_record(op); break;
    case GTSIM_OP_MEMCPY: copy_record(op); break;
    case GTSIM_OP_MEMSET: memset_record(op); break;
    }
}

const gtsim_observer kObserver{sizeof(gtsim_observer), nullptr, on_enter, on_exit, on_gpu_op};

} // namespace

void attach() {
    static std::once_flag once;
    std::call_once(once, [] { gtsim_set_observer(&kObserver); });
}

bool kind_enabled(CUpti_ActivityKind kind) {
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT && g_kinds[kind].load();
}

void set_kind(CUpti_ActivityKind kind, bool on) { g_kinds[kind].store(on); }

void disable_all_kinds() {
    for (auto& k : g_kinds) k.store(false);
}

CUcontext context_of(int device) {
    if (device < 0 || device >= int(sizeof g_contexts)) return nullptr;
    return reinterpret_cast<CUcontext>(&g_contexts[device]);
}

int device_of(CUcontext ctx) {
    auto* p = reinterpret_cast<char*>(ctx);
    if (p < g_contexts || p >= g_contexts + sizeof g_contexts) return -1;
    return int(p - g_contexts);
}

uint32_t gettid_u32() { return uint32_t(syscall(SYS_gettid)); }

} // namespace gtsim::cupti
