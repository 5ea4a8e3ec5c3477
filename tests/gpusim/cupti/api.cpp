// Exported CUPTI: callback API, ids, timestamps, versions, results, finalize.
#include <cstdlib>
#include <cstring>

#include "state.h"

using namespace gtsim::cupti;

namespace gtsim::cupti {

namespace {
thread_local CUptiResult t_last_error = CUPTI_SUCCESS;
Subscriber g_subscriber;
} // namespace

bool foreign_subscriber() {
    const char* v = getenv("GTSIM_CUPTI_FOREIGN_SUBSCRIBER");
    return v && strcmp(v, "1") == 0;
}

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
    for (auto& e : g_subscriber.driver) e.store(false);
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
    X(cudaGraphLaunch_ptsz_v10000) X(cudaLaunchKernelExC_v11060) X(cudaLaunchKernelExC_ptsz_v11060)               \
    X(cudaLaunchCooperativeKernel_v9000) X(cudaLaunchCooperativeKernel_ptsz_v9000) X(cudaMemcpy2D_v3020)             \
    X(cudaMemcpy2DAsync_v3020) X(cudaMemcpy2D_ptds_v7000) X(cudaMemcpy2DAsync_ptsz_v7000) X(cudaMemset2D_v3020)      \
    X(cudaMemset2DAsync_v3020) X(cudaMemset2D_ptds_v7000) X(cudaMemset2DAsync_ptsz_v7000)                            \
    X(cudaStreamBeginCapture_v10000) X(cudaStreamBeginCapture_ptsz_v10000) X(cudaStreamEndCapture_v10000)            \
    X(cudaStreamEndCapture_ptsz_v10000) X(cudaStreamIsCapturing_v10000) X(cudaStreamIsCapturing_ptsz_v10000)         \
    X(cudaGraphInstantiate_v12000) X(cudaGraphInstantiateWithFlags_v11040) X(cudaGraphExecDestroy_v10000)            \
    X(cudaGraphDestroy_v10000) X(__cudaGetKernel_v13000)

// Names as in cupti_driver_cbid.h, for the driver calls the simulator makes.
#define GTSIM_DRIVER_CBIDS(X)                                                                                        \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)                            \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) X(cuCtxGetCurrent)     \
    X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuCtxSynchronize_v2) X(cuModuleLoadData)              \
    X(cuModuleGetFunction) X(cuModuleUnload) X(cuLibraryLoadData) X(cuLibraryGetKernel) X(cuLibraryUnload)           \
    X(cuKernelGetFunction) X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)     \
    X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) X(cuMemcpy) X(cuMemcpy_ptds) X(cuMemcpyAsync)     \
    X(cuMemcpyAsync_ptsz) X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)      \
    X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz)                  \
    X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz)        \
    X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds) X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)                  \
    X(cuMemcpy2DAsync_v2) X(cuMemcpy2DAsync_v2_ptsz) X(cuMemcpy3D_v2) X(cuMemcpy3D_v2_ptds) X(cuMemcpy3DAsync_v2)    \
    X(cuMemcpy3DAsync_v2_ptsz) X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds)       \
    X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async)          \
    X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz) X(cuMemsetD2D8_v2) X(cuMemsetD2D8_v2_ptds) \
    X(cuMemsetD2D16_v2) X(cuMemsetD2D16_v2_ptds) X(cuMemsetD2D32_v2) X(cuMemsetD2D32_v2_ptds) X(cuMemsetD2D8Async)   \
    X(cuMemsetD2D8Async_ptsz) X(cuMemsetD2D16Async) X(cuMemsetD2D16Async_ptsz) X(cuMemsetD2D32Async)                 \
    X(cuMemsetD2D32Async_ptsz) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize)                        \
    X(cuStreamSynchronize_ptsz) X(cuEventCreate) X(cuEventRecord) X(cuEventRecord_ptsz) X(cuEventSynchronize)        \
    X(cuEventDestroy_v2) X(cuMemGetInfo_v2) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost)    \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)      \
    X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)               \
    X(cuGraphLaunch_ptsz) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGetErrorString) X(cuGetErrorName)

