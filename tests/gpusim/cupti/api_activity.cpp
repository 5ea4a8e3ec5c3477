// Exported CUPTI activity API: kinds, buffer callbacks, flushing, record iteration, attributes.
#include <cstring>
#include <map>

#include "state.h"

using namespace gtsim::cupti;

namespace {

bool valid_kind(CUpti_ActivityKind kind) {
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

// Size of every record kind the simulator writes; anything else in a buffer is garbage. The kind
// is read as a plain integer: garbage need not be a valid CUpti_ActivityKind.
size_t record_size(const void* record) {
    uint32_t kind;
    memcpy(&kind, record, sizeof kind);
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
    }
}

std::mutex g_attr_mu;
std::map<int, uint64_t> g_attrs; // values set by the client; they change nothing here

} // namespace

GTSIM_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    attach();
    if (CUptiResult r = v1_call(); r != CUPTI_SUCCESS) return r;
    if (!valid_kind(kind)) return ret(CUPTI_ERROR_INVALID_KIND);
    set_kind(kind, true); // kinds the simulator never produces are accepted and stay silent
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) { return cuptiActivityEnable(kind); }

GTSIM_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    attach();
    if (CUptiResult r = v1_call(); r != CUPTI_SUCCESS) return r;
    return set_api_records(true, cbid, enable != 0) ? CUPTI_SUCCESS : ret(CUPTI_ERROR_INVALID_PARAMETER);
}

GTSIM_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    attach();
    if (CUptiResult r = v1_call(); r != CUPTI_SUCCESS) return r;
    return set_api_records(false, cbid, enable != 0) ? CUPTI_SUCCESS : ret(CUPTI_ERROR_INVALID_PARAMETER);
}

GTSIM_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    attach();
    if (CUptiResult r = v1_call(); r != CUPTI_SUCCESS) return r;
    if (!valid_kind(kind)) return ret(CUPTI_ERROR_INVALID_KIND);
    set_kind(kind, false);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityEnableContext(CUcontext, CUpti_ActivityKind kind) {
    return cuptiActivityEnable(kind);
}

GTSIM_EXPORT CUptiResult cuptiActivityDisableContext(CUcontext, CUpti_ActivityKind kind) {
    return cuptiActivityDisable(kind);
}

GTSIM_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                        CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
    attach();
    if (CUptiResult r = v1_call(); r != CUPTI_SUCCESS) return r;
    if (!funcBufferRequested || !funcBufferCompleted) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    Buffers::get().set_callbacks(funcBufferRequested, funcBufferCompleted);
    return CUPTI_SUCCESS;
}

// The subscriber-scoped API (CUPTI 13.2+): the first subscriber's state, or another's.
namespace {
CUptiResult set_kind_of(CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind, bool on) {
    attach();
    if (CUptiResult r = v2_call(); r != CUPTI_SUCCESS) return r;
    if (!valid_kind(kind)) return ret(CUPTI_ERROR_INVALID_KIND);
    if (subscriber_of(subscriber) == &gtsim::cupti::subscriber()) return set_kind(kind, on), CUPTI_SUCCESS;
    return set_other_kind(subscriber, kind, on) ? CUPTI_SUCCESS : ret(CUPTI_ERROR_INVALID_PARAMETER);
}
} // namespace

GTSIM_EXPORT CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind, CUpti_ActivityConfig*) {
    return set_kind_of(subscriber, kind, true);
}

GTSIM_EXPORT CUptiResult cuptiActivityDisable_v2(CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind, CUpti_ActivityConfig*) {
    return set_kind_of(subscriber, kind, false);
}

GTSIM_EXPORT CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle subscriber,
                                                           CUpti_BuffersCallbackRequestFunc_v2 funcBufferRequested,
                                                           CUpti_BuffersCallbackCompleteFunc_v2 funcBufferCompleted) {
    attach();
    if (CUptiResult r = v2_call(); r != CUPTI_SUCCESS) return r;
    if (!funcBufferRequested || !funcBufferCompleted) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (subscriber_of(subscriber) == &gtsim::cupti::subscriber())
        return Buffers::get().set_callbacks_v2(funcBufferRequested, funcBufferCompleted), CUPTI_SUCCESS;
    return register_other_callbacks(subscriber, funcBufferRequested, funcBufferCompleted) ? CUPTI_SUCCESS
                                                                                           : ret(CUPTI_ERROR_INVALID_PARAMETER);
}

// Every subscriber's buffers (there is no _v2 flush).
GTSIM_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    attach();
    bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    flush_others(forced);
    if (!Buffers::get().has_callbacks()) return active_subscribers() > 1 ? CUPTI_SUCCESS : ret(CUPTI_ERROR_INVALID_OPERATION);
    Buffers::get().flush(forced);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityFlush(CUcontext, uint32_t, uint32_t flag) { return cuptiActivityFlushAll(flag); }

GTSIM_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t time) {
    attach();
    Buffers::get().set_period_ms(time);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
    if (!dropped) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *dropped = Buffers::get().take_dropped();
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                    CUpti_Activity** record) {
    if (!buffer || !record) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    size_t offset = 0;
    if (*record) {
        auto* cur = reinterpret_cast<uint8_t*>(*record);
        if (cur < buffer || cur >= buffer + validBufferSizeBytes) return ret(CUPTI_ERROR_INVALID_PARAMETER);
        size_t size = record_size(*record);
        if (size == 0) return ret(CUPTI_ERROR_INVALID_KIND);
        offset = size_t(cur - buffer) + ((size + ACTIVITY_RECORD_ALIGNMENT - 1) & ~size_t{ACTIVITY_RECORD_ALIGNMENT - 1});
    }
    if (offset + sizeof(CUpti_Activity) > validBufferSizeBytes) return ret(CUPTI_ERROR_MAX_LIMIT_REACHED);
    auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
    size_t size = record_size(next);
    if (size == 0 || offset + size > validBufferSizeBytes) return ret(CUPTI_ERROR_INVALID_KIND);
    *record = next;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
    g_latency_timestamps.store(enable != 0);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
    if (!valueSize || !value || *valueSize == 0 || *valueSize > sizeof(uint64_t))
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    uint64_t v = 0;
    memcpy(&v, value, *valueSize);
    std::lock_guard lk(g_attr_mu);
    g_attrs[int(attr)] = v;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value);

GTSIM_EXPORT CUptiResult cuptiActivityGetAttribute_v2(CUpti_SubscriberHandle, CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
    if (CUptiResult r = v2_call(); r != CUPTI_SUCCESS) return r;
    if (int(attr) != gtrace::cupti_v2::kAttrMultipleSubscriberState) return cuptiActivityGetAttribute(attr, valueSize, value);
    if (!valueSize || !value || *valueSize < 1) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *static_cast<uint8_t*>(value) = multiple_subscriber_state();
    *valueSize = 1;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
    if (!valueSize || !value || *valueSize == 0) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    uint64_t v = 0;
    {
        std::lock_guard lk(g_attr_mu);
        auto it = g_attrs.find(int(attr));
        if (it != g_attrs.end()) v = it->second;
    }
    size_t n = std::min(*valueSize, sizeof v);
    memcpy(value, &v, n);
    *valueSize = n;
    return CUPTI_SUCCESS;
}
