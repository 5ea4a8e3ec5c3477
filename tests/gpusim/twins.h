/* The per-thread-default-stream twins (_ptsz/_ptds) of the driver and runtime functions the
 * simulator implements, and nvcc 13's launch entry points: the CUDA headers declare the twins only
 * for per-thread builds, so declare them here with the signatures of the functions they twin. */
#ifndef GTSIM_TWINS_H
#define GTSIM_TWINS_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#define GTSIM_TWIN(base, twin) decltype(base) twin;
extern "C" {
GTSIM_TWIN(cuLaunchKernel, cuLaunchKernel_ptsz)
GTSIM_TWIN(cuLaunchKernelEx, cuLaunchKernelEx_ptsz)
GTSIM_TWIN(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz)
GTSIM_TWIN(cuMemcpy, cuMemcpy_ptds)
GTSIM_TWIN(cuMemcpyAsync, cuMemcpyAsync_ptsz)
GTSIM_TWIN(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)
GTSIM_TWIN(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
GTSIM_TWIN(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)
GTSIM_TWIN(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)
GTSIM_TWIN(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)
GTSIM_TWIN(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
GTSIM_TWIN(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds)
GTSIM_TWIN(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds)
GTSIM_TWIN(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)
GTSIM_TWIN(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds)
GTSIM_TWIN(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)
GTSIM_TWIN(cuMemsetD8_v2, cuMemsetD8_v2_ptds)
GTSIM_TWIN(cuMemsetD16_v2, cuMemsetD16_v2_ptds)
GTSIM_TWIN(cuMemsetD32_v2, cuMemsetD32_v2_ptds)
GTSIM_TWIN(cuMemsetD8Async, cuMemsetD8Async_ptsz)
GTSIM_TWIN(cuMemsetD16Async, cuMemsetD16Async_ptsz)
GTSIM_TWIN(cuMemsetD32Async, cuMemsetD32Async_ptsz)
GTSIM_TWIN(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds)
GTSIM_TWIN(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds)
GTSIM_TWIN(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds)
GTSIM_TWIN(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz)
GTSIM_TWIN(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz)
GTSIM_TWIN(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz)
GTSIM_TWIN(cuStreamSynchronize, cuStreamSynchronize_ptsz)
GTSIM_TWIN(cuEventRecord, cuEventRecord_ptsz)
GTSIM_TWIN(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz)
GTSIM_TWIN(cuStreamEndCapture, cuStreamEndCapture_ptsz)
GTSIM_TWIN(cuStreamIsCapturing, cuStreamIsCapturing_ptsz)
GTSIM_TWIN(cuGraphLaunch, cuGraphLaunch_ptsz)

GTSIM_TWIN(cudaLaunchKernel, cudaLaunchKernel_ptsz)
GTSIM_TWIN(cudaLaunchKernelExC, cudaLaunchKernelExC_ptsz)
GTSIM_TWIN(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel_ptsz)
GTSIM_TWIN(cudaMemcpy, cudaMemcpy_ptds)
GTSIM_TWIN(cudaMemcpyAsync, cudaMemcpyAsync_ptsz)
GTSIM_TWIN(cudaMemcpy2D, cudaMemcpy2D_ptds)
GTSIM_TWIN(cudaMemcpy2DAsync, cudaMemcpy2DAsync_ptsz)
GTSIM_TWIN(cudaMemset, cudaMemset_ptds)
GTSIM_TWIN(cudaMemsetAsync, cudaMemsetAsync_ptsz)
GTSIM_TWIN(cudaMemset2D, cudaMemset2D_ptds)
GTSIM_TWIN(cudaMemset2DAsync, cudaMemset2DAsync_ptsz)
GTSIM_TWIN(cudaStreamSynchronize, cudaStreamSynchronize_ptsz)
GTSIM_TWIN(cudaEventRecord, cudaEventRecord_ptsz)
GTSIM_TWIN(cudaGraphLaunch, cudaGraphLaunch_ptsz)
GTSIM_TWIN(cudaStreamBeginCapture, cudaStreamBeginCapture_ptsz)
GTSIM_TWIN(cudaStreamEndCapture, cudaStreamEndCapture_ptsz)
GTSIM_TWIN(cudaStreamIsCapturing, cudaStreamIsCapturing_ptsz)

// What nvcc 13's <<<>>> launches call (crt/device_functions.h).
cudaError_t __cudaGetKernel(cudaKernel_t *, const void *);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
}
#undef GTSIM_TWIN

#endif /* GTSIM_TWINS_H */
