// The runtime's binding to the simulated libcuda.so.1, made as CUDA 13's runtime makes it: the
// library is dlopen'ed and every entry point comes from cuGetProcAddress_v2 (base name, CUDA
// version, stream flavour), so the runtime calls libcuda's exported functions.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gpusim.h"
#include "twins.h"

namespace gtsim {

// A pair of bindings: [0] legacy default stream, [1] per-thread default stream.
template <typename F>
using Twin = F[2];

struct Driver {
    Twin<decltype(&cuLaunchKernel)> launch;
    Twin<decltype(&cuLaunchKernelEx)> launch_ex;
    Twin<decltype(&cuLaunchCooperativeKernel)> launch_cooperative;
    Twin<decltype(&cuMemcpy)> memcpy;
    Twin<decltype(&cuMemcpyAsync)> memcpy_async;
    Twin<decltype(&cuMemcpyHtoD_v2)> htod;
    Twin<decltype(&cuMemcpyDtoH_v2)> dtoh;
    Twin<decltype(&cuMemcpyDtoD_v2)> dtod;
    Twin<decltype(&cuMemcpyHtoDAsync_v2)> htod_async;
    Twin<decltype(&cuMemcpyDtoHAsync_v2)> dtoh_async;
    Twin<decltype(&cuMemcpyDtoDAsync_v2)> dtod_async;
    Twin<decltype(&cuMemcpy2DUnaligned_v2)> memcpy2d;
    Twin<decltype(&cuMemcpy2DAsync_v2)> memcpy2d_async;
    Twin<decltype(&cuMemsetD8_v2)> memset;
    Twin<decltype(&cuMemsetD8Async)> memset_async;
    Twin<decltype(&cuMemsetD2D8_v2)> memset2d;
    Twin<decltype(&cuMemsetD2D8Async)> memset2d_async;
    Twin<decltype(&cuStreamSynchronize)> stream_sync;
    Twin<decltype(&cuEventRecord)> event_record;
    Twin<decltype(&cuGraphLaunch)> graph_launch;
    Twin<decltype(&cuStreamBeginCapture_v2)> begin_capture;
    Twin<decltype(&cuStreamEndCapture)> end_capture;
    Twin<decltype(&cuStreamIsCapturing)> is_capturing;
    decltype(&cuDeviceGetCount) device_count;
    decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain;
    decltype(&cuDevicePrimaryCtxReset_v2) primary_ctx_reset;
    decltype(&cuCtxSetCurrent) ctx_set_current;
    decltype(&cuCtxSynchronize_v2) ctx_synchronize;
    decltype(&cuStreamCreate) stream_create;
    decltype(&cuStreamDestroy_v2) stream_destroy;
    decltype(&cuEventCreate) event_create;
    decltype(&cuEventSynchronize) event_sync;
    decltype(&cuEventDestroy_v2) event_destroy;
    decltype(&cuMemAlloc_v2) mem_alloc;
    decltype(&cuMemFree_v2) mem_free;
    decltype(&cuMemHostAlloc) host_alloc;
    decltype(&cuMemFreeHost) host_free;
    decltype(&cuGraphInstantiateWithFlags) instantiate;
    decltype(&cuGraphExecDestroy) exec_destroy;
    decltype(&cuGraphDestroy) graph_destroy;
    // The simulator's own entry points (not CUDA API: no probe or CUPTI sees them).
    decltype(&gtsim_api_enter) api_enter;
    decltype(&gtsim_api_exit) api_exit;
    decltype(&gtsim_host_function) host_function;
    decltype(&gtsim_host_kernel) host_kernel;
    decltype(&gtsim_function_name) function_name;
    decltype(&gtsim_current_device) current_device;
};

// Loads libcuda.so.1 from this library's directory and binds everything, once. A library that
// cannot be loaded or bound ends the process with one line on stderr: the simulator is broken.
const Driver& driver();

cudaError_t to_cuda_error(CUresult r);

} // namespace gtsim
