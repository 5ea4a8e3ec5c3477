// cuGetProcAddress_v2, the way CUDA 13's runtime binds to the driver: by base name, CUDA version
// and stream flavour, answered with the exported symbol that implements that version (so a
// probe on the exported function sees the runtime's calls). Also the error strings.
#include <dlfcn.h>

#include <cstring>

#include "call.h"

using namespace gtsim;

namespace {

struct Proc {
    const char* name;     // what the caller asks for
    int version;          // the CUDA version that introduced this binding
    const char* legacy;   // exported symbol for the legacy default stream
    const char* per_thread; // exported symbol for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, or nullptr
};

// The bindings the simulator implements; versions as the real runtime asks for them.
const Proc kProcs[] = {
    {"cuInit", 2000, "cuInit", nullptr},
    {"cuDriverGetVersion", 2020, "cuDriverGetVersion", nullptr},
    {"cuDeviceGet", 2000, "cuDeviceGet", nullptr},
    {"cuDeviceGetCount", 2000, "cuDeviceGetCount", nullptr},
    {"cuDeviceGetName", 2000, "cuDeviceGetName", nullptr},
    {"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", nullptr},
    {"cuDevicePrimaryCtxRelease", 7000, "cuDevicePrimaryCtxRelease_v2", nullptr},
    {"cuDevicePrimaryCtxReset", 7000, "cuDevicePrimaryCtxReset_v2", nullptr},
    {"cuCtxGetCurrent", 4000, "cuCtxGetCurrent", nullptr},
    {"cuCtxSetCurrent", 4000, "cuCtxSetCurrent", nullptr},
    {"cuCtxGetDevice", 2000, "cuCtxGetDevice", nullptr},
    {"cuCtxSynchronize", 2000, "cuCtxSynchronize", nullptr},
    {"cuCtxSynchronize", 13000, "cuCtxSynchronize_v2", nullptr},
    {"cuModuleLoadData", 2000, "cuModuleLoadData", nullptr},
    {"cuModuleGetFunction", 2000, "cuModuleGetFunction", nullptr},
    {"cuModuleUnload", 2000, "cuModuleUnload", nullptr},
    {"cuLibraryLoadData", 12000, "cuLibraryLoadData", nullptr},
    {"cuLibraryGetKernel", 12000, "cuLibraryGetKernel", nullptr},
    {"cuLibraryUnload", 12000, "cuLibraryUnload", nullptr},
    {"cuKernelGetFunction", 12000, "cuKernelGetFunction", nullptr},
    {"cuLaunchKernel", 4000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"cuLaunchCooperativeKernel", 9000, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"cuMemcpy", 4000, "cuMemcpy", "cuMemcpy_ptds"},
    {"cuMemcpyAsync", 4000, "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
    {"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
    {"cuMemcpyDtoD", 3020, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"},
    {"cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"},
    {"cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"},
    {"cuMemcpyDtoDAsync", 3020, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"},
    {"cuMemcpy2D", 3020, "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds"},
    {"cuMemcpy2DUnaligned", 3020, "cuMemcpy2DUnaligned_v2", "cuMemcpy2DUnaligned_v2_ptds"},
    {"cuMemcpy2DAsync", 3020, "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz"},
    {"cuMemcpy3D", 3020, "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds"},
    {"cuMemcpy3DAsync", 3020, "cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz"},
    {"cuMemsetD8", 3020, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
    {"cuMemsetD16", 3020, "cuMemsetD16_v2", "cuMemsetD16_v2_ptds"},
    {"cuMemsetD32", 3020, "cuMemsetD32_v2", "cuMemsetD32_v2_ptds"},
    {"cuMemsetD8Async", 3020, "cuMemsetD8Async", "cuMemsetD8Async_ptsz"},
    {"cuMemsetD16Async", 3020, "cuMemsetD16Async", "cuMemsetD16Async_ptsz"},
    {"cuMemsetD32Async", 3020, "cuMemsetD32Async", "cuMemsetD32Async_ptsz"},
    {"cuMemsetD2D8", 3020, "cuMemsetD2D8_v2", "cuMemsetD2D8_v2_ptds"},
    {"cuMemsetD2D16", 3020, "cuMemsetD2D16_v2", "cuMemsetD2D16_v2_ptds"},
    {"cuMemsetD2D32", 3020, "cuMemsetD2D32_v2", "cuMemsetD2D32_v2_ptds"},
    {"cuMemsetD2D8Async", 3020, "cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz"},
    {"cuMemsetD2D16Async", 3020, "cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz"},
    {"cuMemsetD2D32Async", 3020, "cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz"},
    {"cuMemAlloc", 3020, "cuMemAlloc_v2", nullptr},
    {"cuMemFree", 3020, "cuMemFree_v2", nullptr},
    {"cuMemHostAlloc", 2020, "cuMemHostAlloc", nullptr},
    {"cuMemAllocHost", 3020, "cuMemAllocHost_v2", nullptr},
    {"cuMemFreeHost", 2000, "cuMemFreeHost", nullptr},
    {"cuStreamCreate", 2000, "cuStreamCreate", nullptr},
    {"cuStreamDestroy", 4000, "cuStreamDestroy_v2", nullptr},
    {"cuStreamSynchronize", 2000, "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
    {"cuEventCreate", 2000, "cuEventCreate", nullptr},
    {"cuEventRecord", 2000, "cuEventRecord", "cuEventRecord_ptsz"},
    {"cuEventSynchronize", 2000, "cuEventSynchronize", nullptr},
    {"cuEventDestroy", 4000, "cuEventDestroy_v2", nullptr},
    {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamEndCapture", 10000, "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuStreamIsCapturing", 10000, "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
    {"cuGraphInstantiateWithFlags", 11040, "cuGraphInstantiateWithFlags", nullptr},
    {"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags", nullptr},
    {"cuGraphLaunch", 10000, "cuGraphLaunch", "cuGraphLaunch_ptsz"},
    {"cuGraphExecDestroy", 10000, "cuGraphExecDestroy", nullptr},
    {"cuGraphDestroy", 10000, "cuGraphDestroy", nullptr},
    {"cuGetErrorString", 6000, "cuGetErrorString", nullptr},
    {"cuGetErrorName", 6000, "cuGetErrorName", nullptr},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2", nullptr},
};

void* self_symbol(const char* name) {
    static void* self = [] {
        Dl_info info{};
        dladdr(reinterpret_cast<void*>(&self_symbol), &info);
        return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }();
    return self ? dlsym(self, name) : nullptr;
}

#define GTSIM_CU_ERRORS(X)                                                                                          \
    X(CUDA_SUCCESS, "no error")                                                                                     \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                                 \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                                    \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                                           \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                                          \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                                   \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                                         \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                                         \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")                           \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                                               \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                                          \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")

} // namespace

GTSIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = nullptr;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const Proc* best = nullptr;
    bool known = false;
    for (const Proc& p : kProcs) {
        if (strcmp(p.name, symbol) != 0) continue;
        known = true;
        if (p.version <= cudaVersion && (!best || p.version > best->version)) best = &p;
    }
    if (!best) {
        if (status) *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    // Per-thread bindings exist from CUDA 7.0 on.
    const char* exported = per_thread && best->per_thread && cudaVersion >= 7000 ? best->per_thread : best->legacy;
    *pfn = self_symbol(exported);
    if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

GTSIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
    cuGetErrorString_params p{error, str};
    DriverCall call(GTSIM_DCBID(cuGetErrorString), "cuGetErrorString", &p);
    if (!str) return call.finish(CUDA_ERROR_INVALID_VALUE);
#define GTSIM_TEXT(code, text) \
    case code: *str = text; return call.finish(CUDA_SUCCESS);
    switch (error) { GTSIM_CU_ERRORS(GTSIM_TEXT) default: *str = nullptr; return call.finish(CUDA_ERROR_INVALID_VALUE); }
#undef GTSIM_TEXT
}

GTSIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
    cuGetErrorName_params p{error, str};
    DriverCall call(GTSIM_DCBID(cuGetErrorName), "cuGetErrorName", &p);
    if (!str) return call.finish(CUDA_ERROR_INVALID_VALUE);
#define GTSIM_NAME(code, text) \
    case code: *str = #code; return call.finish(CUDA_SUCCESS);
    switch (error) { GTSIM_CU_ERRORS(GTSIM_NAME) default: *str = nullptr; return call.finish(CUDA_ERROR_INVALID_VALUE); }
#undef GTSIM_NAME
}
