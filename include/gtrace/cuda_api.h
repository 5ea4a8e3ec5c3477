/* CUDA API probe table shared by BPF and userspace: which entry points gtrace probes,
 * and what each probe must capture beyond the six argument registers. Fixed-size only. */
#ifndef GTRACE_CUDA_API_H
#define GTRACE_CUDA_API_H

/* X(id, symbol, capture flags, decode). The symbol is the exported name probed in every ELF
 * object that defines it; "_ptsz"/"_ptds" twins and "_v2" versions are separate entries because
 * each is a real entry point (libraries call any of them). Every runtime and driver function that
 * puts work on a GPU is here — launches (plain, Ex, cooperative, legacy), copies and sets of every
 * shape, graph launches — plus allocation, synchronization and kernel lookups. The list follows
 * the exports of CUDA 13's libcudart.so.13 and libcuda.so (the toolkit's stub). `decode` says how
 * userspace reads the arguments (enum gt_api_decode); BPF only uses the capture flags. */
#define GT_CUDA_API_LIST(X)                                                                                            \
	X(CUDA_LAUNCH_COOPERATIVE_KERNEL, "cudaLaunchCooperativeKernel", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_RT)             \
	X(CUDA_LAUNCH_COOPERATIVE_KERNEL_PTSZ, "cudaLaunchCooperativeKernel_ptsz", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_RT)   \
	X(CUDA_LAUNCH_KERNEL, "cudaLaunchKernel", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_RT)                                    \
	X(CUDA_LAUNCH_KERNEL_EXC, "cudaLaunchKernelExC", GT_CAP_CONFIG_ARG0, GT_DEC_LAUNCH_RT_EXC)                        \
	X(CUDA_LAUNCH_KERNEL_EXC_PTSZ, "cudaLaunchKernelExC_ptsz", GT_CAP_CONFIG_ARG0, GT_DEC_LAUNCH_RT_EXC)              \
	X(CUDA_LAUNCH_KERNEL_PTSZ, "cudaLaunchKernel_ptsz", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_RT)                          \
	X(CU_LAUNCH, "cuLaunch", 0, GT_DEC_LAUNCH_DRV_LEGACY)                                                             \
	X(CU_LAUNCH_COOPERATIVE_KERNEL, "cuLaunchCooperativeKernel", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_DRV)                \
	X(CU_LAUNCH_COOPERATIVE_KERNEL_MULTI_DEVICE, "cuLaunchCooperativeKernelMultiDevice", 0, GT_DEC_LAUNCH_DRV_LEGACY) \
	X(CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ, "cuLaunchCooperativeKernel_ptsz", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_DRV)      \
	X(CU_LAUNCH_GRID, "cuLaunchGrid", 0, GT_DEC_LAUNCH_DRV_LEGACY)                                                    \
	X(CU_LAUNCH_GRID_ASYNC, "cuLaunchGridAsync", 0, GT_DEC_LAUNCH_DRV_LEGACY)                                         \
	X(CU_LAUNCH_KERNEL, "cuLaunchKernel", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_DRV)                                       \
	X(CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", GT_CAP_CONFIG_ARG0, GT_DEC_LAUNCH_DRV_EX)                              \
	X(CU_LAUNCH_KERNEL_EX_PTSZ, "cuLaunchKernelEx_ptsz", GT_CAP_CONFIG_ARG0, GT_DEC_LAUNCH_DRV_EX)                    \
	X(CU_LAUNCH_KERNEL_PTSZ, "cuLaunchKernel_ptsz", GT_CAP_STACK_ARGS, GT_DEC_LAUNCH_DRV)                             \
	X(CUDA_GRAPH_LAUNCH, "cudaGraphLaunch", 0, GT_DEC_GRAPH)                                                          \
	X(CUDA_GRAPH_LAUNCH_PTSZ, "cudaGraphLaunch_ptsz", 0, GT_DEC_GRAPH)                                                \
	X(CU_GRAPH_LAUNCH, "cuGraphLaunch", 0, GT_DEC_GRAPH)                                                              \
	X(CU_GRAPH_LAUNCH_PTSZ, "cuGraphLaunch_ptsz", 0, GT_DEC_GRAPH)                                                    \
	X(CUDA_MEMCPY, "cudaMemcpy", 0, GT_DEC_COPY_RT)                                                                   \
	X(CUDA_MEMCPY2_D, "cudaMemcpy2D", GT_CAP_STACK_ARGS, GT_DEC_COPY_RT_2D)                                           \
	X(CUDA_MEMCPY2_DARRAY_TO_ARRAY, "cudaMemcpy2DArrayToArray", 0, GT_DEC_COPY_OTHER)                                 \
	X(CUDA_MEMCPY2_DARRAY_TO_ARRAY_PTDS, "cudaMemcpy2DArrayToArray_ptds", 0, GT_DEC_COPY_OTHER)                       \
	X(CUDA_MEMCPY2_DASYNC, "cudaMemcpy2DAsync", GT_CAP_STACK_ARGS, GT_DEC_COPY_RT_2D)                                 \
	X(CUDA_MEMCPY2_DASYNC_PTSZ, "cudaMemcpy2DAsync_ptsz", GT_CAP_STACK_ARGS, GT_DEC_COPY_RT_2D)                       \
	X(CUDA_MEMCPY2_DFROM_ARRAY, "cudaMemcpy2DFromArray", 0, GT_DEC_COPY_OTHER)                                        \
	X(CUDA_MEMCPY2_DFROM_ARRAY_ASYNC, "cudaMemcpy2DFromArrayAsync", 0, GT_DEC_COPY_OTHER)                             \
	X(CUDA_MEMCPY2_DFROM_ARRAY_ASYNC_PTSZ, "cudaMemcpy2DFromArrayAsync_ptsz", 0, GT_DEC_COPY_OTHER)                   \
	X(CUDA_MEMCPY2_DFROM_ARRAY_PTDS, "cudaMemcpy2DFromArray_ptds", 0, GT_DEC_COPY_OTHER)                              \
	X(CUDA_MEMCPY2_DTO_ARRAY, "cudaMemcpy2DToArray", 0, GT_DEC_COPY_OTHER)                                            \
	X(CUDA_MEMCPY2_DTO_ARRAY_ASYNC, "cudaMemcpy2DToArrayAsync", 0, GT_DEC_COPY_OTHER)                                 \
	X(CUDA_MEMCPY2_DTO_ARRAY_ASYNC_PTSZ, "cudaMemcpy2DToArrayAsync_ptsz", 0, GT_DEC_COPY_OTHER)                       \
	X(CUDA_MEMCPY2_DTO_ARRAY_PTDS, "cudaMemcpy2DToArray_ptds", 0, GT_DEC_COPY_OTHER)                                  \
	X(CUDA_MEMCPY2_D_PTDS, "cudaMemcpy2D_ptds", GT_CAP_STACK_ARGS, GT_DEC_COPY_RT_2D)                                 \
	X(CUDA_MEMCPY3_D, "cudaMemcpy3D", 0, GT_DEC_COPY_OTHER)                                                           \
	X(CUDA_MEMCPY3_DASYNC, "cudaMemcpy3DAsync", 0, GT_DEC_COPY_OTHER)                                                 \
	X(CUDA_MEMCPY3_DASYNC_PTSZ, "cudaMemcpy3DAsync_ptsz", 0, GT_DEC_COPY_OTHER)                                       \
	X(CUDA_MEMCPY3_DBATCH_ASYNC, "cudaMemcpy3DBatchAsync", 0, GT_DEC_COPY_OTHER)                                      \
	X(CUDA_MEMCPY3_DBATCH_ASYNC_PTSZ, "cudaMemcpy3DBatchAsync_ptsz", 0, GT_DEC_COPY_OTHER)                            \
	X(CUDA_MEMCPY3_DPEER, "cudaMemcpy3DPeer", 0, GT_DEC_COPY_OTHER)                                                   \
	X(CUDA_MEMCPY3_DPEER_ASYNC, "cudaMemcpy3DPeerAsync", 0, GT_DEC_COPY_OTHER)                                        \
	X(CUDA_MEMCPY3_DPEER_ASYNC_PTSZ, "cudaMemcpy3DPeerAsync_ptsz", 0, GT_DEC_COPY_OTHER)                              \
	X(CUDA_MEMCPY3_DPEER_PTDS, "cudaMemcpy3DPeer_ptds", 0, GT_DEC_COPY_OTHER)                                         \
	X(CUDA_MEMCPY3_D_PTDS, "cudaMemcpy3D_ptds", 0, GT_DEC_COPY_OTHER)                                                 \
	X(CUDA_MEMCPY_ARRAY_TO_ARRAY, "cudaMemcpyArrayToArray", 0, GT_DEC_COPY_OTHER)                                     \
	X(CUDA_MEMCPY_ARRAY_TO_ARRAY_PTDS, "cudaMemcpyArrayToArray_ptds", 0, GT_DEC_COPY_OTHER)                           \
	X(CUDA_MEMCPY_ASYNC, "cudaMemcpyAsync", 0, GT_DEC_COPY_RT)                                                        \
	X(CUDA_MEMCPY_ASYNC_PTSZ, "cudaMemcpyAsync_ptsz", 0, GT_DEC_COPY_RT)                                              \
	X(CUDA_MEMCPY_BATCH_ASYNC, "cudaMemcpyBatchAsync", 0, GT_DEC_COPY_OTHER)                                          \
	X(CUDA_MEMCPY_BATCH_ASYNC_PTSZ, "cudaMemcpyBatchAsync_ptsz", 0, GT_DEC_COPY_OTHER)                                \
	X(CUDA_MEMCPY_FROM_ARRAY, "cudaMemcpyFromArray", 0, GT_DEC_COPY_OTHER)                                            \
	X(CUDA_MEMCPY_FROM_ARRAY_ASYNC, "cudaMemcpyFromArrayAsync", 0, GT_DEC_COPY_OTHER)                                 \
	X(CUDA_MEMCPY_FROM_ARRAY_ASYNC_PTSZ, "cudaMemcpyFromArrayAsync_ptsz", 0, GT_DEC_COPY_OTHER)                       \
	X(CUDA_MEMCPY_FROM_ARRAY_PTDS, "cudaMemcpyFromArray_ptds", 0, GT_DEC_COPY_OTHER)                                  \
	X(CUDA_MEMCPY_FROM_SYMBOL, "cudaMemcpyFromSymbol", 0, GT_DEC_COPY_OTHER)                                          \
	X(CUDA_MEMCPY_FROM_SYMBOL_ASYNC, "cudaMemcpyFromSymbolAsync", 0, GT_DEC_COPY_OTHER)                               \
	X(CUDA_MEMCPY_FROM_SYMBOL_ASYNC_PTSZ, "cudaMemcpyFromSymbolAsync_ptsz", 0, GT_DEC_COPY_OTHER)                     \
	X(CUDA_MEMCPY_FROM_SYMBOL_PTDS, "cudaMemcpyFromSymbol_ptds", 0, GT_DEC_COPY_OTHER)                                \
	X(CUDA_MEMCPY_PEER, "cudaMemcpyPeer", 0, GT_DEC_COPY_PEER)                                                        \
	X(CUDA_MEMCPY_PEER_ASYNC, "cudaMemcpyPeerAsync", 0, GT_DEC_COPY_PEER)                                             \
	X(CUDA_MEMCPY_TO_ARRAY, "cudaMemcpyToArray", 0, GT_DEC_COPY_OTHER)                                                \
	X(CUDA_MEMCPY_TO_ARRAY_ASYNC, "cudaMemcpyToArrayAsync", 0, GT_DEC_COPY_OTHER)                                     \
	X(CUDA_MEMCPY_TO_ARRAY_ASYNC_PTSZ, "cudaMemcpyToArrayAsync_ptsz", 0, GT_DEC_COPY_OTHER)                           \
	X(CUDA_MEMCPY_TO_ARRAY_PTDS, "cudaMemcpyToArray_ptds", 0, GT_DEC_COPY_OTHER)                                      \
	X(CUDA_MEMCPY_TO_SYMBOL, "cudaMemcpyToSymbol", 0, GT_DEC_COPY_OTHER)                                              \
	X(CUDA_MEMCPY_TO_SYMBOL_ASYNC, "cudaMemcpyToSymbolAsync", 0, GT_DEC_COPY_OTHER)                                   \
	X(CUDA_MEMCPY_TO_SYMBOL_ASYNC_PTSZ, "cudaMemcpyToSymbolAsync_ptsz", 0, GT_DEC_COPY_OTHER)                         \
	X(CUDA_MEMCPY_TO_SYMBOL_PTDS, "cudaMemcpyToSymbol_ptds", 0, GT_DEC_COPY_OTHER)                                    \
	X(CUDA_MEMCPY_PTDS, "cudaMemcpy_ptds", 0, GT_DEC_COPY_RT)                                                         \
	X(CU_MEMCPY, "cuMemcpy", 0, GT_DEC_COPY_DRV)                                                                      \
	X(CU_MEMCPY2_D, "cuMemcpy2D", 0, GT_DEC_COPY_OTHER)                                                               \
	X(CU_MEMCPY2_DASYNC, "cuMemcpy2DAsync", 0, GT_DEC_COPY_OTHER)                                                     \
	X(CU_MEMCPY2_DASYNC_V2, "cuMemcpy2DAsync_v2", 0, GT_DEC_COPY_OTHER)                                               \
	X(CU_MEMCPY2_DASYNC_V2_PTSZ, "cuMemcpy2DAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                                     \
	X(CU_MEMCPY2_DUNALIGNED, "cuMemcpy2DUnaligned", 0, GT_DEC_COPY_OTHER)                                             \
	X(CU_MEMCPY2_DUNALIGNED_V2, "cuMemcpy2DUnaligned_v2", 0, GT_DEC_COPY_OTHER)                                       \
	X(CU_MEMCPY2_DUNALIGNED_V2_PTDS, "cuMemcpy2DUnaligned_v2_ptds", 0, GT_DEC_COPY_OTHER)                             \
	X(CU_MEMCPY2_D_V2, "cuMemcpy2D_v2", 0, GT_DEC_COPY_OTHER)                                                         \
	X(CU_MEMCPY2_D_V2_PTDS, "cuMemcpy2D_v2_ptds", 0, GT_DEC_COPY_OTHER)                                               \
	X(CU_MEMCPY3_D, "cuMemcpy3D", 0, GT_DEC_COPY_OTHER)                                                               \
	X(CU_MEMCPY3_DASYNC, "cuMemcpy3DAsync", 0, GT_DEC_COPY_OTHER)                                                     \
	X(CU_MEMCPY3_DASYNC_V2, "cuMemcpy3DAsync_v2", 0, GT_DEC_COPY_OTHER)                                               \
	X(CU_MEMCPY3_DASYNC_V2_PTSZ, "cuMemcpy3DAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                                     \
	X(CU_MEMCPY3_DBATCH_ASYNC, "cuMemcpy3DBatchAsync", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY3_DBATCH_ASYNC_PTSZ, "cuMemcpy3DBatchAsync_ptsz", 0, GT_DEC_COPY_OTHER)                                \
	X(CU_MEMCPY3_DBATCH_ASYNC_V2, "cuMemcpy3DBatchAsync_v2", 0, GT_DEC_COPY_OTHER)                                    \
	X(CU_MEMCPY3_DBATCH_ASYNC_V2_PTSZ, "cuMemcpy3DBatchAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                          \
	X(CU_MEMCPY3_DPEER, "cuMemcpy3DPeer", 0, GT_DEC_COPY_OTHER)                                                       \
	X(CU_MEMCPY3_DPEER_ASYNC, "cuMemcpy3DPeerAsync", 0, GT_DEC_COPY_OTHER)                                            \
	X(CU_MEMCPY3_DPEER_ASYNC_PTSZ, "cuMemcpy3DPeerAsync_ptsz", 0, GT_DEC_COPY_OTHER)                                  \
	X(CU_MEMCPY3_DPEER_PTDS, "cuMemcpy3DPeer_ptds", 0, GT_DEC_COPY_OTHER)                                             \
	X(CU_MEMCPY3_D_V2, "cuMemcpy3D_v2", 0, GT_DEC_COPY_OTHER)                                                         \
	X(CU_MEMCPY3_D_V2_PTDS, "cuMemcpy3D_v2_ptds", 0, GT_DEC_COPY_OTHER)                                               \
	X(CU_MEMCPY_ASYNC, "cuMemcpyAsync", 0, GT_DEC_COPY_DRV)                                                           \
	X(CU_MEMCPY_ASYNC_PTSZ, "cuMemcpyAsync_ptsz", 0, GT_DEC_COPY_DRV)                                                 \
	X(CU_MEMCPY_ATO_A, "cuMemcpyAtoA", 0, GT_DEC_COPY_OTHER)                                                          \
	X(CU_MEMCPY_ATO_A_V2, "cuMemcpyAtoA_v2", 0, GT_DEC_COPY_OTHER)                                                    \
	X(CU_MEMCPY_ATO_A_V2_PTDS, "cuMemcpyAtoA_v2_ptds", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_ATO_D, "cuMemcpyAtoD", 0, GT_DEC_COPY_OTHER)                                                          \
	X(CU_MEMCPY_ATO_D_V2, "cuMemcpyAtoD_v2", 0, GT_DEC_COPY_OTHER)                                                    \
	X(CU_MEMCPY_ATO_D_V2_PTDS, "cuMemcpyAtoD_v2_ptds", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_ATO_H, "cuMemcpyAtoH", 0, GT_DEC_COPY_OTHER)                                                          \
	X(CU_MEMCPY_ATO_HASYNC, "cuMemcpyAtoHAsync", 0, GT_DEC_COPY_OTHER)                                                \
	X(CU_MEMCPY_ATO_HASYNC_V2, "cuMemcpyAtoHAsync_v2", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_ATO_HASYNC_V2_PTSZ, "cuMemcpyAtoHAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                                \
	X(CU_MEMCPY_ATO_H_V2, "cuMemcpyAtoH_v2", 0, GT_DEC_COPY_OTHER)                                                    \
	X(CU_MEMCPY_ATO_H_V2_PTDS, "cuMemcpyAtoH_v2_ptds", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_BATCH_ASYNC, "cuMemcpyBatchAsync", 0, GT_DEC_COPY_OTHER)                                              \
	X(CU_MEMCPY_BATCH_ASYNC_PTSZ, "cuMemcpyBatchAsync_ptsz", 0, GT_DEC_COPY_OTHER)                                    \
	X(CU_MEMCPY_BATCH_ASYNC_V2, "cuMemcpyBatchAsync_v2", 0, GT_DEC_COPY_OTHER)                                        \
	X(CU_MEMCPY_BATCH_ASYNC_V2_PTSZ, "cuMemcpyBatchAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                              \
	X(CU_MEMCPY_DTO_A, "cuMemcpyDtoA", 0, GT_DEC_COPY_OTHER)                                                          \
	X(CU_MEMCPY_DTO_A_V2, "cuMemcpyDtoA_v2", 0, GT_DEC_COPY_OTHER)                                                    \
	X(CU_MEMCPY_DTO_A_V2_PTDS, "cuMemcpyDtoA_v2_ptds", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_DTO_D, "cuMemcpyDtoD", 0, GT_DEC_COPY_DRV_DTOD)                                                       \
	X(CU_MEMCPY_DTO_DASYNC, "cuMemcpyDtoDAsync", 0, GT_DEC_COPY_DRV_DTOD)                                             \
	X(CU_MEMCPY_DTO_DASYNC_V2, "cuMemcpyDtoDAsync_v2", 0, GT_DEC_COPY_DRV_DTOD)                                       \
	X(CU_MEMCPY_DTO_DASYNC_V2_PTSZ, "cuMemcpyDtoDAsync_v2_ptsz", 0, GT_DEC_COPY_DRV_DTOD)                             \
	X(CU_MEMCPY_DTO_D_V2, "cuMemcpyDtoD_v2", 0, GT_DEC_COPY_DRV_DTOD)                                                 \
	X(CU_MEMCPY_DTO_D_V2_PTDS, "cuMemcpyDtoD_v2_ptds", 0, GT_DEC_COPY_DRV_DTOD)                                       \
	X(CU_MEMCPY_DTO_H, "cuMemcpyDtoH", 0, GT_DEC_COPY_DRV_DTOH)                                                       \
	X(CU_MEMCPY_DTO_HASYNC, "cuMemcpyDtoHAsync", 0, GT_DEC_COPY_DRV_DTOH)                                             \
	X(CU_MEMCPY_DTO_HASYNC_V2, "cuMemcpyDtoHAsync_v2", 0, GT_DEC_COPY_DRV_DTOH)                                       \
	X(CU_MEMCPY_DTO_HASYNC_V2_PTSZ, "cuMemcpyDtoHAsync_v2_ptsz", 0, GT_DEC_COPY_DRV_DTOH)                             \
	X(CU_MEMCPY_DTO_H_V2, "cuMemcpyDtoH_v2", 0, GT_DEC_COPY_DRV_DTOH)                                                 \
	X(CU_MEMCPY_DTO_H_V2_PTDS, "cuMemcpyDtoH_v2_ptds", 0, GT_DEC_COPY_DRV_DTOH)                                       \
	X(CU_MEMCPY_HTO_A, "cuMemcpyHtoA", 0, GT_DEC_COPY_OTHER)                                                          \
	X(CU_MEMCPY_HTO_AASYNC, "cuMemcpyHtoAAsync", 0, GT_DEC_COPY_OTHER)                                                \
	X(CU_MEMCPY_HTO_AASYNC_V2, "cuMemcpyHtoAAsync_v2", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_HTO_AASYNC_V2_PTSZ, "cuMemcpyHtoAAsync_v2_ptsz", 0, GT_DEC_COPY_OTHER)                                \
	X(CU_MEMCPY_HTO_A_V2, "cuMemcpyHtoA_v2", 0, GT_DEC_COPY_OTHER)                                                    \
	X(CU_MEMCPY_HTO_A_V2_PTDS, "cuMemcpyHtoA_v2_ptds", 0, GT_DEC_COPY_OTHER)                                          \
	X(CU_MEMCPY_HTO_D, "cuMemcpyHtoD", 0, GT_DEC_COPY_DRV_HTOD)                                                       \
	X(CU_MEMCPY_HTO_DASYNC, "cuMemcpyHtoDAsync", 0, GT_DEC_COPY_DRV_HTOD)                                             \
	X(CU_MEMCPY_HTO_DASYNC_V2, "cuMemcpyHtoDAsync_v2", 0, GT_DEC_COPY_DRV_HTOD)                                       \
	X(CU_MEMCPY_HTO_DASYNC_V2_PTSZ, "cuMemcpyHtoDAsync_v2_ptsz", 0, GT_DEC_COPY_DRV_HTOD)                             \
	X(CU_MEMCPY_HTO_D_V2, "cuMemcpyHtoD_v2", 0, GT_DEC_COPY_DRV_HTOD)                                                 \
	X(CU_MEMCPY_HTO_D_V2_PTDS, "cuMemcpyHtoD_v2_ptds", 0, GT_DEC_COPY_DRV_HTOD)                                       \
	X(CU_MEMCPY_PEER, "cuMemcpyPeer", 0, GT_DEC_COPY_PEER)                                                            \
	X(CU_MEMCPY_PEER_ASYNC, "cuMemcpyPeerAsync", 0, GT_DEC_COPY_PEER)                                                 \
	X(CU_MEMCPY_PEER_ASYNC_PTSZ, "cuMemcpyPeerAsync_ptsz", 0, GT_DEC_COPY_PEER)                                       \
	X(CU_MEMCPY_PEER_PTDS, "cuMemcpyPeer_ptds", 0, GT_DEC_COPY_PEER)                                                  \
	X(CU_MEMCPY_PTDS, "cuMemcpy_ptds", 0, GT_DEC_COPY_DRV)                                                            \
	X(CUDA_MEMSET, "cudaMemset", 0, GT_DEC_SET_RT)                                                                    \
	X(CUDA_MEMSET2_D, "cudaMemset2D", 0, GT_DEC_SET_RT_2D)                                                            \
	X(CUDA_MEMSET2_DASYNC, "cudaMemset2DAsync", 0, GT_DEC_SET_RT_2D)                                                  \
	X(CUDA_MEMSET2_DASYNC_PTSZ, "cudaMemset2DAsync_ptsz", 0, GT_DEC_SET_RT_2D)                                        \
	X(CUDA_MEMSET2_D_PTDS, "cudaMemset2D_ptds", 0, GT_DEC_SET_RT_2D)                                                  \
	X(CUDA_MEMSET3_D, "cudaMemset3D", 0, GT_DEC_SET_OTHER)                                                            \
	X(CUDA_MEMSET3_DASYNC, "cudaMemset3DAsync", 0, GT_DEC_SET_OTHER)                                                  \
	X(CUDA_MEMSET3_DASYNC_PTSZ, "cudaMemset3DAsync_ptsz", 0, GT_DEC_SET_OTHER)                                        \
	X(CUDA_MEMSET3_D_PTDS, "cudaMemset3D_ptds", 0, GT_DEC_SET_OTHER)                                                  \
	X(CUDA_MEMSET_ASYNC, "cudaMemsetAsync", 0, GT_DEC_SET_RT)                                                         \
	X(CUDA_MEMSET_ASYNC_PTSZ, "cudaMemsetAsync_ptsz", 0, GT_DEC_SET_RT)                                               \
	X(CUDA_MEMSET_PTDS, "cudaMemset_ptds", 0, GT_DEC_SET_RT)                                                          \
	X(CU_MEMSET_D16, "cuMemsetD16", 0, GT_DEC_SET_DRV16)                                                              \
	X(CU_MEMSET_D16_ASYNC, "cuMemsetD16Async", 0, GT_DEC_SET_DRV16)                                                   \
	X(CU_MEMSET_D16_ASYNC_PTSZ, "cuMemsetD16Async_ptsz", 0, GT_DEC_SET_DRV16)                                         \
	X(CU_MEMSET_D16_V2, "cuMemsetD16_v2", 0, GT_DEC_SET_DRV16)                                                        \
	X(CU_MEMSET_D16_V2_PTDS, "cuMemsetD16_v2_ptds", 0, GT_DEC_SET_DRV16)                                              \
	X(CU_MEMSET_D2_D16, "cuMemsetD2D16", 0, GT_DEC_SET_DRV_2D16)                                                      \
	X(CU_MEMSET_D2_D16_ASYNC, "cuMemsetD2D16Async", 0, GT_DEC_SET_DRV_2D16)                                           \
	X(CU_MEMSET_D2_D16_ASYNC_PTSZ, "cuMemsetD2D16Async_ptsz", 0, GT_DEC_SET_DRV_2D16)                                 \
	X(CU_MEMSET_D2_D16_V2, "cuMemsetD2D16_v2", 0, GT_DEC_SET_DRV_2D16)                                                \
	X(CU_MEMSET_D2_D16_V2_PTDS, "cuMemsetD2D16_v2_ptds", 0, GT_DEC_SET_DRV_2D16)                                      \
	X(CU_MEMSET_D2_D32, "cuMemsetD2D32", 0, GT_DEC_SET_DRV_2D32)                                                      \
	X(CU_MEMSET_D2_D32_ASYNC, "cuMemsetD2D32Async", 0, GT_DEC_SET_DRV_2D32)                                           \
	X(CU_MEMSET_D2_D32_ASYNC_PTSZ, "cuMemsetD2D32Async_ptsz", 0, GT_DEC_SET_DRV_2D32)                                 \
	X(CU_MEMSET_D2_D32_V2, "cuMemsetD2D32_v2", 0, GT_DEC_SET_DRV_2D32)                                                \
	X(CU_MEMSET_D2_D32_V2_PTDS, "cuMemsetD2D32_v2_ptds", 0, GT_DEC_SET_DRV_2D32)                                      \
	X(CU_MEMSET_D2_D8, "cuMemsetD2D8", 0, GT_DEC_SET_DRV_2D8)                                                         \
	X(CU_MEMSET_D2_D8_ASYNC, "cuMemsetD2D8Async", 0, GT_DEC_SET_DRV_2D8)                                              \
	X(CU_MEMSET_D2_D8_ASYNC_PTSZ, "cuMemsetD2D8Async_ptsz", 0, GT_DEC_SET_DRV_2D8)                                    \
	X(CU_MEMSET_D2_D8_V2, "cuMemsetD2D8_v2", 0, GT_DEC_SET_DRV_2D8)                                                   \
	X(CU_MEMSET_D2_D8_V2_PTDS, "cuMemsetD2D8_v2_ptds", 0, GT_DEC_SET_DRV_2D8)                                         \
	X(CU_MEMSET_D32, "cuMemsetD32", 0, GT_DEC_SET_DRV32)                                                              \
	X(CU_MEMSET_D32_ASYNC, "cuMemsetD32Async", 0, GT_DEC_SET_DRV32)                                                   \
	X(CU_MEMSET_D32_ASYNC_PTSZ, "cuMemsetD32Async_ptsz", 0, GT_DEC_SET_DRV32)                                         \
	X(CU_MEMSET_D32_V2, "cuMemsetD32_v2", 0, GT_DEC_SET_DRV32)                                                        \
	X(CU_MEMSET_D32_V2_PTDS, "cuMemsetD32_v2_ptds", 0, GT_DEC_SET_DRV32)                                              \
	X(CU_MEMSET_D8, "cuMemsetD8", 0, GT_DEC_SET_DRV8)                                                                 \
	X(CU_MEMSET_D8_ASYNC, "cuMemsetD8Async", 0, GT_DEC_SET_DRV8)                                                      \
	X(CU_MEMSET_D8_ASYNC_PTSZ, "cuMemsetD8Async_ptsz", 0, GT_DEC_SET_DRV8)                                            \
	X(CU_MEMSET_D8_V2, "cuMemsetD8_v2", 0, GT_DEC_SET_DRV8)                                                           \
	X(CU_MEMSET_D8_V2_PTDS, "cuMemsetD8_v2_ptds", 0, GT_DEC_SET_DRV8)                                                 \
	X(CUDA_MALLOC, "cudaMalloc", GT_CAP_OUT_PTR_ARG0, GT_DEC_MALLOC)                                                  \
	X(CUDA_FREE, "cudaFree", 0, GT_DEC_FREE)                                                                          \
	X(CUDA_STREAM_SYNCHRONIZE, "cudaStreamSynchronize", 0, GT_DEC_SYNC_STREAM)                                        \
	X(CUDA_STREAM_SYNCHRONIZE_PTSZ, "cudaStreamSynchronize_ptsz", 0, GT_DEC_SYNC_STREAM)                              \
	X(CUDA_DEVICE_SYNCHRONIZE, "cudaDeviceSynchronize", 0, GT_DEC_NONE)                                               \
	X(CUDA_EVENT_SYNCHRONIZE, "cudaEventSynchronize", 0, GT_DEC_SYNC_EVENT)                                           \
	X(CU_STREAM_SYNCHRONIZE, "cuStreamSynchronize", 0, GT_DEC_SYNC_STREAM)                                            \
	X(CU_STREAM_SYNCHRONIZE_PTSZ, "cuStreamSynchronize_ptsz", 0, GT_DEC_SYNC_STREAM)                                  \
	X(CU_CTX_SYNCHRONIZE, "cuCtxSynchronize", 0, GT_DEC_NONE)                                                         \
	X(CU_CTX_SYNCHRONIZE_V2, "cuCtxSynchronize_v2", 0, GT_DEC_NONE)                                                   \
	X(CU_EVENT_SYNCHRONIZE, "cuEventSynchronize", 0, GT_DEC_SYNC_EVENT)                                               \
	X(CU_MODULE_GET_FUNCTION, "cuModuleGetFunction", GT_CAP_OUT_PTR_ARG0 | GT_CAP_NAME_ARG2, GT_DEC_FUNC_LOOKUP)      \
	X(CU_LIBRARY_GET_KERNEL, "cuLibraryGetKernel", GT_CAP_OUT_PTR_ARG0 | GT_CAP_NAME_ARG2, GT_DEC_FUNC_LOOKUP)        \
	X(CU_KERNEL_GET_FUNCTION, "cuKernelGetFunction", GT_CAP_OUT_PTR_ARG0, GT_DEC_FUNC_LOOKUP)

/* How userspace reads a call's arguments (decode/api_call.cpp): which family of signatures. */
enum gt_api_decode {
	GT_DEC_NONE = 0,
	GT_DEC_LAUNCH_RT,        /* (func, dim3 grid, dim3 block, args, sharedMem, stream) */
	GT_DEC_LAUNCH_RT_EXC,    /* (const cudaLaunchConfig_t*, func, args) */
	GT_DEC_LAUNCH_DRV,       /* (f, gx, gy, gz, bx, by, bz, sharedMem, stream, ...) */
	GT_DEC_LAUNCH_DRV_EX,    /* (const CUlaunchConfig*, f, params, extra) */
	GT_DEC_LAUNCH_DRV_LEGACY, /* cuLaunch(f), cuLaunchGrid[Async](f, w, h[, stream]), multi-device */
	GT_DEC_COPY_RT,          /* (dst, src, count, kind[, stream]) */
	GT_DEC_COPY_RT_2D,       /* (dst, dpitch, src, spitch, width, height, kind[, stream]) */
	GT_DEC_COPY_PEER,        /* (dst, dstDev/Ctx, src, srcDev/Ctx, count[, stream]) */
	GT_DEC_COPY_DRV,         /* (dst, src, bytes[, stream]), direction unknown (unified) */
	GT_DEC_COPY_DRV_HTOD,
	GT_DEC_COPY_DRV_DTOH,
	GT_DEC_COPY_DRV_DTOD,
	GT_DEC_COPY_OTHER,       /* arrays, symbols, 3D, batches: arguments not read (the GPU record has them) */
	GT_DEC_SET_RT,           /* (ptr, value, count[, stream]) */
	GT_DEC_SET_RT_2D,        /* (ptr, pitch, value, width, height[, stream]) */
	GT_DEC_SET_DRV8,         /* (dst, value, N elements[, stream]) */
	GT_DEC_SET_DRV16,
	GT_DEC_SET_DRV32,
	GT_DEC_SET_DRV_2D8,      /* (dst, pitch, value, width, height[, stream]) */
	GT_DEC_SET_DRV_2D16,
	GT_DEC_SET_DRV_2D32,
	GT_DEC_SET_OTHER,
	GT_DEC_GRAPH,            /* (graphExec, stream) */
	GT_DEC_MALLOC,           /* (void **ptr, size) */
	GT_DEC_FREE,             /* (ptr) */
	GT_DEC_SYNC_STREAM,      /* (stream) */
	GT_DEC_SYNC_EVENT,       /* (event) */
	GT_DEC_FUNC_LOOKUP,      /* writes a function/kernel handle to *arg0 */
};

/* What a probe captures besides the argument registers. */
enum gt_capture_flags {
	GT_CAP_STACK_ARGS = 1 << 0,  /* arguments 7..9, passed on the stack */
	GT_CAP_CONFIG_ARG0 = 1 << 1, /* the first GT_CONFIG_WORDS words of the struct at arg0 */
	GT_CAP_OUT_PTR_ARG0 = 1 << 2, /* at return, the pointer-sized value written to *arg0 */
	GT_CAP_NAME_ARG2 = 1 << 3,   /* the C string at arg2 (a kernel's mangled name) */
};

enum gt_cuda_api {
#define GT_API_ENUM(id, symbol, caps, decode) GT_API_##id,
	GT_CUDA_API_LIST(GT_API_ENUM)
#undef GT_API_ENUM
	GT_API_COUNT
};

/* The BPF cookie of an API probe: api id in the low 16 bits, capture flags above. */
#define GT_COOKIE(api, caps) (((unsigned long long)(caps) << 16) | (unsigned long long)(api))
#define GT_COOKIE_API(cookie) ((unsigned int)((cookie) & 0xffff))
#define GT_COOKIE_CAPS(cookie) ((unsigned int)((cookie) >> 16))

#endif
