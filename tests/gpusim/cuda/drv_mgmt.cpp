// Exported driver API: initialization, devices, contexts, streams, events, memory, synchronization.
#include <cstdio>
#include <cstdlib>

#include "call.h"
#include "twins.h"

using namespace gtsim;

namespace {

CUresult wait_done(DriverCall& call, CUresult rc, uint64_t t) {
    if (rc == CUDA_SUCCESS) sleep_until_realtime(t); // the host blocks until the work has ended
    return call.finish(rc);
}

CUresult stream_sync(uint32_t cbid, const char* name, const void* params, CUstream s, bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t t = 0;
    CUresult rc = Model::get().stream_done(s, per_thread, call.info.device, &call.info.stream_id, &t);
    return wait_done(call, rc, t);
}

CUresult event_record(uint32_t cbid, const char* name, const void* params, CUevent e, CUstream s, bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    return call.finish(Model::get().event_record(e, s, per_thread, call.info.device, realtime_ns(),
                                                 &call.info.event_id, &call.info.stream_id));
}

CUresult host_alloc(DriverCall& call, void** pp, size_t size) {
    if (!pp) return call.finish(CUDA_ERROR_INVALID_VALUE);
    *pp = nullptr;
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (size == 0) return call.finish(CUDA_ERROR_INVALID_VALUE);
    size_t rounded = (size + 4095) & ~size_t{4095};
    void* p = aligned_alloc(4096, rounded); // real host memory: applications write into it
    if (!p) return call.finish(CUDA_ERROR_OUT_OF_MEMORY);
    Model::get().pinned_add(p, size);
    *pp = p;
    call.info.address = reinterpret_cast<uint64_t>(p);
    call.info.bytes = size;
    return call.finish(CUDA_SUCCESS);
}

bool valid_device(CUdevice dev) { return dev >= 0 && dev < Model::get().cfg().devices; }

} // namespace

GTSIM_EXPORT CUresult cuInit(unsigned int flags) {
    cuInit_params p{flags};
    DriverCall call(GTSIM_DCBID(cuInit), "cuInit", &p);
    return call.finish(flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDriverGetVersion(int* version) {
    cuDriverGetVersion_params p{version};
    DriverCall call(GTSIM_DCBID(cuDriverGetVersion), "cuDriverGetVersion", &p);
    if (!version) return call.finish(CUDA_ERROR_INVALID_VALUE);
    *version = 13000;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDeviceGetCount(int* count) {
    cuDeviceGetCount_params p{count};
    DriverCall call(GTSIM_DCBID(cuDeviceGetCount), "cuDeviceGetCount", &p);
    if (!count) return call.finish(CUDA_ERROR_INVALID_VALUE);
    *count = Model::get().cfg().devices;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    cuDeviceGet_params p{device, ordinal};
    DriverCall call(GTSIM_DCBID(cuDeviceGet), "cuDeviceGet", &p);
    if (!device) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(ordinal)) return call.finish(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    cuDeviceGetName_params p{name, len, dev};
    DriverCall call(GTSIM_DCBID(cuDeviceGetName), "cuDeviceGetName", &p);
    if (!name || len <= 0) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) return call.finish(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, size_t(len), "gpusim device %d", dev);
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    cuDevicePrimaryCtxRetain_params p{pctx, dev};
    DriverCall call(GTSIM_DCBID(cuDevicePrimaryCtxRetain), "cuDevicePrimaryCtxRetain", &p);
    if (!pctx) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) return call.finish(CUDA_ERROR_INVALID_DEVICE);
    *pctx = static_cast<CUcontext>(gtsim_context(dev)); // one primary context per device, never freed
    set_primary_active(dev, true);
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    cuDevicePrimaryCtxGetState_params p{dev, flags, active};
    DriverCall call(GTSIM_DCBID(cuDevicePrimaryCtxGetState), "cuDevicePrimaryCtxGetState", &p);
    if (!flags || !active) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) return call.finish(CUDA_ERROR_INVALID_DEVICE);
    *flags = 0;
    *active = primary_active(dev) ? 1 : 0;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    cuDevicePrimaryCtxRelease_v2_params p{dev};
    DriverCall call(GTSIM_DCBID(cuDevicePrimaryCtxRelease_v2), "cuDevicePrimaryCtxRelease_v2", &p);
    return call.finish(valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE);
}

// Drops the device's allocations, streams and events; queued work still "runs".
GTSIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    cuDevicePrimaryCtxReset_v2_params p{dev};
    DriverCall call(GTSIM_DCBID(cuDevicePrimaryCtxReset_v2), "cuDevicePrimaryCtxReset_v2", &p);
    if (!valid_device(dev)) return call.finish(CUDA_ERROR_INVALID_DEVICE);
    Model::get().device_reset(dev);
    set_primary_active(dev, false);
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
    cuCtxGetCurrent_params p{pctx};
    DriverCall call(GTSIM_DCBID(cuCtxGetCurrent), "cuCtxGetCurrent", &p);
    if (!pctx) return call.finish(CUDA_ERROR_INVALID_VALUE);
    *pctx = static_cast<CUcontext>(gtsim_context(current_device()));
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    cuCtxSetCurrent_params p{ctx};
    DriverCall call(GTSIM_DCBID(cuCtxSetCurrent), "cuCtxSetCurrent", &p);
    int dev = ctx ? gtsim_context_device(ctx) : -1;
    if (ctx && dev < 0) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    set_current_device(dev);
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
    cuCtxGetDevice_params p{device};
    DriverCall call(GTSIM_DCBID(cuCtxGetDevice), "cuCtxGetDevice", &p);
    if (!device) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    *device = call.info.device;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuCtxSynchronize(void) {
    DriverCall call(GTSIM_DCBID(cuCtxSynchronize), "cuCtxSynchronize", nullptr);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    return wait_done(call, CUDA_SUCCESS, Model::get().device_done(call.info.device));
}

GTSIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    cuCtxSynchronize_v2_params p{ctx};
    DriverCall call(GTSIM_DCBID(cuCtxSynchronize_v2), "cuCtxSynchronize_v2", &p);
    int dev = ctx ? gtsim_context_device(ctx) : call.info.device;
    if (dev < 0) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    return wait_done(call, CUDA_SUCCESS, Model::get().device_done(dev));
}

GTSIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
    cuStreamCreate_params p{phStream, flags};
    DriverCall call(GTSIM_DCBID(cuStreamCreate), "cuStreamCreate", &p);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (!phStream || (flags & ~unsigned(CU_STREAM_NON_BLOCKING))) return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().stream_create(call.info.device, flags, phStream, &call.info.stream_id));
}

GTSIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    cuStreamDestroy_v2_params p{hStream};
    DriverCall call(GTSIM_DCBID(cuStreamDestroy_v2), "cuStreamDestroy_v2", &p);
    return call.finish(Model::get().stream_destroy(hStream, &call.info.stream_id));
}

GTSIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    cuStreamSynchronize_params p{hStream};
    return stream_sync(GTSIM_DCBID(cuStreamSynchronize), "cuStreamSynchronize", &p, hStream, false);
}

GTSIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    cuStreamSynchronize_ptsz_params p{hStream};
    return stream_sync(GTSIM_DCBID(cuStreamSynchronize_ptsz), "cuStreamSynchronize_ptsz", &p, hStream, true);
}

GTSIM_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int flags) {
    cuEventCreate_params p{phEvent, flags};
    DriverCall call(GTSIM_DCBID(cuEventCreate), "cuEventCreate", &p);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (!phEvent) return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().event_create(call.info.device, phEvent, &call.info.event_id));
}

GTSIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    cuEventRecord_params p{hEvent, hStream};
    return event_record(GTSIM_DCBID(cuEventRecord), "cuEventRecord", &p, hEvent, hStream, false);
}

GTSIM_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
    cuEventRecord_ptsz_params p{hEvent, hStream};
    return event_record(GTSIM_DCBID(cuEventRecord_ptsz), "cuEventRecord_ptsz", &p, hEvent, hStream, true);
}

GTSIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    cuEventSynchronize_params p{hEvent};
    DriverCall call(GTSIM_DCBID(cuEventSynchronize), "cuEventSynchronize", &p);
    uint64_t t = 0;
    return wait_done(call, Model::get().event_done(hEvent, &call.info.event_id, &t), t);
}

GTSIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    cuEventDestroy_v2_params p{hEvent};
    DriverCall call(GTSIM_DCBID(cuEventDestroy_v2), "cuEventDestroy_v2", &p);
    return call.finish(Model::get().event_destroy(hEvent, &call.info.event_id));
}

GTSIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    cuMemAlloc_v2_params p{dptr, bytesize};
    DriverCall call(GTSIM_DCBID(cuMemAlloc_v2), "cuMemAlloc_v2", &p);
    if (!dptr) return call.finish(CUDA_ERROR_INVALID_VALUE);
    *dptr = 0;
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (bytesize == 0) return call.finish(CUDA_ERROR_INVALID_VALUE);
    uint64_t addr = Model::get().device_alloc(call.info.device, bytesize); // no host memory behind it
    *dptr = addr;
    call.info.address = addr;
    call.info.bytes = bytesize;
    return call.finish(CUDA_SUCCESS);
}

// The current context's device: its allocations (every one in this process, which is alone on
// its simulated devices) are what is used.
GTSIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    cuMemGetInfo_v2_params p{free_bytes, total};
    DriverCall call(GTSIM_DCBID(cuMemGetInfo_v2), "cuMemGetInfo_v2", &p);
    if (!free_bytes || !total) return call.finish(CUDA_ERROR_INVALID_VALUE);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t capacity = Model::get().cfg().device_memory, used = Model::get().device_used(call.info.device);
    *total = capacity;
    *free_bytes = used < capacity ? capacity - used : 0;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    cuMemFree_v2_params p{dptr};
    DriverCall call(GTSIM_DCBID(cuMemFree_v2), "cuMemFree_v2", &p);
    uint64_t bytes = 0;
    if (!dptr || !Model::get().device_free(dptr, &bytes)) return call.finish(CUDA_ERROR_INVALID_VALUE);
    call.info.address = dptr;
    call.info.bytes = bytes;
    return call.finish(CUDA_SUCCESS);
}

GTSIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
    cuMemHostAlloc_params p{pp, bytesize, flags};
    DriverCall call(GTSIM_DCBID(cuMemHostAlloc), "cuMemHostAlloc", &p);
    return host_alloc(call, pp, bytesize);
}

GTSIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    cuMemAllocHost_v2_params p{pp, bytesize};
    DriverCall call(GTSIM_DCBID(cuMemAllocHost_v2), "cuMemAllocHost_v2", &p);
    return host_alloc(call, pp, bytesize);
}

GTSIM_EXPORT CUresult cuMemFreeHost(void* ptr) {
    cuMemFreeHost_params p{ptr};
    DriverCall call(GTSIM_DCBID(cuMemFreeHost), "cuMemFreeHost", &p);
    uint64_t bytes = 0;
    if (!ptr || !Model::get().pinned_remove(ptr, &bytes)) return call.finish(CUDA_ERROR_INVALID_VALUE);
    call.info.address = reinterpret_cast<uint64_t>(ptr);
    call.info.bytes = bytes;
    free(ptr);
    return call.finish(CUDA_SUCCESS);
}
