// Shared plumbing of the exported cudart functions: correlation ids, observer notification,
// per-thread device and last error, driver-style injection.
#pragma once

#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include "gpusim.h"
#include "model.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))
#define GTSIM_CBID(x) CUPTI_RUNTIME_TRACE_CBID_##x

// Per-thread-default-stream twins: the headers only reach them through macros, so declare them.
extern "C" {
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemset_ptds(void*, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void*, int, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t, cudaStream_t);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
}

namespace gtsim {

int current_device();
void set_current_device(int dev);

// One runtime API call: construct at entry (after any injection), finish() at exit.
class ApiCall {
public:
    // kernel_func: host function of a launch, to report its name as symbol_name.
    ApiCall(uint32_t cbid, const char* name, const void* params, const void* kernel_func = nullptr);
    ApiCall(const ApiCall&) = delete;
    ApiCall& operator=(const ApiCall&) = delete;

    // A zeroed op of this call (correlation id set).
    gtsim_gpu_op new_op(gtsim_op_kind kind) const;
    // Schedules op on the stream, then reports and logs it. Fills info.stream_id.
    cudaError_t enqueue(gtsim_gpu_op& op, cudaStream_t stream, bool per_thread);
    // Notifies the exit; records rc as the thread's last error unless keep_last_error.
    cudaError_t finish(cudaError_t rc, bool keep_last_error = false);

    gtsim_api_info info{};
};

// The thread's last error (cudaGetLastError resets it, cudaPeekAtLastError does not).
cudaError_t last_error(bool reset);

const char* error_name(cudaError_t e);
const char* error_string(cudaError_t e);

} // namespace gtsim
