// The runtime and blas-library paths, the context they run on, and the whole table.
#include "paths.h"

#include "paths_internal.h"
#include "twins.h"

namespace gtsim_workload {

__attribute__((visibility("default"), noinline)) void paths_kernel(float* data, int n) {
    for (int i = 0; i < n; ++i) data[i] += 1; // a host stub: never called by the simulator
}

namespace {

const void* stub() { return reinterpret_cast<const void*>(&paths_kernel); }
void* v(CUdeviceptr p) { return reinterpret_cast<void*>(p); }
void* args[] = {nullptr};

cudaLaunchConfig_t config(unsigned grid, cudaStream_t s) {
    cudaLaunchConfig_t c{};
    c.gridDim = dim3(grid), c.blockDim = dim3(32), c.stream = s;
    return c;
}

std::vector<Path> runtime_paths() {
    const char* k = kStubName;
    return {
        {"runtime", {rt("cudaLaunchKernel", "cuLaunchKernel", {kernel(k, 101)})},
         [](Context& c) { return int(cudaLaunchKernel(stub(), dim3(101), dim3(64), args, 0, c.stream)); }},
        {"runtime", {rt("cudaLaunchKernel_ptsz", "cuLaunchKernel_ptsz", {kernel(k, 102)})},
         [](Context&) { return int(cudaLaunchKernel_ptsz(stub(), dim3(102), dim3(64), args, 0, nullptr)); }},
        {"runtime", {rt("cudaLaunchKernelExC", "cuLaunchKernelEx", {kernel(k, 103)})},
         [](Context& c) {
             cudaLaunchConfig_t cfg = config(103, c.stream);
             return int(cudaLaunchKernelExC(&cfg, stub(), args));
         }},
        {"runtime", {rt("cudaLaunchKernelExC_ptsz", "cuLaunchKernelEx_ptsz", {kernel(k, 104)})},
         [](Context&) {
             cudaLaunchConfig_t cfg = config(104, nullptr);
             return int(cudaLaunchKernelExC_ptsz(&cfg, stub(), args));
         }},
        {"runtime", {rt("cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel", {kernel(k, 105)}, true)},
         [](Context& c) { return int(cudaLaunchCooperativeKernel(stub(), dim3(105), dim3(32), args, 0, c.stream)); }},
        {"runtime", {rt("cudaLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel_ptsz", {kernel(k, 106)}, true)},
         [](Context& c) { return int(cudaLaunchCooperativeKernel_ptsz(stub(), dim3(106), dim3(32), args, 0, c.stream)); }},
        // nvcc 13's <<<>>>: the first argument of cudaLaunchKernel is a cudaKernel_t, not the stub.
        {"runtime", {rt("__cudaGetKernel", nullptr, {}), rt("cudaLaunchKernel", "cuLaunchKernel", {kernel(k, 107)})},
         [](Context& c) {
             cudaKernel_t kernel = nullptr;
             int r = int(__cudaGetKernel(&kernel, stub()));
             return r ? r : int(__cudaLaunchKernel(kernel, dim3(107), dim3(64), args, 0, c.stream));
         }},
        {"runtime", {rt("cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2", {copy(1001)})},
         [](Context& c) { return int(cudaMemcpyAsync(v(c.dev), c.pinned, 1001, cudaMemcpyHostToDevice, c.stream)); }},
        {"runtime", {rt("cudaMemcpy", "cuMemcpyDtoH_v2", {copy(1002)})},
         [](Context& c) { return int(cudaMemcpy(c.pageable.data(), v(c.dev), 1002, cudaMemcpyDeviceToHost)); }},
        {"runtime", {rt("cudaMemcpy_ptds", "cuMemcpyDtoD_v2_ptds", {copy(1003)})},
         [](Context& c) { return int(cudaMemcpy_ptds(v(c.dev2), v(c.dev), 1003, cudaMemcpyDeviceToDevice)); }},
        {"runtime", {rt("cudaMemcpyAsync_ptsz", "cuMemcpyAsync_ptsz", {copy(1004)})},
         [](Context& c) { return int(cudaMemcpyAsync_ptsz(v(c.dev), c.pinned, 1004, cudaMemcpyDefault, nullptr)); }},
        {"runtime", {rt("cudaMemcpy2D", "cuMemcpy2DUnaligned_v2", {copy(16 * 8)})},
         [](Context& c) { return int(cudaMemcpy2D(v(c.dev), 64, c.pinned, 64, 16, 8, cudaMemcpyHostToDevice)); }},
        {"runtime", {rt("cudaMemcpy2DAsync_ptsz", "cuMemcpy2DAsync_v2_ptsz", {copy(24 * 5)})},
         [](Context& c) {
             return int(cudaMemcpy2DAsync_ptsz(c.pageable.data(), 32, v(c.dev), 32, 24, 5, cudaMemcpyDeviceToHost, nullptr));
         }},
        {"runtime", {rt("cudaMemset", "cuMemsetD8_v2", {set(1005)})},
         [](Context& c) { return int(cudaMemset(v(c.dev), 1, 1005)); }},
        {"runtime", {rt("cudaMemsetAsync", "cuMemsetD8Async", {set(1006)})},
         [](Context& c) { return int(cudaMemsetAsync(v(c.dev), 2, 1006, c.stream)); }},
        {"runtime", {rt("cudaMemset_ptds", "cuMemsetD8_v2_ptds", {set(1007)})},
         [](Context& c) { return int(cudaMemset_ptds(v(c.dev), 3, 1007)); }},
        {"runtime", {rt("cudaMemsetAsync_ptsz", "cuMemsetD8Async_ptsz", {set(1008)})},
         [](Context& c) { return int(cudaMemsetAsync_ptsz(v(c.dev), 4, 1008, nullptr)); }},
        {"runtime", {rt("cudaMemset2D", "cuMemsetD2D8_v2", {set(10 * 11)})},
         [](Context& c) { return int(cudaMemset2D(v(c.dev), 128, 0, 10, 11)); }},
        {"runtime", {rt("cudaMemset2DAsync", "cuMemsetD2D8Async", {set(12 * 13)})},
         [](Context& c) { return int(cudaMemset2DAsync(v(c.dev), 128, 0, 12, 13, c.stream)); }},
        {"runtime", {rt("cudaMalloc", "cuMemAlloc_v2", {}), rt("cudaFree", "cuMemFree_v2", {})},
         [](Context&) {
             void* p = nullptr;
             int r = int(cudaMalloc(&p, 4096));
             return r ? r : int(cudaFree(p));
         }},
        {"runtime", {rt("cudaStreamSynchronize", "cuStreamSynchronize", {})},
         [](Context& c) { return int(cudaStreamSynchronize(c.stream)); }},
    };
}

std::vector<Path> blas_paths() {
    return {
        {"blas", {drv("cuLaunchKernel", {kernel(GTBLAS_GEMM_KERNEL, 2)})},
         [](Context& c) { return gtblas_gemm(c.blas, 256, 512, 64, c.stream); }},
        {"blas", {drv("cuMemsetD8Async", {set(4096)}), drv("cuLaunchKernelEx", {kernel(GTBLAS_GEMM_EX_KERNEL, 2)})},
         [](Context& c) { return gtblas_gemm_ex(c.blas, 256, 512, 64, c.stream); }},
        {"blas",
         {drv("cuMemsetD32Async", {set(128 * 128 * 4 * 4)}), drv("cuMemsetD8Async", {set(4096)}),
          drv("cuLaunchKernelEx", {kernel(GTBLAS_SPLITK_KERNEL, 2)}),
          drv("cuLaunchKernel", {kernel(GTBLAS_REDUCE_KERNEL, 64)})},
         [](Context& c) { return gtblas_gemm_splitk(c.blas, 128, 128, 64, 4, c.stream); }},
    };
}

} // namespace

int make_context(Context& c) {
    if (int r = int(cudaStreamCreate(&c.stream))) return r;
    if (int r = cuMemAlloc(&c.dev, 1 << 20)) return r;
    if (int r = cuMemAlloc(&c.dev2, 1 << 20)) return r;
    if (int r = int(cudaMallocHost(&c.pinned, 1 << 16))) return r;
    if (int r = cuModuleLoadData(&c.module, kModule)) return r;
    if (int r = cuModuleGetFunction(&c.function, c.module, kDriverKernel)) return r;
    return gtblas_create(&c.blas);
}

void free_context(Context& c) {
    if (c.blas) gtblas_destroy(c.blas);
    if (c.module) cuModuleUnload(c.module);
    if (c.pinned) cudaFreeHost(c.pinned);
    if (c.dev) cuMemFree(c.dev);
    if (c.dev2) cuMemFree(c.dev2);
    if (c.stream) cudaStreamDestroy(c.stream);
    c = Context{};
}

const std::vector<Path>& paths() {
    static const std::vector<Path> all = [] {
        std::vector<Path> p = runtime_paths();
        for (auto* group : {&driver_launch_paths, &driver_copy_paths, &driver_set_paths, &blas_paths}) {
            std::vector<Path> more = (*group)();
            p.insert(p.end(), more.begin(), more.end());
        }
        return p;
    }();
    return all;
}

} // namespace gtsim_workload
