// The runtime call bracket and error bookkeeping; ids, the observer and the injection are libcuda's.
#include "api_common.h"

namespace gtsim {
namespace {

thread_local cudaError_t t_last_error = cudaSuccess;

} // namespace

RuntimeCall::RuntimeCall(uint32_t cbid, const char* name, const void* params, const void* kernel_func)
    : drv(driver()) {
    // A launch names a host stub, or (nvcc's launches on CUDA 13) the cudaKernel_t __cudaGetKernel gave.
    if (kernel_func)
        function = static_cast<CUfunction>(drv.function_name(kernel_func) ? const_cast<void*>(kernel_func)
                                                                          : drv.host_function(kernel_func));
    info.size = sizeof info;
    info.cbid = cbid;
    info.function_name = name;
    info.symbol_name = function ? drv.function_name(function) : nullptr;
    info.params = params;
    drv.api_enter(&info); // correlation id, current device, the observer's enter callback
}

cudaError_t RuntimeCall::finish(cudaError_t rc, bool keep_last_error) {
    if (rc != cudaSuccess && !keep_last_error) t_last_error = rc;
    info.return_value = rc;
    drv.api_exit(&info);
    return rc;
}

cudaError_t last_error(bool reset) {
    cudaError_t e = t_last_error;
    if (reset) t_last_error = cudaSuccess;
    return e;
}

#define GTSIM_ERRORS(X)                                                                                     \
    X(cudaSuccess, "no error")                                                                              \
    X(cudaErrorInvalidValue, "invalid argument")                                                            \
    X(cudaErrorMemoryAllocation, "out of memory")                                                           \
    X(cudaErrorInitializationError, "initialization error")                                                 \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                                      \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                                 \
    X(cudaErrorInvalidDeviceFunction, "invalid device function")                                            \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                              \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                                     \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                            \
    X(cudaErrorNotReady, "device not ready")                                                                \
    X(cudaErrorNotSupported, "operation not supported")                                                     \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version")          \
    X(cudaErrorDeviceUninitialized, "invalid device context")                                               \
    X(cudaErrorIllegalState, "the operation cannot be performed in the present state")                      \
    X(cudaErrorSymbolNotFound, "named symbol not found")                                                    \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")                \
    X(cudaErrorUnknown, "unknown error")

const char* error_name(cudaError_t e) {
#define GTSIM_NAME(code, text) \
    case code: return #code;
    switch (e) { GTSIM_ERRORS(GTSIM_NAME) default: return "cudaErrorUnknown"; }
#undef GTSIM_NAME
}

const char* error_string(cudaError_t e) {
#define GTSIM_TEXT(code, text) \
    case code: return text;
    switch (e) { GTSIM_ERRORS(GTSIM_TEXT) default: return "unrecognized error code"; }
#undef GTSIM_TEXT
}

} // namespace gtsim
