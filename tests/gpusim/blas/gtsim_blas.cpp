// A cuBLAS-like library on the driver API only, so tests see GEMMs and memsets issued the way
// libcublasLt issues them on CUDA 13: no runtime call around them.
#include "gtsim_blas.h"

#include <new>

#define GTBLAS_EXPORT extern "C" __attribute__((visibility("default")))

struct gtblas_context {
    CUmodule module = nullptr;
    CUlibrary library = nullptr;
    CUfunction gemm = nullptr;    // from the module
    CUfunction gemm_ex = nullptr; // a library kernel's CUfunction
    CUkernel splitk = nullptr;    // launched as the CUkernel itself
    CUfunction reduce = nullptr;
    CUdeviceptr workspace = 0;
    CUdeviceptr flags = 0;
};

namespace {

// The fake images the simulated driver accepts: a magic line, then one kernel name per line.
const char kModuleImage[] = "gtsim-module\n" GTBLAS_GEMM_KERNEL "\n" GTBLAS_REDUCE_KERNEL "\n";
const char kLibraryImage[] = "gtsim-module\n" GTBLAS_GEMM_EX_KERNEL "\n" GTBLAS_SPLITK_KERNEL "\n";
constexpr size_t kWorkspaceBytes = 64u << 20;
constexpr size_t kFlagBytes = 4096;

unsigned tiles(int n, int tile) { return n <= 0 ? 1u : unsigned((n + tile - 1) / tile); }

int load(gtblas_context* c) {
    CUresult r;
    if ((r = cuModuleLoadData(&c->module, kModuleImage)) != CUDA_SUCCESS) return r;
    if ((r = cuModuleGetFunction(&c->gemm, c->module, GTBLAS_GEMM_KERNEL)) != CUDA_SUCCESS) return r;
    if ((r = cuModuleGetFunction(&c->reduce, c->module, GTBLAS_REDUCE_KERNEL)) != CUDA_SUCCESS) return r;
    if ((r = cuLibraryLoadData(&c->library, kLibraryImage, nullptr, nullptr, 0, nullptr, nullptr, 0)) != CUDA_SUCCESS)
        return r;
    CUkernel ex = nullptr;
    if ((r = cuLibraryGetKernel(&ex, c->library, GTBLAS_GEMM_EX_KERNEL)) != CUDA_SUCCESS) return r;
    if ((r = cuKernelGetFunction(&c->gemm_ex, ex)) != CUDA_SUCCESS) return r;
    if ((r = cuLibraryGetKernel(&c->splitk, c->library, GTBLAS_SPLITK_KERNEL)) != CUDA_SUCCESS) return r;
    if ((r = cuMemAlloc(&c->workspace, kWorkspaceBytes)) != CUDA_SUCCESS) return r;
    return cuMemAlloc(&c->flags, kFlagBytes);
}

} // namespace

GTBLAS_EXPORT int gtblas_create(gtblas_handle* handle) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    *handle = nullptr;
    CUcontext ctx = nullptr;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return CUDA_ERROR_INVALID_CONTEXT;
    auto* c = new (std::nothrow) gtblas_context();
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    if (int r = load(c); r != CUDA_SUCCESS) {
        gtblas_destroy(c);
        return r;
    }
    *handle = c;
    return CUDA_SUCCESS;
}

GTBLAS_EXPORT int gtblas_destroy(gtblas_handle c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (c->workspace) cuMemFree(c->workspace);
    if (c->flags) cuMemFree(c->flags);
    if (c->library) cuLibraryUnload(c->library);
    if (c->module) cuModuleUnload(c->module);
    delete c;
    return CUDA_SUCCESS;
}

GTBLAS_EXPORT int gtblas_gemm(gtblas_handle c, int m, int n, int k, CUstream stream) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    void* args[] = {&c->workspace, &m, &n, &k};
    return cuLaunchKernel(c->gemm, tiles(m, 128), tiles(n, 128), 1, 128, 1, 1, 49152, stream, args, nullptr);
}

GTBLAS_EXPORT int gtblas_gemm_ex(gtblas_handle c, int m, int n, int k, CUstream stream) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = cuMemsetD8Async(c->flags, 0, kFlagBytes, stream); r != CUDA_SUCCESS) return r;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = tiles(m, 128), cfg.gridDimY = tiles(n, 256), cfg.gridDimZ = 1;
    cfg.blockDimX = 384, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = 200704;
    cfg.hStream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    void* args[] = {&c->workspace, &m, &n, &k};
    return cuLaunchKernelEx(&cfg, c->gemm_ex, args, nullptr);
}

GTBLAS_EXPORT int gtblas_gemm_splitk(gtblas_handle c, int m, int n, int k, int splits, CUstream stream) {
    if (!c || splits < 1) return CUDA_ERROR_INVALID_VALUE;
    size_t words = size_t(m > 0 ? m : 1) * size_t(n > 0 ? n : 1) * size_t(splits);
    if (CUresult r = cuMemsetD32Async(c->workspace, 0, words, stream); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuMemsetD8Async(c->flags, 0, kFlagBytes, stream); r != CUDA_SUCCESS) return r;
    CUlaunchConfig cfg{};
    cfg.gridDimX = tiles(m, 64), cfg.gridDimY = tiles(n, 64), cfg.gridDimZ = unsigned(splits);
    cfg.blockDimX = 128, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.hStream = stream;
    void* args[] = {&c->workspace, &m, &n, &k};
    // A CUkernel may be launched where a CUfunction is expected (CUDA 12+).
    if (CUresult r = cuLaunchKernelEx(&cfg, reinterpret_cast<CUfunction>(c->splitk), args, nullptr); r != CUDA_SUCCESS)
        return r;
    void* reduce_args[] = {&c->workspace, &c->workspace, &m, &n};
    return cuLaunchKernel(c->reduce, tiles(m * n, 256), 1, 1, 256, 1, 1, 0, stream, reduce_args, nullptr);
}
