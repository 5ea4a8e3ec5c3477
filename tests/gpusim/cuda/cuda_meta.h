// generated_cuda_meta.h (the <api>_params structs of driver callbacks) names the legacy v1 types
// that cuda.h declares only for the driver's own build. It uses the v1 structs through pointers
// only, so incomplete types do.
#pragma once

#include <cuda.h>

typedef unsigned int CUdeviceptr_v1;
typedef struct CUDA_MEMCPY2D_v1_st CUDA_MEMCPY2D_v1;
typedef struct CUDA_MEMCPY3D_v1_st CUDA_MEMCPY3D_v1;
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st CUDA_ARRAY3D_DESCRIPTOR_v1;

#include <generated_cuda_meta.h>
