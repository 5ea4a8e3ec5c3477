#include "collect/agent/memory_state.h"

#include <dlfcn.h>

#include <cstring>

#include <cuda.h>

#include "collect/agent/call_capture.h" // monotonic_ns
#include "collect/agent/cupti_session.h"

#include "collect/agent/torch_memory.h"
#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {

// The driver functions used, from the libcuda the process already has (never loaded here).
struct Driver {
    decltype(&::cuDeviceGetCount) device_count;
    decltype(&::cuDeviceGet) device_get;
    decltype(&::cuDevicePrimaryCtxGetState) primary_state;
    decltype(&::cuDevicePrimaryCtxRetain) primary_retain;
    decltype(&::cuDevicePrimaryCtxRelease_v2) primary_release;
    decltype(&::cuCtxGetCurrent) ctx_get;
    decltype(&::cuCtxSetCurrent) ctx_set;
    decltype(&::cuMemGetInfo_v2) mem_info;
};

template <typename F>
bool resolve(void* lib, F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
}

bool find_driver(void* lib, Driver& d) {
    return resolve(lib, d.device_count, "cuDeviceGetCount") && resolve(lib, d.device_get, "cuDeviceGet") &&
           resolve(lib, d.primary_state, "cuDevicePrimaryCtxGetState") &&
           resolve(lib, d.primary_retain, "cuDevicePrimaryCtxRetain") &&
           resolve(lib, d.primary_release, "cuDevicePrimaryCtxRelease_v2") && resolve(lib, d.ctx_get, "cuCtxGetCurrent") &&
           resolve(lib, d.ctx_set, "cuCtxSetCurrent") && resolve(lib, d.mem_info, "cuMemGetInfo_v2");
}

// cuMemGetInfo needs a current context. The device's primary context is used only when the
// process has it active already: retained (so the application cannot destroy it under us) and
// made current on this thread just for the call.
bool device_figures(const Driver& d, CUdevice dev, gt_gpu_memory_state& out) {
    unsigned flags = 0;
    int active = 0;
    if (d.primary_state(dev, &flags, &active) != CUDA_SUCCESS || !active) return false;
    CUcontext ctx = nullptr, previous = nullptr;
    if (d.primary_retain(&ctx, dev) != CUDA_SUCCESS) return false;
    bool ok = false;
    if (d.ctx_get(&previous) == CUDA_SUCCESS && d.ctx_set(ctx) == CUDA_SUCCESS) {
        size_t free_bytes = 0, total = 0;
        out.ts = monotonic_ns();
        if (d.mem_info(&free_bytes, &total) == CUDA_SUCCESS && free_bytes <= total) {
            out.device_used = total - free_bytes, out.device_total = total;
            out.have |= GT_MEMSTATE_DEVICE;
            ok = true;
        }
        d.ctx_set(previous);
    }
    d.primary_release(dev);
    return ok;
}

} // namespace

std::vector<gt_gpu_memory_state> read_memory_states() {
    std::vector<gt_gpu_memory_state> states;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return states;
    Driver d{};
    int count = 0;
    // Before cuInit (CUDA loaded, never used) the count fails: nothing is allocated then.
    if (find_driver(lib, d) && d.device_count(&count) == CUDA_SUCCESS) {
        for (int i = 0; i < count; ++i) {
            CUdevice dev = 0;
            gt_gpu_memory_state s{};
            if (d.device_get(&dev, i) != CUDA_SUCCESS || !device_figures(d, dev, s)) continue;
            s.h.type = GT_GPU_MEMORY_STATE;
            s.h.size = agent_record_size(sizeof s);
            s.device = static_cast<uint32_t>(i);
            states.push_back(s);
        }
    }
    dlclose(lib);
    if (states.empty()) return states;
    TorchMemory torch = read_torch_memory();
    for (auto& s : states) {
        s.torch = torch.status;
        if (torch.status != GT_TORCH_READ) continue;
        if (s.device >= torch.devices.size()) {
            s.torch = GT_TORCH_NO_DEVICE;
            continue;
        }
        s.torch_reserved = torch.devices[s.device].reserved, s.torch_allocated = torch.devices[s.device].allocated;
        s.have |= GT_MEMSTATE_TORCH;
    }
    return states;
}

void send_memory_states() {
    std::vector<gt_gpu_memory_state> states = read_memory_states(); // no lock held: it may wait for Python
    with_session_ring([&](gt_agent_ring* ring) {
        for (const auto& state : states) {
            uint64_t position = 0;
            auto* r = agent_ring_reserve_record<gt_gpu_memory_state>(ring, sizeof state, GT_GPU_MEMORY_STATE, 0, &position);
            if (!r) continue; // counted as dropped
            std::memcpy(r, &state, sizeof state);
            agent_ring_commit(ring, position, r->h.size);
        }
    });
}

} // namespace gtrace::agent
