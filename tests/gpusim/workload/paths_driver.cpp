// The driver paths an application (or Triton) takes: every launch, and every memcpy and memset
// variant under its exported name, with no runtime call around it.
#include <iterator>

#include "paths_internal.h"
#include "twins.h"

namespace gtsim_workload {
namespace {

void* args[] = {nullptr};

CUlaunchConfig config(unsigned grid, CUstream s, CUlaunchAttribute* attr = nullptr) {
    CUlaunchConfig c{};
    c.gridDimX = grid, c.gridDimY = c.gridDimZ = 1, c.blockDimX = 32, c.blockDimY = c.blockDimZ = 1;
    c.hStream = s, c.attrs = attr, c.numAttrs = attr ? 1 : 0;
    return c;
}

CUDA_MEMCPY2D desc2d(CUdeviceptr dst, const void* src) { // 20 x 3 bytes, host to device
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = src, c.srcPitch = 20;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst, c.dstPitch = 20;
    c.WidthInBytes = 20, c.Height = 3;
    return c;
}

CUDA_MEMCPY3D desc3d(CUdeviceptr dst, CUdeviceptr src) { // 10 x 2 x 4 bytes, device to device
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src, c.dstDevice = dst;
    c.srcPitch = c.dstPitch = 10, c.srcHeight = c.dstHeight = 2;
    c.WidthInBytes = 10, c.Height = 2, c.Depth = 4;
    return c;
}

CUdeviceptr addr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

} // namespace

std::vector<Path> driver_launch_paths() {
    const char* n = kDriverKernel;
    return {
        {"driver", {drv("cuLaunchKernel", {kernel(n, 201)})},
         [](Context& c) { return int(cuLaunchKernel(c.function, 201, 1, 1, 64, 1, 1, 0, c.stream, args, nullptr)); }},
        {"driver", {drv("cuLaunchKernel_ptsz", {kernel(n, 202)})},
         [](Context& c) { return int(cuLaunchKernel_ptsz(c.function, 202, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr)); }},
        {"driver", {drv("cuLaunchKernelEx", {kernel(n, 203)})},
         [](Context& c) {
             CUlaunchConfig cfg = config(203, c.stream);
             return int(cuLaunchKernelEx(&cfg, c.function, args, nullptr));
         }},
        {"driver", {drv("cuLaunchKernelEx_ptsz", {kernel(n, 204)})},
         [](Context& c) {
             CUlaunchConfig cfg = config(204, nullptr);
             return int(cuLaunchKernelEx_ptsz(&cfg, c.function, args, nullptr));
         }},
        {"driver", {drv("cuLaunchCooperativeKernel", {kernel(n, 205)}, true)},
         [](Context& c) { return int(cuLaunchCooperativeKernel(c.function, 205, 1, 1, 32, 1, 1, 0, c.stream, args)); }},
        {"driver", {drv("cuLaunchCooperativeKernel_ptsz", {kernel(n, 206)}, true)},
         [](Context& c) { return int(cuLaunchCooperativeKernel_ptsz(c.function, 206, 1, 1, 32, 1, 1, 0, c.stream, args)); }},
        {"driver", {drv("cuLaunchKernelEx", {kernel(n, 207)}, true)},
         [](Context& c) {
             CUlaunchAttribute coop{};
             coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
             coop.value.cooperative = 1;
             CUlaunchConfig cfg = config(207, c.stream, &coop);
             return int(cuLaunchKernelEx(&cfg, c.function, args, nullptr));
         }},
    };
}

#define GTSIM_PATH(fn, op, ...) {"driver", {drv(#fn, {op})}, [](Context& c) { return int(fn(__VA_ARGS__)); }},

std::vector<Path> driver_copy_paths() {
    return {
        GTSIM_PATH(cuMemcpy, copy(2001), c.dev, c.dev2, 2001)
        GTSIM_PATH(cuMemcpy_ptds, copy(2002), c.dev, addr(c.pageable.data()), 2002)
        GTSIM_PATH(cuMemcpyAsync, copy(2003), addr(c.pinned), c.dev, 2003, c.stream)
        GTSIM_PATH(cuMemcpyAsync_ptsz, copy(2004), c.dev2, c.dev, 2004, nullptr)
        GTSIM_PATH(cuMemcpyHtoD_v2, copy(2005), c.dev, c.pageable.data(), 2005)
        GTSIM_PATH(cuMemcpyHtoD_v2_ptds, copy(2006), c.dev, c.pageable.data(), 2006)
        GTSIM_PATH(cuMemcpyDtoH_v2, copy(2007), c.pageable.data(), c.dev, 2007)
        GTSIM_PATH(cuMemcpyDtoH_v2_ptds, copy(2008), c.pageable.data(), c.dev, 2008)
        GTSIM_PATH(cuMemcpyDtoD_v2, copy(2009), c.dev2, c.dev, 2009)
        GTSIM_PATH(cuMemcpyDtoD_v2_ptds, copy(2010), c.dev2, c.dev, 2010)
        GTSIM_PATH(cuMemcpyHtoDAsync_v2, copy(2011), c.dev, c.pinned, 2011, c.stream)
        GTSIM_PATH(cuMemcpyHtoDAsync_v2_ptsz, copy(2012), c.dev, c.pinned, 2012, nullptr)
        GTSIM_PATH(cuMemcpyDtoHAsync_v2, copy(2013), c.pinned, c.dev, 2013, c.stream)
        GTSIM_PATH(cuMemcpyDtoHAsync_v2_ptsz, copy(2014), c.pinned, c.dev, 2014, nullptr)
        GTSIM_PATH(cuMemcpyDtoDAsync_v2, copy(2015), c.dev2, c.dev, 2015, c.stream)
        GTSIM_PATH(cuMemcpyDtoDAsync_v2_ptsz, copy(2016), c.dev2, c.dev, 2016, nullptr)
        GTSIM_PATH(cuMemcpy2D_v2, copy(60), std::data({desc2d(c.dev, c.pageable.data())}))
        GTSIM_PATH(cuMemcpy2D_v2_ptds, copy(60), std::data({desc2d(c.dev, c.pageable.data())}))
        GTSIM_PATH(cuMemcpy2DUnaligned_v2, copy(60), std::data({desc2d(c.dev, c.pageable.data())}))
        GTSIM_PATH(cuMemcpy2DUnaligned_v2_ptds, copy(60), std::data({desc2d(c.dev, c.pageable.data())}))
        GTSIM_PATH(cuMemcpy2DAsync_v2, copy(60), std::data({desc2d(c.dev, c.pinned)}), c.stream)
        GTSIM_PATH(cuMemcpy2DAsync_v2_ptsz, copy(60), std::data({desc2d(c.dev, c.pinned)}), nullptr)
        GTSIM_PATH(cuMemcpy3D_v2, copy(80), std::data({desc3d(c.dev2, c.dev)}))
        GTSIM_PATH(cuMemcpy3D_v2_ptds, copy(80), std::data({desc3d(c.dev2, c.dev)}))
        GTSIM_PATH(cuMemcpy3DAsync_v2, copy(80), std::data({desc3d(c.dev2, c.dev)}), c.stream)
        GTSIM_PATH(cuMemcpy3DAsync_v2_ptsz, copy(80), std::data({desc3d(c.dev2, c.dev)}), nullptr)
    };
}

std::vector<Path> driver_set_paths() {
    return {
        GTSIM_PATH(cuMemsetD8_v2, set(3001), c.dev, 1, 3001)
        GTSIM_PATH(cuMemsetD8_v2_ptds, set(3002), c.dev, 1, 3002)
        GTSIM_PATH(cuMemsetD16_v2, set(3004), c.dev, 1, 1502)
        GTSIM_PATH(cuMemsetD16_v2_ptds, set(3006), c.dev, 1, 1503)
        GTSIM_PATH(cuMemsetD32_v2, set(3008), c.dev, 1, 752)
        GTSIM_PATH(cuMemsetD32_v2_ptds, set(3012), c.dev, 1, 753)
        GTSIM_PATH(cuMemsetD8Async, set(3013), c.dev, 1, 3013, c.stream)
        GTSIM_PATH(cuMemsetD8Async_ptsz, set(3014), c.dev, 1, 3014, nullptr)
        GTSIM_PATH(cuMemsetD16Async, set(3016), c.dev, 1, 1508, c.stream)
        GTSIM_PATH(cuMemsetD16Async_ptsz, set(3018), c.dev, 1, 1509, nullptr)
        GTSIM_PATH(cuMemsetD32Async, set(3020), c.dev, 1, 755, c.stream)
        GTSIM_PATH(cuMemsetD32Async_ptsz, set(3024), c.dev, 1, 756, nullptr)
        GTSIM_PATH(cuMemsetD2D8_v2, set(7 * 3), c.dev, 64, 1, 7, 3)
        GTSIM_PATH(cuMemsetD2D8_v2_ptds, set(8 * 3), c.dev, 64, 1, 8, 3)
        GTSIM_PATH(cuMemsetD2D16_v2, set(2 * 9 * 3), c.dev, 64, 1, 9, 3)
        GTSIM_PATH(cuMemsetD2D16_v2_ptds, set(2 * 10 * 3), c.dev, 64, 1, 10, 3)
        GTSIM_PATH(cuMemsetD2D32_v2, set(4 * 11 * 3), c.dev, 64, 1, 11, 3)
        GTSIM_PATH(cuMemsetD2D32_v2_ptds, set(4 * 12 * 3), c.dev, 64, 1, 12, 3)
        GTSIM_PATH(cuMemsetD2D8Async, set(13 * 3), c.dev, 64, 1, 13, 3, c.stream)
        GTSIM_PATH(cuMemsetD2D8Async_ptsz, set(14 * 3), c.dev, 64, 1, 14, 3, nullptr)
        GTSIM_PATH(cuMemsetD2D16Async, set(2 * 15 * 3), c.dev, 64, 1, 15, 3, c.stream)
        GTSIM_PATH(cuMemsetD2D16Async_ptsz, set(2 * 16 * 3), c.dev, 64, 1, 16, 3, nullptr)
        GTSIM_PATH(cuMemsetD2D32Async, set(4 * 17 * 3), c.dev, 64, 1, 17, 3, c.stream)
        GTSIM_PATH(cuMemsetD2D32Async_ptsz, set(4 * 18 * 3), c.dev, 64, 1, 18, 3, nullptr)
    };
}

#undef GTSIM_PATH

} // namespace gtsim_workload