bool valid_domain(CUpti_CallbackDomain d) { return d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE; }

} // namespace

bool gtsim::cupti::take_subscriber(Subscriber& s, CUpti_SubscriberHandle* out, CUpti_CallbackFunc fn, void* user) {
    std::lock_guard lk(s.mu);
    if (s.active.load()) return false;
    s.fn = fn;
    s.user = user;
    for (auto& e : s.runtime) e.store(false); // subscribing enables nothing
    for (auto& e : s.driver) e.store(false);
    s.active.store(true);
    *out = reinterpret_cast<CUpti_SubscriberHandle>(&s);
    return true;
}

namespace {

CUptiResult set_domain(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain domain) {
    Subscriber* sub = subscriber_of(h);
    if (!sub || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    // Only the runtime and driver domains have callback points here; enabling the others is accepted.
    uint32_t size = 0;
    std::atomic<bool>* flags = sub->flags(domain, &size);
    for (uint32_t i = 1; i < size; ++i) flags[i].store(enable != 0);
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
    return subscribe(subscriber, callback, userdata, nullptr, false);
}

GTSIM_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                           void* userdata, CUpti_SubscriberParams* pParams) {
    return subscribe(subscriber, callback, userdata, pParams, true);
}

GTSIM_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
    attach();
    if (unsubscribe_other(subscriber)) return CUPTI_SUCCESS;
    if (subscriber_of(subscriber) != &gtsim::cupti::subscriber()) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    unsubscribe_all();
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    Subscriber* sub = subscriber_of(subscriber);
    if (!enable || !sub || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    uint32_t size = 0;
    std::atomic<bool>* flags = sub->flags(domain, &size);
    if (!flags) {
        *enable = 0;
        return CUPTI_SUCCESS;
    }
    if (cbid == 0 || cbid >= size) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *enable = flags[cbid].load() ? 1 : 0;
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                             CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    attach();
    Subscriber* sub = subscriber_of(subscriber);
    if (!sub || !valid_domain(domain)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    uint32_t size = 0;
    std::atomic<bool>* flags = sub->flags(domain, &size);
    if (!flags) return CUPTI_SUCCESS;
    if (cbid == 0 || cbid >= size) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    flags[cbid].store(enable != 0);
    return CUPTI_SUCCESS;
}

GTSIM_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain) {
    attach();
    return set_domain(enable, subscriber, domain);
}

GTSIM_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
    attach();
    if (!subscriber_of(subscriber)) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    set_domain(enable, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    return set_domain(enable, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
}

GTSIM_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
    if (!name) return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *name = nullptr;
#define GTSIM_CASE(n) \
    case CUPTI_RUNTIME_TRACE_CBID_##n: *name = #n; return CUPTI_SUCCESS;
#define GTSIM_DCASE(n) \
    case CUPTI_DRIVER_TRACE_CBID_##n: *name = #n; return CUPTI_SUCCESS;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) switch (cbid) { GTSIM_CBIDS(GTSIM_CASE) default: break; }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) switch (cbid) { GTSIM_DRIVER_CBIDS(GTSIM_DCASE) default: break; }
#undef GTSIM_CASE
#undef GTSIM_DCASE
    return ret(CUPTI_ERROR_INVALID_PARAMETER);
}

// Detach: nothing enabled, every buffer handed back, callbacks forgotten. Enabling again later
// (re-attach) works, as with the real library.
GTSIM_EXPORT CUptiResult cuptiFinalize(void) {
    attach();
    if (active_subscribers() > 1) return CUPTI_SUCCESS; // CUPTI 13.3: returns early, tears nothing down
    disable_all_kinds();
    unsubscribe_all();
    Buffers::get().detach();
    return CUPTI_SUCCESS;
}
