// Shared plumbing of the exported cudart functions: the call bracket (correlation ids and
// observer live in libcuda), the per-thread last error, error names.
#pragma once

#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include "driver.h"
#include "gpusim.h"
#include "twins.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))
#define GTSIM_CBID(x) CUPTI_RUNTIME_TRACE_CBID_##x

namespace gtsim {

// One runtime API call: construct at entry, finish() at exit. Driver calls made in between
// (through `drv`) are nested in it: they share its correlation id.
class RuntimeCall {
public:
    // kernel_func: host stub or cudaKernel_t of a launch; its CUfunction is looked up and named.
    RuntimeCall(uint32_t cbid, const char* name, const void* params, const void* kernel_func = nullptr);
    RuntimeCall(const RuntimeCall&) = delete;
    RuntimeCall& operator=(const RuntimeCall&) = delete;

    int device() const { return info.device; }
    // Records rc as the thread's last error unless keep_last_error, then notifies the exit.
    cudaError_t finish(cudaError_t rc, bool keep_last_error = false);
    cudaError_t finish(CUresult rc) { return finish(to_cuda_error(rc)); }

    const Driver& drv;
    CUfunction function = nullptr; // launches only
    gtsim_api_info info{};
};

// The thread's last error (cudaGetLastError resets it, cudaPeekAtLastError does not).
cudaError_t last_error(bool reset);

const char* error_name(cudaError_t e);
const char* error_string(cudaError_t e);

} // namespace gtsim
