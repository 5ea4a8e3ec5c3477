/* CUDA API probe table shared by BPF and userspace: which entry points gtrace probes,
 * and what each probe must capture beyond the six argument registers. Fixed-size only. */
#ifndef GTRACE_CUDA_API_H
#define GTRACE_CUDA_API_H

/* X(id, symbol, capture flags). The symbol is the exported name probed in every ELF object
 * that defines it; "_ptsz"/"_ptds" twins are separate entries because users see them as such. */
#define GT_CUDA_API_LIST(X)                                                                   \
	X(CUDA_LAUNCH_KERNEL, "cudaLaunchKernel", GT_CAP_STACK_ARGS)                          \
	X(CUDA_LAUNCH_KERNEL_PTSZ, "cudaLaunchKernel_ptsz", GT_CAP_STACK_ARGS)                \
	X(CUDA_LAUNCH_KERNEL_EXC, "cudaLaunchKernelExC", GT_CAP_CONFIG_ARG0)                  \
	X(CUDA_LAUNCH_KERNEL_EXC_PTSZ, "cudaLaunchKernelExC_ptsz", GT_CAP_CONFIG_ARG0)        \
	X(CUDA_MEMCPY, "cudaMemcpy", 0)                                                        \
	X(CUDA_MEMCPY_PTDS, "cudaMemcpy_ptds", 0)                                              \
	X(CUDA_MEMCPY_ASYNC, "cudaMemcpyAsync", 0)                                             \
	X(CUDA_MEMCPY_ASYNC_PTSZ, "cudaMemcpyAsync_ptsz", 0)                                   \
	X(CUDA_MEMSET, "cudaMemset", 0)                                                        \
	X(CUDA_MEMSET_PTDS, "cudaMemset_ptds", 0)                                              \
	X(CUDA_MEMSET_ASYNC, "cudaMemsetAsync", 0)                                             \
	X(CUDA_MEMSET_ASYNC_PTSZ, "cudaMemsetAsync_ptsz", 0)                                   \
	X(CUDA_MALLOC, "cudaMalloc", GT_CAP_OUT_PTR_ARG0)                                      \
	X(CUDA_FREE, "cudaFree", 0)                                                            \
	X(CUDA_STREAM_SYNCHRONIZE, "cudaStreamSynchronize", 0)                                 \
	X(CUDA_STREAM_SYNCHRONIZE_PTSZ, "cudaStreamSynchronize_ptsz", 0)                       \
	X(CUDA_DEVICE_SYNCHRONIZE, "cudaDeviceSynchronize", 0)                                 \
	X(CUDA_EVENT_SYNCHRONIZE, "cudaEventSynchronize", 0)                                   \
	X(CUDA_GRAPH_LAUNCH, "cudaGraphLaunch", 0)                                             \
	X(CUDA_GRAPH_LAUNCH_PTSZ, "cudaGraphLaunch_ptsz", 0)                                   \
	X(CU_LAUNCH_KERNEL, "cuLaunchKernel", GT_CAP_STACK_ARGS)                               \
	X(CU_LAUNCH_KERNEL_PTSZ, "cuLaunchKernel_ptsz", GT_CAP_STACK_ARGS)                     \
	X(CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", GT_CAP_CONFIG_ARG0)                         \
	X(CU_LAUNCH_KERNEL_EX_PTSZ, "cuLaunchKernelEx_ptsz", GT_CAP_CONFIG_ARG0)               \
	X(CU_MODULE_GET_FUNCTION, "cuModuleGetFunction", GT_CAP_OUT_PTR_ARG0 | GT_CAP_NAME_ARG2) \
	X(CU_LIBRARY_GET_KERNEL, "cuLibraryGetKernel", GT_CAP_OUT_PTR_ARG0 | GT_CAP_NAME_ARG2)   \
	X(CU_KERNEL_GET_FUNCTION, "cuKernelGetFunction", GT_CAP_OUT_PTR_ARG0)

/* What a probe captures besides the argument registers. */
enum gt_capture_flags {
	GT_CAP_STACK_ARGS = 1 << 0,  /* arguments 7..9, passed on the stack */
	GT_CAP_CONFIG_ARG0 = 1 << 1, /* the first GT_CONFIG_WORDS words of the struct at arg0 */
	GT_CAP_OUT_PTR_ARG0 = 1 << 2, /* at return, the pointer-sized value written to *arg0 */
	GT_CAP_NAME_ARG2 = 1 << 3,   /* the C string at arg2 (a kernel's mangled name) */
};

enum gt_cuda_api {
#define GT_API_ENUM(id, symbol, caps) GT_API_##id,
	GT_CUDA_API_LIST(GT_API_ENUM)
#undef GT_API_ENUM
	GT_API_COUNT
};

/* The BPF cookie of an API probe: api id in the low 16 bits, capture flags above. */
#define GT_COOKIE(api, caps) (((unsigned long long)(caps) << 16) | (unsigned long long)(api))
#define GT_COOKIE_API(cookie) ((unsigned int)((cookie) & 0xffff))
#define GT_COOKIE_CAPS(cookie) ((unsigned int)((cookie) >> 16))

#endif
