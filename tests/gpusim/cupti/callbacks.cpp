// The API side of the observer: runtime and driver callbacks, and the RUNTIME, DRIVER,
// SYNCHRONIZATION and MEMORY2 records, following CUPTI_CORRELATION.md.
#include <pthread.h>
#include <unistd.h>

#include <deque>

#include "state.h"

namespace gtsim::cupti {
namespace {

// Per call on this thread: the 64-bit slot CUPTI shares between enter and exit callbacks.
struct Slot {
    uint32_t domain;
    uint32_t correlation;
    uint64_t data[1 + kMaxOtherSubscribers]; // each subscriber's own
};
thread_local std::deque<Slot> t_slots; // deque: nested calls must not move a slot in use
// API calls made from inside a subscriber callback do not call back again.
thread_local int t_in_callback = 0;
// cuptiActivityPushExternalCorrelationId's ids of this thread, per kind (the top is current).
thread_local std::vector<uint64_t> t_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

uint32_t thread_id() {
    if (g_thread_id_type.load() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return gettid_u32();
    return static_cast<uint32_t>(pthread_self()); // CUPTI's DEFAULT on Linux
}

void dispatch_to(Subscriber& s, const gtsim_api_info* info, CUpti_ApiCallbackSite site, uint64_t* slot) {
    auto domain = static_cast<CUpti_CallbackDomain>(info->domain);
    uint32_t size = 0;
    std::atomic<bool>* flags = s.flags(domain, &size);
    if (t_in_callback || !s.active.load() || !flags || info->cbid >= size || !flags[info->cbid].load()) return;
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
    d.contextUid = d.context ? uint32_t(info->device + 1) : 0;
    d.correlationData = slot;
    d.correlationId = info->correlation_id; // a nested driver call: the runtime call's id
    ++t_in_callback;
    fn(user, domain, info->cbid, &d);
    --t_in_callback;
}

// Every subscriber with the callback on; each has the call's slot to itself, as with CUPTI.
void dispatch(const gtsim_api_info* info, CUpti_ApiCallbackSite site, uint64_t* slot) {
    dispatch_to(subscriber(), info, site, &slot[0]);
    if (any_other()) for_each_other([&](Subscriber& s, int i) { dispatch_to(s, info, site, &slot[1 + i]); });
}

bool is_runtime(const gtsim_api_info* info) { return info->domain == GTSIM_DOMAIN_RUNTIME; }

void api_record(const gtsim_api_info* info, bool to_first) {
    CUpti_ActivityAPI r{};
    r.kind = is_runtime(info) ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
    r.cbid = info->cbid;
    r.start = info->enter_ns;
    r.end = info->exit_ns;
    r.processId = uint32_t(getpid());
    r.threadId = thread_id();
    r.correlationId = info->correlation_id;
    r.returnValue = uint32_t(info->return_value);
    // cupti_activity.h: an API record made inside an external API region "will be preceded by a
    // CUpti_ActivityExternalCorrelation record for each CUpti_ExternalCorrelationKind" (when
    // EXTERNAL_CORRELATION is enabled).
    CUpti_ActivityExternalCorrelation ext[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
    size_t n = 0;
    for (int k = 0; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; ++k)
        if (!t_external[k].empty()) {
            ext[n] = {};
            ext[n].kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            ext[n].externalKind = static_cast<CUpti_ExternalCorrelationKind>(k);
            ext[n].externalId = t_external[k].back();
            ext[n++].correlationId = info->correlation_id;
        }
    emit_api(r, ext, n, to_first);
}

// What a synchronizing call waited for, by domain and cbid; 0 if it is not one.
CUpti_ActivitySynchronizationType sync_type(const gtsim_api_info* info) {
    if (is_runtime(info)) {
        switch (info->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
        case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
        default: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
        }
    }
    switch (info->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    default: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
    }
}

void sync_record(const gtsim_api_info* info) {
    CUpti_ActivitySynchronization2 r{};
    r.type = sync_type(info);
    if (r.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN) return;
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.start = info->enter_ns;
    r.end = info->exit_ns;
    r.correlationId = info->correlation_id;
    r.contextId = uint32_t(info->device + 1);
    r.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    if (r.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE) r.streamId = info->stream_id;
    if (r.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE) r.cudaEventId = info->event_id;
    emit(&r, sizeof r, 0);
}

// Allocation kind and operation of a memory call; false if it is not one.
bool memory_op(const gtsim_api_info* info, CUpti_ActivityMemoryKind* kind, CUpti_ActivityMemoryOperationType* op) {
    constexpr auto alloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    constexpr auto release = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    constexpr auto device = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, pinned = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    auto set = [&](CUpti_ActivityMemoryKind k, CUpti_ActivityMemoryOperationType o) { return *kind = k, *op = o, true; };
    if (is_runtime(info)) {
        switch (info->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: return set(device, alloc);
        case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020: return set(device, release);
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: return set(pinned, alloc);
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020: return set(pinned, release);
        default: return false;
        }
    }
    switch (info->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: return set(device, alloc);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: return set(device, release);
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: return set(pinned, alloc);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: return set(pinned, release);
    default: return false;
    }
}

void memory_record(const gtsim_api_info* info) {
    CUpti_ActivityMemory4 r{};
    if (!memory_op(info, &r.memoryKind, &r.memoryOperationType)) return;
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
    emit(&r, sizeof r, 0);
}

} // namespace

void on_enter(void*, const gtsim_api_info* info) {
    t_slots.push_back(Slot{info->domain, info->correlation_id, {}});
    dispatch(info, CUPTI_API_ENTER, t_slots.back().data);
}

void on_exit(void*, const gtsim_api_info* info) {
    uint64_t unused[1 + kMaxOtherSubscribers] = {};
    bool paired = !t_slots.empty() && t_slots.back().correlation == info->correlation_id &&
                  t_slots.back().domain == info->domain;
    dispatch(info, CUPTI_API_EXIT, paired ? t_slots.back().data : unused);
    if (paired) t_slots.pop_back();
    // The runtime's own driver calls leave no record: the runtime call's records stand for them.
    if (info->nested) return;
    bool first = api_records_enabled(is_runtime(info), info->cbid);
    if (first || others_want(is_runtime(info) ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER)) api_record(info, first);
    if (info->return_value != 0) return;
    if (wanted(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) sync_record(info);
    if (wanted(CUPTI_ACTIVITY_KIND_MEMORY2)) memory_record(info);
}

} // namespace gtsim::cupti

using namespace gtsim::cupti;

GTSIM_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
    if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    t_external[kind].push_back(id);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* lastId) {
    if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (t_external[kind].empty()) return ret(CUPTI_ERROR_QUEUE_EMPTY);
    if (lastId) *lastId = t_external[kind].back();
    t_external[kind].pop_back();
    return CUPTI_SUCCESS;
}
