// Exported management API: memory, streams, events, synchronization, devices, errors, versions.
// What touches the device goes through the driver function the real runtime binds for it.
#include "api_common.h"

using namespace gtsim;

namespace {

cudaError_t host_alloc(RuntimeCall& call, void** ptr, size_t size, unsigned flags) {
    if (!ptr) return call.finish(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return call.finish(cudaSuccess);
    return call.finish(call.drv.host_alloc(ptr, size, flags));
}

cudaError_t stream_sync(uint32_t cbid, const char* name, const void* params, cudaStream_t stream, bool pt) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.stream_sync[pt](stream));
}

cudaError_t event_record(uint32_t cbid, const char* name, const void* params, cudaEvent_t event,
                         cudaStream_t stream, bool pt) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.event_record[pt](event, stream));
}

} // namespace

GTSIM_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
    cudaMalloc_v3020_params p{devPtr, size};
    RuntimeCall call(GTSIM_CBID(cudaMalloc_v3020), "cudaMalloc", &p);
    if (!devPtr) return call.finish(cudaErrorInvalidValue);
    *devPtr = nullptr;
    if (size == 0) return call.finish(cudaSuccess);
    CUdeviceptr d = 0;
    CUresult r = call.drv.mem_alloc(&d, size);
    *devPtr = reinterpret_cast<void*>(d);
    return call.finish(r);
}

GTSIM_EXPORT cudaError_t cudaFree(void* devPtr) {
    cudaFree_v3020_params p{devPtr};
    RuntimeCall call(GTSIM_CBID(cudaFree_v3020), "cudaFree", &p);
    if (!devPtr) return call.finish(cudaSuccess);
    return call.finish(call.drv.mem_free(reinterpret_cast<CUdeviceptr>(devPtr)));
}

GTSIM_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
    cudaMallocHost_v3020_params p{ptr, size};
    RuntimeCall call(GTSIM_CBID(cudaMallocHost_v3020), "cudaMallocHost", &p);
    return host_alloc(call, ptr, size, 0);
}

GTSIM_EXPORT cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    cudaHostAlloc_v3020_params p{pHost, size, flags};
    RuntimeCall call(GTSIM_CBID(cudaHostAlloc_v3020), "cudaHostAlloc", &p);
    return host_alloc(call, pHost, size, flags);
}

GTSIM_EXPORT cudaError_t cudaFreeHost(void* ptr) {
    cudaFreeHost_v3020_params p{ptr};
    RuntimeCall call(GTSIM_CBID(cudaFreeHost_v3020), "cudaFreeHost", &p);
    if (!ptr) return call.finish(cudaSuccess);
    return call.finish(call.drv.host_free(ptr));
}

GTSIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
    cudaStreamCreate_v3020_params p{pStream};
    RuntimeCall call(GTSIM_CBID(cudaStreamCreate_v3020), "cudaStreamCreate", &p);
    if (!pStream) return call.finish(cudaErrorInvalidValue);
    return call.finish(call.drv.stream_create(pStream, 0));
}

GTSIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
    cudaStreamCreateWithFlags_v5000_params p{pStream, flags};
    RuntimeCall call(GTSIM_CBID(cudaStreamCreateWithFlags_v5000), "cudaStreamCreateWithFlags", &p);
    if (!pStream || (flags & ~unsigned(cudaStreamNonBlocking))) return call.finish(cudaErrorInvalidValue);
    return call.finish(call.drv.stream_create(pStream, flags)); // cudaStreamNonBlocking == CU_STREAM_NON_BLOCKING
}

GTSIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    cudaStreamDestroy_v5050_params p{stream};
    RuntimeCall call(GTSIM_CBID(cudaStreamDestroy_v5050), "cudaStreamDestroy", &p);
    return call.finish(call.drv.stream_destroy(stream));
}

GTSIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    cudaStreamSynchronize_v3020_params p{stream};
    return stream_sync(GTSIM_CBID(cudaStreamSynchronize_v3020), "cudaStreamSynchronize", &p, stream, false);
}

GTSIM_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
    cudaStreamSynchronize_ptsz_v7000_params p{stream};
    return stream_sync(GTSIM_CBID(cudaStreamSynchronize_ptsz_v7000), "cudaStreamSynchronize_ptsz", &p, stream, true);
}

GTSIM_EXPORT cudaError_t cudaDeviceSynchronize(void) {
    RuntimeCall call(GTSIM_CBID(cudaDeviceSynchronize_v3020), "cudaDeviceSynchronize", nullptr);
    return call.finish(call.drv.ctx_synchronize(nullptr)); // the current context
}

