// Exported management API: memory, streams, events, synchronization, devices, errors, versions.
#include <cstdlib>

#include "api_common.h"

using namespace gtsim;

namespace {

// Blocks the host thread until t; synchronizing calls return only after the work ended.
cudaError_t wait_done(ApiCall& call, cudaError_t rc, uint64_t t) {
    if (rc == cudaSuccess) sleep_until_realtime(t);
    return call.finish(rc);
}

cudaError_t host_alloc(ApiCall& call, void** ptr, size_t size) {
    if (!ptr) return call.finish(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return call.finish(cudaSuccess);
    size_t rounded = (size + 4095) & ~size_t{4095};
    void* p = aligned_alloc(4096, rounded); // real host memory: applications write into it
    if (!p) return call.finish(cudaErrorMemoryAllocation);
    Model::get().pinned_add(p, size);
    *ptr = p;
    call.info.address = reinterpret_cast<uint64_t>(p);
    call.info.bytes = size;
    return call.finish(cudaSuccess);
}

cudaError_t stream_sync(uint32_t cbid, const char* name, const void* params, cudaStream_t stream, bool per_thread) {
    ApiCall call(cbid, name, params);
    uint64_t t = 0;
    cudaError_t rc = Model::get().stream_done(stream, per_thread, call.info.device, &call.info.stream_id, &t);
    return wait_done(call, rc, t);
}

cudaError_t event_record(uint32_t cbid, const char* name, const void* params, cudaEvent_t event,
                         cudaStream_t stream, bool per_thread) {
    ApiCall call(cbid, name, params);
    cudaError_t rc = Model::get().event_record(event, stream, per_thread, call.info.device, realtime_ns(),
                                               &call.info.event_id, &call.info.stream_id);
    return call.finish(rc);
}

} // namespace

GTSIM_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
    cudaMalloc_v3020_params p{devPtr, size};
    ApiCall call(GTSIM_CBID(cudaMalloc_v3020), "cudaMalloc", &p);
    if (!devPtr) return call.finish(cudaErrorInvalidValue);
    *devPtr = nullptr;
    if (size == 0) return call.finish(cudaSuccess);
    uint64_t addr = Model::get().device_alloc(call.info.device, size); // no host memory behind it
    *devPtr = reinterpret_cast<void*>(addr);
    call.info.address = addr;
    call.info.bytes = size;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaFree(void* devPtr) {
    cudaFree_v3020_params p{devPtr};
    ApiCall call(GTSIM_CBID(cudaFree_v3020), "cudaFree", &p);
    if (!devPtr) return call.finish(cudaSuccess);
    uint64_t bytes = 0;
    if (!Model::get().device_free(reinterpret_cast<uint64_t>(devPtr), &bytes)) return call.finish(cudaErrorInvalidValue);
    call.info.address = reinterpret_cast<uint64_t>(devPtr);
    call.info.bytes = bytes;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
    cudaMallocHost_v3020_params p{ptr, size};
    ApiCall call(GTSIM_CBID(cudaMallocHost_v3020), "cudaMallocHost", &p);
    return host_alloc(call, ptr, size);
}

GTSIM_EXPORT cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    cudaHostAlloc_v3020_params p{pHost, size, flags};
    ApiCall call(GTSIM_CBID(cudaHostAlloc_v3020), "cudaHostAlloc", &p);
    return host_alloc(call, pHost, size);
}

GTSIM_EXPORT cudaError_t cudaFreeHost(void* ptr) {
    cudaFreeHost_v3020_params p{ptr};
    ApiCall call(GTSIM_CBID(cudaFreeHost_v3020), "cudaFreeHost", &p);
    if (!ptr) return call.finish(cudaSuccess);
    uint64_t bytes = 0;
    if (!Model::get().pinned_remove(ptr, &bytes)) return call.finish(cudaErrorInvalidValue);
    call.info.address = reinterpret_cast<uint64_t>(ptr);
    call.info.bytes = bytes;
    free(ptr);
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
    cudaStreamCreate_v3020_params p{pStream};
    ApiCall call(GTSIM_CBID(cudaStreamCreate_v3020), "cudaStreamCreate", &p);
    if (!pStream) return call.finish(cudaErrorInvalidValue);
    return call.finish(Model::get().stream_create(call.info.device, 0, pStream, &call.info.stream_id));
}

GTSIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
    cudaStreamCreateWithFlags_v5000_params p{pStream, flags};
    ApiCall call(GTSIM_CBID(cudaStreamCreateWithFlags_v5000), "cudaStreamCreateWithFlags", &p);
    if (!pStream || (flags & ~unsigned(cudaStreamNonBlocking))) return call.finish(cudaErrorInvalidValue);
    return call.finish(Model::get().stream_create(call.info.device, flags, pStream, &call.info.stream_id));
}

GTSIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    cudaStreamDestroy_v5050_params p{stream};
    ApiCall call(GTSIM_CBID(cudaStreamDestroy_v5050), "cudaStreamDestroy", &p);
    return call.finish(Model::get().stream_destroy(stream, &call.info.stream_id));
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
    ApiCall call(GTSIM_CBID(cudaDeviceSynchronize_v3020), "cudaDeviceSynchronize", nullptr);
    return wait_done(call, cudaSuccess, Model::get().device_done(call.info.device));
}

GTSIM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
    cudaEventCreate_v3020_params p{event};
    ApiCall call(GTSIM_CBID(cudaEventCreate_v3020), "cudaEventCreate", &p);
    if (!event) return call.finish(cudaErrorInvalidValue);
    return call.finish(Model::get().event_create(call.info.device, event, &call.info.event_id));
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
    ApiCall call(GTSIM_CBID(cudaEventSynchronize_v3020), "cudaEventSynchronize", &p);
    uint64_t t = 0;
    return wait_done(call, Model::get().event_done(event, &call.info.event_id, &t), t);
}

GTSIM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
    cudaEventDestroy_v3020_params p{event};
    ApiCall call(GTSIM_CBID(cudaEventDestroy_v3020), "cudaEventDestroy", &p);
    return call.finish(Model::get().event_destroy(event, &call.info.event_id));
}

GTSIM_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
    cudaGetDeviceCount_v3020_params p{count};
    ApiCall call(GTSIM_CBID(cudaGetDeviceCount_v3020), "cudaGetDeviceCount", &p);
    if (!count) return call.finish(cudaErrorInvalidValue);
    *count = Model::get().cfg().devices;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaSetDevice(int device) {
    cudaSetDevice_v3020_params p{device};
    ApiCall call(GTSIM_CBID(cudaSetDevice_v3020), "cudaSetDevice", &p);
    if (device < 0 || device >= Model::get().cfg().devices) return call.finish(cudaErrorInvalidDevice);
    set_current_device(device);
    call.info.device = device;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaGetDevice(int* device) {
    cudaGetDevice_v3020_params p{device};
    ApiCall call(GTSIM_CBID(cudaGetDevice_v3020), "cudaGetDevice", &p);
    if (!device) return call.finish(cudaErrorInvalidValue);
    *device = current_device();
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaGetLastError(void) {
    ApiCall call(GTSIM_CBID(cudaGetLastError_v3020), "cudaGetLastError", nullptr);
    return call.finish(last_error(true), true);
}

GTSIM_EXPORT cudaError_t cudaPeekAtLastError(void) {
    ApiCall call(GTSIM_CBID(cudaPeekAtLastError_v3020), "cudaPeekAtLastError", nullptr);
    return call.finish(last_error(false), true);
}

GTSIM_EXPORT const char* cudaGetErrorString(cudaError_t error) {
    cudaGetErrorString_v3020_params p{error};
    ApiCall call(GTSIM_CBID(cudaGetErrorString_v3020), "cudaGetErrorString", &p);
    call.finish(cudaSuccess);
    return error_string(error);
}

GTSIM_EXPORT const char* cudaGetErrorName(cudaError_t error) {
    cudaGetErrorName_v6050_params p{error};
    ApiCall call(GTSIM_CBID(cudaGetErrorName_v6050), "cudaGetErrorName", &p);
    call.finish(cudaSuccess);
    return error_name(error);
}

GTSIM_EXPORT cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
    cudaRuntimeGetVersion_v3020_params p{runtimeVersion};
    ApiCall call(GTSIM_CBID(cudaRuntimeGetVersion_v3020), "cudaRuntimeGetVersion", &p);
    if (!runtimeVersion) return call.finish(cudaErrorInvalidValue);
    *runtimeVersion = 13000;
    return call.finish(cudaSuccess);
}

GTSIM_EXPORT cudaError_t cudaDriverGetVersion(int* driverVersion) {
    cudaDriverGetVersion_v3020_params p{driverVersion};
    ApiCall call(GTSIM_CBID(cudaDriverGetVersion_v3020), "cudaDriverGetVersion", &p);
    if (!driverVersion) return call.finish(cudaErrorInvalidValue);
    *driverVersion = 13000;
    return call.finish(cudaSuccess);
}

// Drops the current device's allocations, streams and events; queued work still "runs".
GTSIM_EXPORT cudaError_t cudaDeviceReset(void) {
    ApiCall call(GTSIM_CBID(cudaDeviceReset_v3020), "cudaDeviceReset", nullptr);
    Model::get().device_reset(call.info.device);
    return call.finish(cudaSuccess);
}
