// gpusim_selfcheck phase 5: every launch, copy and set path, checked against the correlation rules
// of CUPTI_CORRELATION.md: a runtime call and the driver call the runtime makes inside it share
// one id, with driver callbacks but no DRIVER record for the inner call; a driver call made by the
// application or a library has an id, callbacks and a DRIVER record of its own; every GPU op
// carries the id of the outermost call, in CUPTI and in GTSIM_LOG.
#include <unistd.h>

#include <cstring>
#include <thread>

#include "gtsim_blas.h"
#include "sim_selfcheck_expect.h"

namespace gpusim_selfcheck {
void kernel_a(float* p, int n);
}

extern "C" {
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemcpy2DAsync_ptsz(void*, size_t, const void*, size_t, size_t, size_t, cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemset_ptds(void*, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void*, int, size_t, cudaStream_t);
#define GTSIM_DECLARE_TWIN(base, twin) decltype(base) twin;
GTSIM_DECLARE_TWIN(cuLaunchKernel, cuLaunchKernel_ptsz)
GTSIM_DECLARE_TWIN(cuLaunchKernelEx, cuLaunchKernelEx_ptsz)
GTSIM_DECLARE_TWIN(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpy, cuMemcpy_ptds)
GTSIM_DECLARE_TWIN(cuMemcpyAsync, cuMemcpyAsync_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)
GTSIM_DECLARE_TWIN(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD8_v2, cuMemsetD8_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD16_v2, cuMemsetD16_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD32_v2, cuMemsetD32_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD8Async, cuMemsetD8Async_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD16Async, cuMemsetD16Async_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD32Async, cuMemsetD32Async_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds)
GTSIM_DECLARE_TWIN(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz)
GTSIM_DECLARE_TWIN(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz)
#undef GTSIM_DECLARE_TWIN
}

namespace selfcheck {
namespace {

const char* kNameA = "_ZN16gpusim_selfcheck8kernel_aEPfi";
const char kModule[] = "gtsim-module\nselfcheck_driver_kernel\n";
const void* kStubA = reinterpret_cast<const void*>(&gpusim_selfcheck::kernel_a);

CallExpect rt(const char* fn, const char* nested, std::vector<OpExpect> ops, bool coop = false) {
    return CallExpect{CUPTI_CB_DOMAIN_RUNTIME_API, fn, nested, std::move(ops), coop};
}
CallExpect drv(const char* fn, std::vector<OpExpect> ops, bool coop = false) {
    return CallExpect{CUPTI_CB_DOMAIN_DRIVER_API, fn, nullptr, std::move(ops), coop};
}
OpExpect kernel(const char* name, uint32_t gx) { return OpExpect{"kernel", 0, name, gx}; }
OpExpect copy(uint64_t bytes) { return OpExpect{"memcpy", bytes, "", 0}; }
OpExpect set(uint64_t bytes) { return OpExpect{"memset", bytes, "", 0}; }

struct Buffers {
    CUdeviceptr dev = 0, dev2 = 0;
    void* pinned = nullptr;
    std::vector<char> pageable = std::vector<char>(1 << 16);
    void* host() { return pageable.data(); }
};

void runtime_paths(Buffers& b, cudaStream_t s) {
    void* args[] = {nullptr};
    auto v = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
    expect({rt("cudaLaunchKernel", "cuLaunchKernel", {kernel(kNameA, 101)})},
           [&] { CHECK(cudaLaunchKernel(kStubA, dim3(101), dim3(64), args, 0, s) == cudaSuccess); });
    expect({rt("cudaLaunchKernel_ptsz", "cuLaunchKernel_ptsz", {kernel(kNameA, 102)})},
           [&] { CHECK(cudaLaunchKernel_ptsz(kStubA, dim3(102), dim3(64), args, 0, nullptr) == cudaSuccess); });
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(103), cfg.blockDim = dim3(32), cfg.stream = s;
    expect({rt("cudaLaunchKernelExC", "cuLaunchKernelEx", {kernel(kNameA, 103)})},
           [&] { CHECK(cudaLaunchKernelExC(&cfg, kStubA, args) == cudaSuccess); });
    cfg.gridDim = dim3(104), cfg.stream = nullptr;
    expect({rt("cudaLaunchKernelExC_ptsz", "cuLaunchKernelEx_ptsz", {kernel(kNameA, 104)})},
           [&] { CHECK(cudaLaunchKernelExC_ptsz(&cfg, kStubA, args) == cudaSuccess); });
    expect({rt("cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel", {kernel(kNameA, 105)}, true)},
           [&] { CHECK(cudaLaunchCooperativeKernel(kStubA, dim3(105), dim3(32), args, 0, s) == cudaSuccess); });
    expect({rt("cudaLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel_ptsz", {kernel(kNameA, 106)}, true)},
           [&] { CHECK(cudaLaunchCooperativeKernel_ptsz(kStubA, dim3(106), dim3(32), args, 0, s) == cudaSuccess); });
    expect({rt("cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2", {copy(1001)})},
           [&] { CHECK(cudaMemcpyAsync(v(b.dev), b.pinned, 1001, cudaMemcpyHostToDevice, s) == cudaSuccess); });
    expect({rt("cudaMemcpy", "cuMemcpyDtoH_v2", {copy(1002)})},
           [&] { CHECK(cudaMemcpy(b.host(), v(b.dev), 1002, cudaMemcpyDeviceToHost) == cudaSuccess); });
    expect({rt("cudaMemcpy_ptds", "cuMemcpyDtoD_v2_ptds", {copy(1003)})},
           [&] { CHECK(cudaMemcpy_ptds(v(b.dev2), v(b.dev), 1003, cudaMemcpyDeviceToDevice) == cudaSuccess); });
    expect({rt("cudaMemcpyAsync_ptsz", "cuMemcpyAsync_ptsz", {copy(1004)})},
           [&] { CHECK(cudaMemcpyAsync_ptsz(v(b.dev), b.pinned, 1004, cudaMemcpyDefault, nullptr) == cudaSuccess); });
    expect({rt("cudaMemcpy2D", "cuMemcpy2DUnaligned_v2", {copy(16 * 8)})},
           [&] { CHECK(cudaMemcpy2D(v(b.dev), 64, b.pinned, 64, 16, 8, cudaMemcpyHostToDevice) == cudaSuccess); });
    expect({rt("cudaMemcpy2DAsync_ptsz", "cuMemcpy2DAsync_v2_ptsz", {copy(24 * 5)})}, [&] {
        CHECK(cudaMemcpy2DAsync_ptsz(b.host(), 32, v(b.dev), 32, 24, 5, cudaMemcpyDeviceToHost, nullptr) == cudaSuccess);
    });
    expect({rt("cudaMemset", "cuMemsetD8_v2", {set(1005)})}, [&] { CHECK(cudaMemset(v(b.dev), 1, 1005) == cudaSuccess); });
    expect({rt("cudaMemsetAsync", "cuMemsetD8Async", {set(1006)})},
           [&] { CHECK(cudaMemsetAsync(v(b.dev), 2, 1006, s) == cudaSuccess); });
    expect({rt("cudaMemset_ptds", "cuMemsetD8_v2_ptds", {set(1007)})},
           [&] { CHECK(cudaMemset_ptds(v(b.dev), 3, 1007) == cudaSuccess); });
    expect({rt("cudaMemsetAsync_ptsz", "cuMemsetD8Async_ptsz", {set(1008)})},
           [&] { CHECK(cudaMemsetAsync_ptsz(v(b.dev), 4, 1008, nullptr) == cudaSuccess); });
    expect({rt("cudaMemset2D", "cuMemsetD2D8_v2", {set(10 * 11)})},
           [&] { CHECK(cudaMemset2D(v(b.dev), 128, 0, 10, 11) == cudaSuccess); });
    expect({rt("cudaMemset2DAsync", "cuMemsetD2D8Async", {set(12 * 13)})},
           [&] { CHECK(cudaMemset2DAsync(v(b.dev), 128, 0, 12, 13, s) == cudaSuccess); });
    void* extra = nullptr;
    expect({rt("cudaMalloc", "cuMemAlloc_v2", {})}, [&] { CHECK(cudaMalloc(&extra, 4096) == cudaSuccess); });
    expect({rt("cudaFree", "cuMemFree_v2", {})}, [&] { CHECK(cudaFree(extra) == cudaSuccess); });
    expect({rt("cudaStreamSynchronize", "cuStreamSynchronize", {})},
           [&] { CHECK(cudaStreamSynchronize(s) == cudaSuccess); });
}

void driver_launches(CUfunction f, CUstream s) {
    void* args[] = {nullptr};
    const char* n = "selfcheck_driver_kernel";
    expect({drv("cuLaunchKernel", {kernel(n, 201)})},
           [&] { CHECK(cuLaunchKernel(f, 201, 1, 1, 64, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS); });
    expect({drv("cuLaunchKernel_ptsz", {kernel(n, 202)})},
           [&] { CHECK(cuLaunchKernel_ptsz(f, 202, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS); });
    CUlaunchConfig cfg{};
    cfg.gridDimX = 203, cfg.gridDimY = cfg.gridDimZ = 1, cfg.blockDimX = 32, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    expect({drv("cuLaunchKernelEx", {kernel(n, 203)})}, [&] { CHECK(cuLaunchKernelEx(&cfg, f, args, nullptr) == CUDA_SUCCESS); });
    cfg.gridDimX = 204;
    expect({drv("cuLaunchKernelEx_ptsz", {kernel(n, 204)})},
           [&] { CHECK(cuLaunchKernelEx_ptsz(&cfg, f, args, nullptr) == CUDA_SUCCESS); });
    expect({drv("cuLaunchCooperativeKernel", {kernel(n, 205)}, true)},
           [&] { CHECK(cuLaunchCooperativeKernel(f, 205, 1, 1, 32, 1, 1, 0, s, args) == CUDA_SUCCESS); });
    expect({drv("cuLaunchCooperativeKernel_ptsz", {kernel(n, 206)}, true)},
           [&] { CHECK(cuLaunchCooperativeKernel_ptsz(f, 206, 1, 1, 32, 1, 1, 0, s, args) == CUDA_SUCCESS); });
    CUlaunchAttribute coop{};
    coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    coop.value.cooperative = 1;
    cfg.gridDimX = 207, cfg.attrs = &coop, cfg.numAttrs = 1;
    expect({drv("cuLaunchKernelEx", {kernel(n, 207)}, true)},
           [&] { CHECK(cuLaunchKernelEx(&cfg, f, args, nullptr) == CUDA_SUCCESS); });
}

CUDA_MEMCPY2D desc2d(CUdeviceptr dst, const void* src, size_t w, size_t h) {
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = src, c.srcPitch = w;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst, c.dstPitch = w;
    c.WidthInBytes = w, c.Height = h;
    return c;
}

CUDA_MEMCPY3D desc3d(CUdeviceptr dst, CUdeviceptr src, size_t w, size_t h, size_t d) {
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src, c.dstDevice = dst;
    c.srcPitch = c.dstPitch = w, c.srcHeight = c.dstHeight = h;
    c.WidthInBytes = w, c.Height = h, c.Depth = d;
    return c;
}

void driver_copies(Buffers& b, CUstream s) {
    void* h = b.host();
#define GTSIM_X(fn, bytes, call) expect({drv(#fn, {copy(bytes)})}, [&] { CHECK(call == CUDA_SUCCESS); });
    GTSIM_X(cuMemcpy, 2001, cuMemcpy(b.dev, b.dev2, 2001))
    GTSIM_X(cuMemcpy_ptds, 2002, cuMemcpy_ptds(b.dev, reinterpret_cast<CUdeviceptr>(h), 2002))
    GTSIM_X(cuMemcpyAsync, 2003, cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(b.pinned), b.dev, 2003, s))
    GTSIM_X(cuMemcpyAsync_ptsz, 2004, cuMemcpyAsync_ptsz(b.dev2, b.dev, 2004, nullptr))
    GTSIM_X(cuMemcpyHtoD_v2, 2005, cuMemcpyHtoD_v2(b.dev, h, 2005))
    GTSIM_X(cuMemcpyHtoD_v2_ptds, 2006, cuMemcpyHtoD_v2_ptds(b.dev, h, 2006))
    GTSIM_X(cuMemcpyDtoH_v2, 2007, cuMemcpyDtoH_v2(h, b.dev, 2007))
    GTSIM_X(cuMemcpyDtoH_v2_ptds, 2008, cuMemcpyDtoH_v2_ptds(h, b.dev, 2008))
    GTSIM_X(cuMemcpyDtoD_v2, 2009, cuMemcpyDtoD_v2(b.dev2, b.dev, 2009))
    GTSIM_X(cuMemcpyDtoD_v2_ptds, 2010, cuMemcpyDtoD_v2_ptds(b.dev2, b.dev, 2010))
    GTSIM_X(cuMemcpyHtoDAsync_v2, 2011, cuMemcpyHtoDAsync_v2(b.dev, b.pinned, 2011, s))
    GTSIM_X(cuMemcpyHtoDAsync_v2_ptsz, 2012, cuMemcpyHtoDAsync_v2_ptsz(b.dev, b.pinned, 2012, nullptr))
    GTSIM_X(cuMemcpyDtoHAsync_v2, 2013, cuMemcpyDtoHAsync_v2(b.pinned, b.dev, 2013, s))
    GTSIM_X(cuMemcpyDtoHAsync_v2_ptsz, 2014, cuMemcpyDtoHAsync_v2_ptsz(b.pinned, b.dev, 2014, nullptr))
    GTSIM_X(cuMemcpyDtoDAsync_v2, 2015, cuMemcpyDtoDAsync_v2(b.dev2, b.dev, 2015, s))
    GTSIM_X(cuMemcpyDtoDAsync_v2_ptsz, 2016, cuMemcpyDtoDAsync_v2_ptsz(b.dev2, b.dev, 2016, nullptr))
    CUDA_MEMCPY2D c2 = desc2d(b.dev, h, 20, 3);
    CUDA_MEMCPY3D c3 = desc3d(b.dev2, b.dev, 10, 2, 4);
    GTSIM_X(cuMemcpy2D_v2, 60, cuMemcpy2D_v2(&c2))
    GTSIM_X(cuMemcpy2D_v2_ptds, 60, cuMemcpy2D_v2_ptds(&c2))
    GTSIM_X(cuMemcpy2DUnaligned_v2, 60, cuMemcpy2DUnaligned_v2(&c2))
    GTSIM_X(cuMemcpy2DUnaligned_v2_ptds, 60, cuMemcpy2DUnaligned_v2_ptds(&c2))
    GTSIM_X(cuMemcpy2DAsync_v2, 60, cuMemcpy2DAsync_v2(&c2, s))
    GTSIM_X(cuMemcpy2DAsync_v2_ptsz, 60, cuMemcpy2DAsync_v2_ptsz(&c2, nullptr))
    GTSIM_X(cuMemcpy3D_v2, 80, cuMemcpy3D_v2(&c3))
    GTSIM_X(cuMemcpy3D_v2_ptds, 80, cuMemcpy3D_v2_ptds(&c3))
    GTSIM_X(cuMemcpy3DAsync_v2, 80, cuMemcpy3DAsync_v2(&c3, s))
    GTSIM_X(cuMemcpy3DAsync_v2_ptsz, 80, cuMemcpy3DAsync_v2_ptsz(&c3, nullptr))
#undef GTSIM_X
}

void driver_sets(Buffers& b, CUstream s) {
    CUdeviceptr d = b.dev;
#define GTSIM_X(fn, bytes, ...) expect({drv(#fn, {set(bytes)})}, [&] { CHECK(fn(__VA_ARGS__) == CUDA_SUCCESS); });
    GTSIM_X(cuMemsetD8_v2, 3001, d, 1, 3001)
    GTSIM_X(cuMemsetD8_v2_ptds, 3002, d, 1, 3002)
    GTSIM_X(cuMemsetD16_v2, 3004, d, 1, 1502)
    GTSIM_X(cuMemsetD16_v2_ptds, 3006, d, 1, 1503)
    GTSIM_X(cuMemsetD32_v2, 3008, d, 1, 752)
    GTSIM_X(cuMemsetD32_v2_ptds, 3012, d, 1, 753)
    GTSIM_X(cuMemsetD8Async, 3013, d, 1, 3013, s)
    GTSIM_X(cuMemsetD8Async_ptsz, 3014, d, 1, 3014, nullptr)
    GTSIM_X(cuMemsetD16Async, 3016, d, 1, 1508, s)
    GTSIM_X(cuMemsetD16Async_ptsz, 3018, d, 1, 1509, nullptr)
    GTSIM_X(cuMemsetD32Async, 3020, d, 1, 755, s)
    GTSIM_X(cuMemsetD32Async_ptsz, 3024, d, 1, 756, nullptr)
    GTSIM_X(cuMemsetD2D8_v2, 7 * 3, d, 64, 1, 7, 3)
    GTSIM_X(cuMemsetD2D8_v2_ptds, 8 * 3, d, 64, 1, 8, 3)
    GTSIM_X(cuMemsetD2D16_v2, 2 * 9 * 3, d, 64, 1, 9, 3)
    GTSIM_X(cuMemsetD2D16_v2_ptds, 2 * 10 * 3, d, 64, 1, 10, 3)
    GTSIM_X(cuMemsetD2D32_v2, 4 * 11 * 3, d, 64, 1, 11, 3)
    GTSIM_X(cuMemsetD2D32_v2_ptds, 4 * 12 * 3, d, 64, 1, 12, 3)
    GTSIM_X(cuMemsetD2D8Async, 13 * 3, d, 64, 1, 13, 3, s)
    GTSIM_X(cuMemsetD2D8Async_ptsz, 14 * 3, d, 64, 1, 14, 3, nullptr)
    GTSIM_X(cuMemsetD2D16Async, 2 * 15 * 3, d, 64, 1, 15, 3, s)
    GTSIM_X(cuMemsetD2D16Async_ptsz, 2 * 16 * 3, d, 64, 1, 16, 3, nullptr)
    GTSIM_X(cuMemsetD2D32Async, 4 * 17 * 3, d, 64, 1, 17, 3, s)
    GTSIM_X(cuMemsetD2D32Async_ptsz, 4 * 18 * 3, d, 64, 1, 18, 3, nullptr)
#undef GTSIM_X
}

void blas_paths(gtblas_handle h, CUstream s) {
    expect({drv("cuLaunchKernel", {kernel(GTBLAS_GEMM_KERNEL, 2)})},
           [&] { CHECK(gtblas_gemm(h, 256, 512, 64, s) == 0); });
    expect({drv("cuMemsetD8Async", {set(4096)}), drv("cuLaunchKernelEx", {kernel(GTBLAS_GEMM_EX_KERNEL, 2)})},
           [&] { CHECK(gtblas_gemm_ex(h, 256, 512, 64, s) == 0); });
    expect({drv("cuMemsetD32Async", {set(128 * 128 * 4 * 4)}), drv("cuMemsetD8Async", {set(4096)}),
            drv("cuLaunchKernelEx", {kernel(GTBLAS_SPLITK_KERNEL, 2)}),
            drv("cuLaunchKernel", {kernel(GTBLAS_REDUCE_KERNEL, 64)})},
           [&] { CHECK(gtblas_gemm_splitk(h, 128, 128, 64, 4, s) == 0); });
}

// A C++ thread: no context until the runtime makes one current (or the thread sets it).
void thread_paths(CUfunction f) {
    void* args[] = {nullptr};
    std::thread t([&] {
        expect({drv("cuLaunchKernel", {})}, [&] {
            CHECK(cuLaunchKernel(f, 301, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_ERROR_INVALID_CONTEXT);
        });
        expect({rt("cudaLaunchKernel", "cuLaunchKernel", {kernel(kNameA, 302)})},
               [&] { CHECK(cudaLaunchKernel(kStubA, dim3(302), dim3(32), args, 0, nullptr) == cudaSuccess); });
        expect({drv("cuLaunchKernel", {kernel("selfcheck_driver_kernel", 303)})},
               [&] { CHECK(cuLaunchKernel(f, 303, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS); });
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    });
    t.join();
}

} // namespace

void start_full_tracing() {
    CUpti_SubscriberHandle sub = nullptr;
    CHECK(cupti.Subscribe(&sub, on_callback, nullptr) == CUPTI_SUCCESS);
    CHECK(cupti.EnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS);
    CHECK(cupti.EnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    CHECK(cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS);
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                 CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER})
        CHECK(cupti.ActivityEnable(k) == CUPTI_SUCCESS);
    CHECK(cupti.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS);
}

void paths_phase(const std::string& log_path) {
    CHECK(cupti.Finalize() == CUPTI_SUCCESS);
    collected().clear();
    start_full_tracing();
    Buffers b;
    cudaStream_t s = nullptr;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    CHECK(cuMemAlloc(&b.dev, 1 << 20) == CUDA_SUCCESS && cuMemAlloc(&b.dev2, 1 << 20) == CUDA_SUCCESS);
    CHECK(cudaMallocHost(&b.pinned, 1 << 16) == cudaSuccess);
    CUmodule mod = nullptr;
    CUfunction f = nullptr;
    CHECK(cuModuleLoadData(&mod, kModule) == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, mod, "selfcheck_driver_kernel") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, mod, "missing") == CUDA_ERROR_NOT_FOUND && f);
    gtblas_handle h = nullptr;
    CHECK(gtblas_create(&h) == 0 && h);
    clear_expectations();

    runtime_paths(b, s);
    driver_launches(f, s);
    driver_copies(b, s);
    driver_sets(b, s);
    blas_paths(h, s);
    thread_paths(f);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    size_t calls = check_expectations(log_path);
    CHECK(calls == 20 + 1 + 7 + 26 + 24 + 7 + 3);
    CHECK(gtblas_destroy(h) == 0 && cuModuleUnload(mod) == CUDA_SUCCESS);
    CHECK(cudaFreeHost(b.pinned) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess);
    printf("phase 5: %zu calls on every path joined to their %zu kernels, %zu memcpys, %zu memsets\n", calls,
           collected().kernels.size(), collected().memcpys.size(), collected().memsets.size());
}

} // namespace selfcheck
