/* libgtsim_blas.so: a cuBLAS-like test library for the GPU simulator. Like libcublas/libcublasLt
 * on CUDA 13, it never uses the runtime for its work: it loads its kernels from a (fake) module
 * and library, launches them with cuLaunchKernel/cuLaunchKernelEx and clears workspaces with
 * cuMemsetD32Async/cuMemsetD8Async, all on the calling thread, which needs a current context
 * (cudaSetDevice or cuCtxSetCurrent). Every function returns 0 or the CUresult that failed. */
#ifndef GTSIM_BLAS_H
#define GTSIM_BLAS_H

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gtblas_context *gtblas_handle;

/* Kernel names, as cuBLAS names its kernels in CUPTI records (mangled where cuBLAS's are). */
#define GTBLAS_GEMM_KERNEL "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
#define GTBLAS_GEMM_EX_KERNEL "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT"
#define GTBLAS_SPLITK_KERNEL "_Z16gemmSN_NN_kernelPKfS0_Pfiii"
#define GTBLAS_REDUCE_KERNEL "_Z19splitKreduce_kernelPfPKfii"

/* GPU ops each call issues, for tests that count them. */
enum {
    GTBLAS_GEMM_KERNELS = 1, GTBLAS_GEMM_MEMSETS = 0,       /* cuLaunchKernel */
    GTBLAS_GEMM_EX_KERNELS = 1, GTBLAS_GEMM_EX_MEMSETS = 1, /* cuMemsetD8Async, cuLaunchKernelEx */
    GTBLAS_SPLITK_KERNELS = 2, GTBLAS_SPLITK_MEMSETS = 2    /* D32 + D8 memsets, Ex launch, plain launch */
};

/* Loads the kernels (cuModuleLoadData + cuModuleGetFunction, cuLibraryLoadData +
 * cuLibraryGetKernel + cuKernelGetFunction) and allocates a workspace (cuMemAlloc). */
int gtblas_create(gtblas_handle *handle);
int gtblas_destroy(gtblas_handle handle);

/* C = A*B for m x k by k x n: one kernel, grid (ceil(m/128), ceil(n/128), 1), via cuLaunchKernel. */
int gtblas_gemm(gtblas_handle handle, int m, int n, int k, CUstream stream);
/* The cuBLASLt way: a memset of the workspace flags (cuMemsetD8Async), then one kernel via
 * cuLaunchKernelEx with the CUfunction of a library kernel. */
int gtblas_gemm_ex(gtblas_handle handle, int m, int n, int k, CUstream stream);
/* Split-K: clear the partials (cuMemsetD32Async, m*n*splits words) and the semaphores
 * (cuMemsetD8Async), the partial GEMMs (grid.z = splits, cuLaunchKernelEx on the CUkernel
 * itself), then the reduction (splitKreduce, cuLaunchKernel). */
int gtblas_gemm_splitk(gtblas_handle handle, int m, int n, int k, int splits, CUstream stream);

#ifdef __cplusplus
}
#endif

#endif /* GTSIM_BLAS_H */
