// Binding the runtime to libcuda.so.1 through cuGetProcAddress_v2, with the (name, version,
// flags) triples the real libcudart.so.13 asks for (observed by loading it against a recording
// libcuda; see README).
#include "driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gtsim {
namespace {

constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_DEFAULT;
constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

[[noreturn]] void broken(const std::string& what) {
    fprintf(stderr, "gpusim: the simulated libcudart cannot use the simulated libcuda.so.1: %s\n", what.c_str());
    abort();
}

void* open_driver() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&open_driver), &info) || !info.dli_fname) broken("dladdr failed");
    std::string path = info.dli_fname;
    path = path.substr(0, path.rfind('/') + 1) + "libcuda.so.1"; // beside this library, like the sim's RUNPATH
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) broken(dlerror());
    return h;
}

struct Binder {
    void* lib;
    decltype(&cuGetProcAddress_v2) get_proc;

    template <typename F>
    void bind(F& out, const char* name, int version, cuuint64_t flags) {
        void* fn = nullptr;
        CUdriverProcAddressQueryResult status{};
        if (get_proc(name, &fn, version, flags, &status) != CUDA_SUCCESS || !fn)
            broken(std::string("cuGetProcAddress_v2(") + name + ") failed");
        out = reinterpret_cast<F>(fn);
    }
    template <typename F>
    void twin(Twin<F>& out, const char* name, int version, int per_thread_version) {
        bind(out[0], name, version, kLegacy);
        bind(out[1], name, per_thread_version, kPerThread);
    }
    template <typename F>
    void own(F& out, const char* name) {
        out = reinterpret_cast<F>(dlsym(lib, name));
        if (!out) broken(std::string("no ") + name);
    }
};

Driver bind_all() {
    Binder b{open_driver(), nullptr};
    b.own(b.get_proc, "cuGetProcAddress_v2");
    Driver d{};
    b.twin(d.launch, "cuLaunchKernel", 4000, 7000);
    b.twin(d.launch_ex, "cuLaunchKernelEx", 11060, 11060);
    b.twin(d.launch_cooperative, "cuLaunchCooperativeKernel", 9000, 9000);
    b.twin(d.memcpy, "cuMemcpy", 4000, 7000);
    b.twin(d.memcpy_async, "cuMemcpyAsync", 4000, 7000);
    b.twin(d.htod, "cuMemcpyHtoD", 3020, 7000);
    b.twin(d.dtoh, "cuMemcpyDtoH", 3020, 7000);
    b.twin(d.dtod, "cuMemcpyDtoD", 3020, 7000);
    b.twin(d.htod_async, "cuMemcpyHtoDAsync", 3020, 7000);
    b.twin(d.dtoh_async, "cuMemcpyDtoHAsync", 3020, 7000);
    b.twin(d.dtod_async, "cuMemcpyDtoDAsync", 3020, 7000);
    b.twin(d.memcpy2d, "cuMemcpy2DUnaligned", 3020, 7000);
    b.twin(d.memcpy2d_async, "cuMemcpy2DAsync", 3020, 7000);
    b.twin(d.memset, "cuMemsetD8", 3020, 7000);
    b.twin(d.memset_async, "cuMemsetD8Async", 3020, 7000);
    b.twin(d.memset2d, "cuMemsetD2D8", 3020, 7000);
    b.twin(d.memset2d_async, "cuMemsetD2D8Async", 3020, 7000);
    b.twin(d.stream_sync, "cuStreamSynchronize", 2000, 7000);
    b.twin(d.event_record, "cuEventRecord", 2000, 7000);
    b.twin(d.graph_launch, "cuGraphLaunch", 10000, 10000);
    b.twin(d.begin_capture, "cuStreamBeginCapture", 10010, 10010);
    b.twin(d.end_capture, "cuStreamEndCapture", 10000, 10000);
    b.twin(d.is_capturing, "cuStreamIsCapturing", 10000, 10000);
    b.bind(d.device_count, "cuDeviceGetCount", 2000, kLegacy);
    b.bind(d.primary_ctx_retain, "cuDevicePrimaryCtxRetain", 7000, kLegacy);
    b.bind(d.primary_ctx_reset, "cuDevicePrimaryCtxReset", 7000, kLegacy);
    b.bind(d.ctx_set_current, "cuCtxSetCurrent", 4000, kLegacy);
    b.bind(d.ctx_synchronize, "cuCtxSynchronize", 13000, kLegacy);
    b.bind(d.stream_create, "cuStreamCreate", 2000, kLegacy);
    b.bind(d.stream_destroy, "cuStreamDestroy", 4000, kLegacy);
    b.bind(d.event_create, "cuEventCreate", 2000, kLegacy);
    b.bind(d.event_sync, "cuEventSynchronize", 2000, kLegacy);
    b.bind(d.event_destroy, "cuEventDestroy", 4000, kLegacy);
    b.bind(d.mem_alloc, "cuMemAlloc", 3020, kLegacy);
    b.bind(d.mem_free, "cuMemFree", 3020, kLegacy);
    b.bind(d.host_alloc, "cuMemHostAlloc", 2020, kLegacy);
    b.bind(d.host_free, "cuMemFreeHost", 2000, kLegacy);
    b.bind(d.instantiate, "cuGraphInstantiateWithFlags", 11040, kLegacy);
    b.bind(d.exec_destroy, "cuGraphExecDestroy", 10000, kLegacy);
    b.bind(d.graph_destroy, "cuGraphDestroy", 10000, kLegacy);
    b.own(d.api_enter, "gtsim_api_enter");
    b.own(d.api_exit, "gtsim_api_exit");
    b.own(d.host_function, "gtsim_host_function");
    b.own(d.host_kernel, "gtsim_host_kernel");
    b.own(d.function_name, "gtsim_function_name");
    b.own(d.current_device, "gtsim_current_device");
    return d;
}

} // namespace

const Driver& driver() {
    static const Driver d = bind_all();
    return d;
}

cudaError_t to_cuda_error(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    default: return cudaErrorUnknown;
    }
}

} // namespace gtsim
