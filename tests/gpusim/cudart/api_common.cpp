// Correlation ids, observer notification, injection and error bookkeeping for every API call.
#include "api_common.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace gtsim {
namespace {

std::atomic<const gtsim_observer*> g_observer{nullptr};
std::atomic<uint32_t> g_correlation{0};
thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

// Like the driver: load CUDA_INJECTION64_PATH and call its InitializeInjection once. Calls the
// injection makes into cudart on this thread must not wait for this very once_flag.
void inject_once() {
    static std::once_flag once;
    static thread_local bool injecting = false;
    if (injecting) return;
    std::call_once(once, [] {
        injecting = true;
        const char* path = getenv("CUDA_INJECTION64_PATH");
        if (path && *path) {
            void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            auto init = h ? reinterpret_cast<int (*)(void)>(dlsym(h, "InitializeInjection")) : nullptr;
            if (!h)
                fprintf(stderr, "gpusim: CUDA_INJECTION64_PATH=%s: %s\n", path, dlerror());
            else if (!init)
                fprintf(stderr, "gpusim: CUDA_INJECTION64_PATH=%s: no InitializeInjection\n", path);
            else if (int rc = init(); rc != 1)
                fprintf(stderr, "gpusim: CUDA_INJECTION64_PATH=%s: InitializeInjection returned %d\n", path, rc);
        }
        injecting = false;
    });
}

} // namespace

int current_device() { return t_device; }
void set_current_device(int dev) { t_device = dev; }

ApiCall::ApiCall(uint32_t cbid, const char* name, const void* params, const void* kernel_func) {
    Model& m = Model::get(); // reads the environment before the injection can change it
    inject_once();
    info.size = sizeof info;
    info.cbid = cbid;
    info.function_name = name;
    info.symbol_name = kernel_func ? m.kernel_name(kernel_func) : nullptr;
    info.correlation_id = g_correlation.fetch_add(1) + 1;
    info.device = t_device;
    info.params = params;
    info.enter_ns = realtime_ns();
    if (const gtsim_observer* o = g_observer.load(std::memory_order_acquire); o && o->api_enter)
        o->api_enter(o->user, &info);
}

gtsim_gpu_op ApiCall::new_op(gtsim_op_kind kind) const {
    gtsim_gpu_op op{};
    op.size = sizeof op;
    op.kind = kind;
    op.correlation_id = info.correlation_id;
    return op;
}

cudaError_t ApiCall::enqueue(gtsim_gpu_op& op, cudaStream_t stream, bool per_thread) {
    cudaError_t rc = Model::get().enqueue(stream, per_thread, info.device, op, realtime_ns());
    if (rc != cudaSuccess) return rc;
    info.stream_id = op.stream_id;
    // Outside the model lock: the observer may call back into cudart.
    if (const gtsim_observer* o = g_observer.load(std::memory_order_acquire); o && o->gpu_op) o->gpu_op(o->user, &op);
    log_op(op);
    return cudaSuccess;
}

cudaError_t ApiCall::finish(cudaError_t rc, bool keep_last_error) {
    if (rc != cudaSuccess && !keep_last_error) t_last_error = rc;
    info.return_value = rc;
    info.exit_ns = realtime_ns();
    if (const gtsim_observer* o = g_observer.load(std::memory_order_acquire); o && o->api_exit)
        o->api_exit(o->user, &info);
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

GTSIM_EXPORT void gtsim_set_observer(const gtsim_observer* observer) {
    gtsim::g_observer.store(observer, std::memory_order_release);
}

GTSIM_EXPORT int gtsim_stream_id(const void* stream, int per_thread, uint32_t* stream_id) {
    auto h = reinterpret_cast<cudaStream_t>(const_cast<void*>(stream));
    uint32_t id = 0;
    if (gtsim::Model::get().stream_id(h, per_thread != 0, gtsim::current_device(), &id) != cudaSuccess) return -1;
    if (stream_id) *stream_id = id;
    return 0;
}

GTSIM_EXPORT int gtsim_device_count(void) { return gtsim::Model::get().cfg().devices; }
