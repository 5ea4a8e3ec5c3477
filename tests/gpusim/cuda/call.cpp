// Correlation ids, observer notification, injection and contexts for every API call, driver and
// runtime alike (the runtime brackets its calls with gtsim_api_enter/exit).
#include "call.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "functions.h"

namespace gtsim {
namespace {

std::atomic<const gtsim_observer*> g_observer{nullptr};
std::atomic<uint32_t> g_correlation{0};
// Runtime calls in progress on this thread, innermost last: driver calls inside them are nested.
thread_local std::vector<gtsim_api_info*> t_runtime;
thread_local int t_device = -1; // device of the current context; -1: none

struct Context {
    int device;
    std::atomic<bool> active; // a primary context is active once retained or made current
};
Context g_contexts[64]; // primary contexts; CUcontext is the address

const gtsim_observer* observer() { return g_observer.load(std::memory_order_acquire); }

// Like the driver: load CUDA_INJECTION64_PATH and call its InitializeInjection once. Calls the
// injection makes on this thread must not wait for this very once_flag.
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

void notify_enter(const gtsim_api_info* info) {
    if (const gtsim_observer* o = observer(); o && o->api_enter) o->api_enter(o->user, info);
}

void notify_exit(const gtsim_api_info* info) {
    if (const gtsim_observer* o = observer(); o && o->api_exit) o->api_exit(o->user, info);
}

void notify_ops(const gtsim_gpu_op* ops, size_t n) {
    const gtsim_observer* o = observer();
    if (!o || n == 0) return;
    if (o->size >= sizeof(gtsim_observer) && o->gpu_ops)
        o->gpu_ops(o->user, ops, n);
    else if (o->gpu_op)
        for (size_t i = 0; i < n; ++i) o->gpu_op(o->user, &ops[i]);
}

} // namespace

int current_device() { return t_device; }
void set_current_device(int dev) {
    t_device = dev;
    set_primary_active(dev, true);
}

void set_primary_active(int dev, bool active) {
    if (dev >= 0 && dev < gtsim_device_count()) g_contexts[dev].active.store(active, std::memory_order_relaxed);
}
bool primary_active(int dev) { return dev >= 0 && dev < gtsim_device_count() && g_contexts[dev].active.load(std::memory_order_relaxed); }

DriverCall::DriverCall(uint32_t cbid, const char* name, const void* params, const char* symbol) {
    Model::get(); // reads the environment before the injection can change it
    inject_once();
    info.size = sizeof info;
    info.domain = GTSIM_DOMAIN_DRIVER;
    info.cbid = cbid;
    info.function_name = name;
    info.symbol_name = symbol;
    info.params = params;
    info.device = t_device;
    if (!t_runtime.empty()) { // the runtime's own driver call: CUPTI gives it the runtime call's id
        const gtsim_api_info* parent = t_runtime.back();
        info.correlation_id = parent->correlation_id;
        info.nested = 1;
        api_name_ = parent->function_name;
        runtime_correlation_ = parent->correlation_id;
    } else {
        info.correlation_id = g_correlation.fetch_add(1) + 1;
        api_name_ = name;
        runtime_correlation_ = 0;
    }
    info.enter_ns = realtime_ns();
    notify_enter(&info);
}

gtsim_gpu_op DriverCall::new_op(gtsim_op_kind kind) const {
    gtsim_gpu_op op{};
    op.size = sizeof op;
    op.kind = kind;
    op.correlation_id = info.correlation_id;
    op.runtime_correlation_id = runtime_correlation_;
    op.api_name = api_name_;
    return op;
}

CUresult DriverCall::enqueue(gtsim_gpu_op& op, CUstream stream, bool per_thread, bool* ran) {
    bool captured = false;
    CUresult rc = Model::get().enqueue(stream, per_thread, info.device, op, realtime_ns(), &captured);
    if (ran) *ran = rc == CUDA_SUCCESS && !captured;
    if (rc != CUDA_SUCCESS) return rc;
    info.stream_id = op.stream_id;
    if (captured) return CUDA_SUCCESS; // runs only when the graph is launched
    // Outside the model lock: the observer may call back into the simulator.
    notify_ops(&op, 1);
    log_ops(&op, 1);
    return CUDA_SUCCESS;
}

void DriverCall::report(const std::vector<gtsim_gpu_op>& ops) {
    notify_ops(ops.data(), ops.size());
    log_ops(ops.data(), ops.size());
}

CUresult DriverCall::finish(CUresult rc) {
    info.return_value = rc;
    info.exit_ns = realtime_ns();
    if (info.nested) { // what the runtime call did is what its driver call did
        gtsim_api_info* parent = t_runtime.back();
        if (!parent->stream_id) parent->stream_id = info.stream_id;
        if (!parent->event_id) parent->event_id = info.event_id;
        if (!parent->address) parent->address = info.address;
        if (!parent->bytes) parent->bytes = info.bytes;
    }
    notify_exit(&info);
    return rc;
}

} // namespace gtsim

using namespace gtsim;

GTSIM_EXPORT void gtsim_set_observer(const gtsim_observer* o) { g_observer.store(o, std::memory_order_release); }

GTSIM_EXPORT void gtsim_api_enter(gtsim_api_info* info) {
    Model::get();
    inject_once(); // before the first call's enter, as the driver does at initialization
    if (t_device < 0) set_current_device(0); // the runtime makes its device's primary context current (active)
    info->domain = GTSIM_DOMAIN_RUNTIME;
    info->nested = 0;
    info->correlation_id = g_correlation.fetch_add(1) + 1;
    info->device = t_device;
    info->enter_ns = realtime_ns();
    t_runtime.push_back(info);
    notify_enter(info);
}

GTSIM_EXPORT void gtsim_api_exit(gtsim_api_info* info) {
    if (!t_runtime.empty() && t_runtime.back() == info) t_runtime.pop_back();
    info->exit_ns = realtime_ns();
    notify_exit(info);
}

GTSIM_EXPORT int gtsim_stream_id(const void* stream, int per_thread, uint32_t* stream_id) {
    auto h = reinterpret_cast<CUstream>(const_cast<void*>(stream));
    uint32_t id = 0;
    int dev = t_device < 0 ? 0 : t_device;
    if (Model::get().stream_id(h, per_thread != 0, dev, &id) != CUDA_SUCCESS) return -1;
    if (stream_id) *stream_id = id;
    return 0;
}

GTSIM_EXPORT int gtsim_device_count(void) { return Model::get().cfg().devices; }

GTSIM_EXPORT void* gtsim_context(int device) {
    if (device < 0 || device >= gtsim_device_count()) return nullptr;
    g_contexts[device].device = device;
    return &g_contexts[device];
}

GTSIM_EXPORT int gtsim_context_device(const void* context) {
    auto* c = static_cast<const Context*>(context);
    if (c < g_contexts || c >= g_contexts + gtsim_device_count()) return -1;
    return int(c - g_contexts);
}

GTSIM_EXPORT int gtsim_current_device(void) { return t_device; }

GTSIM_EXPORT void* gtsim_host_function(const void* host_function) {
    return const_cast<Function*>(gtsim::host_function(host_function));
}

GTSIM_EXPORT void* gtsim_host_kernel(const void* host_function) {
    return const_cast<void*>(gtsim::host_kernel(host_function));
}

GTSIM_EXPORT const char* gtsim_function_name(const void* function) {
    const Function* f = launchable(function);
    return f ? f->name : nullptr;
}