GTSIM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
    cudaEventCreate_v3020_params p{event};
    RuntimeCall call(GTSIM_CBID(cudaEventCreate_v3020), "cudaEventCreate", &p);
    if (!event) return call.finish(cudaErrorInvalidValue);
    return call.finish(call.drv.event_create(event, 0));
}

GTSIM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    cudaEventRecord_v3020_params p{event, stream};
    return event_record(GTSIM_CBID(cudaEventRecord_v3020), "cudaEventRecord", &p, event, stream, false);
}

GTSIM_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
    cudaEventRecord_ptsz_v7000_params p{event, stream};
    return event_record(GTSIM_CBID(cudaEventRecord_ptsz_v7000), "cudaEventRecord_ptsz", &p, event, stream, true);
}

GTSIM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    cudaEventSynchronize_v3020_params p{event};
    RuntimeCall call(GTSIM_CBID(cudaEventSynchronize_v3020), "cudaEventSynchronize", &p);
    return call.finish(call.drv.event_sync(event));
}

GTSIM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
    cudaEventDestroy_v3020_params p{event};
    RuntimeCall call(GTSIM_CBID(cudaEventDestroy_v3020), "cudaEventDestroy", &p);
    return call.finish(call.drv.event_destroy(event));
}

GTSIM_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
    cudaGetDeviceCount_v3020_params p{count};
    RuntimeCall call(GTSIM_CBID(cudaGetDeviceCount_v3020), "cudaGetDeviceCount", &p);
    if (!count) return call.finish(cudaErrorInvalidValue);
    return call.finish(call.drv.device_count(count));
}

// The device's primary context becomes the thread's current context, as in CUDA.
GTSIM_EXPORT cudaError_t cudaSetDevice(int device) {
    cudaSetDevice_v3020_params p{device};
    RuntimeCall call(GTSIM_CBID(cudaSetDevice_v3020), "cudaSetDevice", &p);
    CUcontext ctx = nullptr;
    if (CUresult r = call.drv.primary_ctx_retain(&ctx, device); r != CUDA_SUCCESS) return call.finish(r);
    if (CUresult r = call.drv.ctx_set_current(ctx); r != CUDA_SUCCESS) return call.finish(r);
    call.info.device = device;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaGetDevice(int* device) {
    cudaGetDevice_v3020_params p{device};
    RuntimeCall call(GTSIM_CBID(cudaGetDevice_v3020), "cudaGetDevice", &p);
    if (!device) return call.finish(cudaErrorInvalidValue);
    *device = call.drv.current_device();
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaGetLastError(void) {
    RuntimeCall call(GTSIM_CBID(cudaGetLastError_v3020), "cudaGetLastError", nullptr);
    return call.finish(last_error(true), true);
}

GTSIM_EXPORT cudaError_t cudaPeekAtLastError(void) {
    RuntimeCall call(GTSIM_CBID(cudaPeekAtLastError_v3020), "cudaPeekAtLastError", nullptr);
    return call.finish(last_error(false), true);
}

GTSIM_EXPORT const char* cudaGetErrorString(cudaError_t error) {
    cudaGetErrorString_v3020_params p{error};
    RuntimeCall call(GTSIM_CBID(cudaGetErrorString_v3020), "cudaGetErrorString", &p);
    call.finish(cudaSuccess);
    return error_string(error);
}

GTSIM_EXPORT const char* cudaGetErrorName(cudaError_t error) {
    cudaGetErrorName_v6050_params p{error};
    RuntimeCall call(GTSIM_CBID(cudaGetErrorName_v6050), "cudaGetErrorName", &p);
    call.finish(cudaSuccess);
    return error_name(error);
}

GTSIM_EXPORT cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
    cudaRuntimeGetVersion_v3020_params p{runtimeVersion};
    RuntimeCall call(GTSIM_CBID(cudaRuntimeGetVersion_v3020), "cudaRuntimeGetVersion", &p);
    if (!runtimeVersion) return call.finish(cudaErrorInvalidValue);
    *runtimeVersion = 13000;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaDriverGetVersion(int* driverVersion) {
    cudaDriverGetVersion_v3020_params p{driverVersion};
    RuntimeCall call(GTSIM_CBID(cudaDriverGetVersion_v3020), "cudaDriverGetVersion", &p);
    if (!driverVersion) return call.finish(cudaErrorInvalidValue);
    *driverVersion = 13000;
    return call.finish(cudaSuccess);
}

// Drops the current device's allocations, streams and events; queued work still "runs".
GTSIM_EXPORT cudaError_t cudaDeviceReset(void) {
    RuntimeCall call(GTSIM_CBID(cudaDeviceReset_v3020), "cudaDeviceReset", nullptr);
    return call.finish(call.drv.primary_ctx_reset(call.device()));
}
