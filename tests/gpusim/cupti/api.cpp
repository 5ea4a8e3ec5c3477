// Exported CUPTI: callback API, ids, timestamps, versions, results, finalize.
#include <cstdlib>
#include <cstring>

#include "state.h"

using namespace gtsim::cupti;

namespace gtsim::cupti {

namespace {
thread_local CUptiResult t_last_error = CUPTI_SUCCESS;
Subscriber g_subscriber;

bool foreign_subscriber() {
    const char* v = getenv("GTSIM_CUPTI_FOREIGN_SUBSCRIBER");
    return v && strcmp(v, "1") == 0;
}
} // namespace

CUptiResult ret(CUptiResult r) {
    if (r != CUPTI_SUCCESS) t_last_error = r;
    return r;
}

Subscriber& subscriber() { return g_subscriber; }

void unsubscribe_all() {
    std::lock_guard lk(g_subscriber.mu);
    g_subscriber.active.store(false);
    g_subscriber.fn = nullptr;
    g_subscriber.user = nullptr;
    for (auto& e : g_subscriber.runtime) e.store(false);
}

} // namespace gtsim::cupti

namespace {

#define GTSIM_RESULTS(X)                                                                                            \
    X(CUPTI_SUCCESS) X(CUPTI_ERROR_INVALID_PARAMETER) X(CUPTI_ERROR_INVALID_DEVICE) X(CUPTI_ERROR_INVALID_CONTEXT)   \
    X(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID) X(CUPTI_ERROR_INVALID_EVENT_ID) X(CUPTI_ERROR_INVALID_EVENT_NAME)          \
    X(CUPTI_ERROR_INVALID_OPERATION) X(CUPTI_ERROR_OUT_OF_MEMORY) X(CUPTI_ERROR_HARDWARE)                             \
    X(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT) X(CUPTI_ERROR_API_NOT_IMPLEMENTED) X(CUPTI_ERROR_MAX_LIMIT_REACHED)  \
    X(CUPTI_ERROR_NOT_READY) X(CUPTI_ERROR_NOT_COMPATIBLE) X(CUPTI_ERROR_NOT_INITIALIZED)                             \
    X(CUPTI_ERROR_INVALID_METRIC_ID) X(CUPTI_ERROR_INVALID_METRIC_NAME) X(CUPTI_ERROR_QUEUE_EMPTY)                    \
    X(CUPTI_ERROR_INVALID_HANDLE) X(CUPTI_ERROR_INVALID_STREAM) X(CUPTI_ERROR_INVALID_KIND)                           \
    X(CUPTI_ERROR_INVALID_EVENT_VALUE) X(CUPTI_ERROR_DISABLED) X(CUPTI_ERROR_INVALID_MODULE)                          \
    X(CUPTI_ERROR_INVALID_METRIC_VALUE) X(CUPTI_ERROR_HARDWARE_BUSY) X(CUPTI_ERROR_NOT_SUPPORTED)                     \
    X(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) X(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) X(CUPTI_ERROR_UNKNOWN)

// Names as in cupti_runtime_cbid.h, for the calls the simulator makes.
#define GTSIM_CBIDS(X)                                                                                               \
    X(cudaDriverGetVersion_v3020) X(cudaRuntimeGetVersion_v3020) X(cudaGetDeviceCount_v3020)                         \
    X(cudaGetLastError_v3020) X(cudaPeekAtLastError_v3020) X(cudaGetErrorString_v3020) X(cudaSetDevice_v3020)        \
    X(cudaGetDevice_v3020) X(cudaMalloc_v3020) X(cudaFree_v3020) X(cudaMallocHost_v3020) X(cudaFreeHost_v3020)       \
    X(cudaHostAlloc_v3020) X(cudaMemcpy_v3020) X(cudaMemcpyAsync_v3020) X(cudaMemset_v3020)                           \
    X(cudaMemsetAsync_v3020) X(cudaStreamCreate_v3020) X(cudaStreamSynchronize_v3020) X(cudaEventCreate_v3020)        \
    X(cudaEventRecord_v3020) X(cudaEventDestroy_v3020) X(cudaEventSynchronize_v3020) X(cudaDeviceReset_v3020)         \
    X(cudaDeviceSynchronize_v3020) X(cudaStreamCreateWithFlags_v5000) X(cudaStreamDestroy_v5050)                      \
    X(cudaGetErrorName_v6050) X(cudaLaunchKernel_v7000) X(cudaLaunchKernel_ptsz_v7000) X(cudaMemcpy_ptds_v7000)      \
    X(cudaMemcpyAsync_ptsz_v7000) X(cudaMemset_ptds_v7000) X(cudaMemsetAsync_ptsz_v7000)                             \
    X(cudaStreamSynchronize_ptsz_v7000) X(cudaEventRecord_ptsz_v7000) X(cudaGraphLaunch_v10000)                      \
    X(cudaGraphLaunch_ptsz_v10000) X(cudaLaunchKernelExC_v11060) X(cudaLaunchKernelExC_ptsz_v11060)

bool valid_domain(CUpti_CallbackDomain d) { return d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE; }

bool ours(CUpti_SubscriberHandle h) { return h == reinterpret_cast<CUpti_SubscriberHandle>(&subscriber()) && subscriber().active.load(); }

CUptiResult subscribe(CUpti_SubscriberHandle* out, CUpti_CallbackFunc fn, void* user, CUpti_SubscriberParams* params) {
    attach();
    if (!out) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (params && params->structSize < CUpti_SubscriberParams_STRUCT_SIZE) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    Subscriber& s = subscriber();
    std::lock_guard lk(s.mu);
    bool foreign = foreign_subscriber();
    if (foreign || s.active.load()) {
        if (params && params->oldSubscriberName && params->oldSubscriberSize > 0)
            snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s",
                     foreign ? "gpusim foreign subscriber" : "CUPTI for gpusim client");
        return ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    }
    s.fn = fn;
    s.user = user;
    for (auto& e : s.runtime) e.store(false); // subscribing enables nothing
    s.active.store(true);
    *out = reinterpret_cast<CUpti_SubscriberHandle>(&s);
    return CUPTI_SUCCESS;
}

