// Shared plumbing of the exported cudart functions: the call bracket (correlation ids and
// observer live in libcuda), the per-thread last error, error names.
#pragma once

#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include "driver.h"
#include "gpusim.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))
#define GTSIM_CBID(x) CUPTI_RUNTIME_TRACE_CBID_##x

// Per-thread-default-stream twins: the headers only reach them through macros, so declare them.
extern "C" {
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemcpy2D_ptds(void*, size_t, const void*, size_t, size_t, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void*, size_t, const void*, size_t, size_t, size_t, enum cudaMemcpyKind,
                                   cudaStream_t);
cudaError_t cudaMemset_ptds(void*, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void*, int, size_t, cudaStream_t);
cudaError_t cudaMemset2D_ptds(void*, size_t, int, size_t, size_t);
cudaError_t cudaMemset2DAsync_ptsz(void*, size_t, int, size_t, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t, cudaStream_t);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t*);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t, enum cudaStreamCaptureStatus*);
// What nvcc 13's <<<>>> launches call (crt/device_functions.h).
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
}

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