CUptiResult set_domain(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain domain) {
    if (!ours(h) || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    // Only the runtime domain has callback points here; enabling the others is accepted.
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        for (uint32_t i = 1; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++i) subscriber().runtime[i].store(enable != 0);
    return CUPTI_SUCCESS;
}

} // namespace

GTSIM_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
    if (!version) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
    if (!str) return ret(CUPTI_ERROR_INVALID_PARAMETER);
#define GTSIM_CASE(r) \
    case r: *str = #r; return CUPTI_SUCCESS;
    switch (result) {
        GTSIM_RESULTS(GTSIM_CASE)
    default: *str = "CUPTI_ERROR_UNKNOWN"; return ret(CUPTI_ERROR_INVALID_PARAMETER);
    }
#undef GTSIM_CASE
}

GTSIM_EXPORT CUptiResult cuptiGetErrorMessage(CUptiResult result, const char** str) {
    return cuptiGetResultString(result, str);
}

GTSIM_EXPORT CUptiResult cuptiGetLastError(void) {
    CUptiResult r = t_last_error;
    t_last_error = CUPTI_SUCCESS;
    return r;
}

GTSIM_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
    if (!timestamp) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *timestamp = uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t* contextId) {
    int dev = device_of(context);
    if (!contextId) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (dev < 0 || dev >= gtsim_device_count()) return ret(CUPTI_ERROR_INVALID_CONTEXT);
    *contextId = uint32_t(dev + 1);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
    if (!deviceId) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    int dev = context ? device_of(context) : 0;
    if (dev < 0 || dev >= gtsim_device_count()) return ret(CUPTI_ERROR_INVALID_CONTEXT);
    *deviceId = uint32_t(dev);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext, CUstream stream, uint8_t perThreadStream, uint32_t* streamId) {
    if (!streamId) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (gtsim_stream_id(stream, perThreadStream, streamId) != 0) return ret(CUPTI_ERROR_INVALID_STREAM);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* streamId) {
    return cuptiGetStreamIdEx(context, stream, 0, streamId);
}

GTSIM_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
    if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    g_thread_id_type.store(type);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
    if (!type) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *type = CUpti_ActivityThreadIdType(g_thread_id_type.load());
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiSupportedDomains(size_t* domainCount, CUpti_DomainTable* domainTable) {
    static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                             CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_SYNCHRONIZE,
                                             CUPTI_CB_DOMAIN_NVTX, CUPTI_CB_DOMAIN_STATE};
    if (!domainCount || !domainTable) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *domainCount = sizeof domains / sizeof domains[0];
    *domainTable = domains;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                        void* userdata) {
    return subscribe(subscriber, callback, userdata, nullptr);
}

GTSIM_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                           void* userdata, CUpti_SubscriberParams* pParams) {
    return subscribe(subscriber, callback, userdata, pParams);
}

GTSIM_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
    attach();
    if (!ours(subscriber)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    unsubscribe_all();
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (!enable || !ours(subscriber) || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) {
        *enable = 0;
        return CUPTI_SUCCESS;
    }
    if (cbid == 0 || cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *enable = gtsim::cupti::subscriber().runtime[cbid].load() ? 1 : 0;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                             CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    attach();
    if (!ours(subscriber) || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return CUPTI_SUCCESS;
    if (cbid == 0 || cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    gtsim::cupti::subscriber().runtime[cbid].store(enable != 0);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain) {
    attach();
    return set_domain(enable, subscriber, domain);
}

GTSIM_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
    attach();
    if (!ours(subscriber)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    return set_domain(enable, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
}

GTSIM_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
    if (!name) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *name = nullptr;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return ret(CUPTI_ERROR_INVALID_PARAMETER);
#define GTSIM_CASE(n) \
    case CUPTI_RUNTIME_TRACE_CBID_##n: *name = #n; return CUPTI_SUCCESS;
    switch (cbid) {
        GTSIM_CBIDS(GTSIM_CASE)
    default: return ret(CUPTI_ERROR_INVALID_PARAMETER);
    }
#undef GTSIM_CASE
}

// Detach: nothing enabled, every buffer handed back, callbacks forgotten. Enabling again later
// (re-attach) works, as with the real library.
GTSIM_EXPORT CUptiResult cuptiFinalize(void) {
    attach();
    disable_all_kinds();
    unsubscribe_all();
    Buffers::get().detach();
    return CUPTI_SUCCESS;
}
