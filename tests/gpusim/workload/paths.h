// Every way a process issues GPU work on CUDA 13, as a table: the runtime's launches, copies and
// sets (each made through the driver function the runtime calls), the same through the driver API
// from the application, and the cuBLAS-like library's GEMMs. Each entry says which API calls it
// makes and which ops each call causes, so gpusim_selfcheck can check the correlation rules and
// test programs can count what they issued (libgtsim_workload.a, used by both).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtsim_blas.h"

namespace gtsim_workload {

// The host stub runtime launches use (exported: the simulator names kernels by dladdr) and its name.
void paths_kernel(float* data, int n);
inline constexpr const char kStubName[] = "_ZN14gtsim_workload12paths_kernelEPfi";
// The fake module driver launches come from, and its kernel.
inline constexpr const char kModule[] = "gtsim-module\ngtsim_workload_driver_kernel\n";
inline constexpr const char kDriverKernel[] = "gtsim_workload_driver_kernel";

// What the paths run on; make_context allocates it on the current device (0 or a CUresult).
struct Context {
    cudaStream_t stream = nullptr;
    CUdeviceptr dev = 0, dev2 = 0;
    void* pinned = nullptr; // page-locked host memory
    std::vector<char> pageable = std::vector<char>(1 << 16);
    CUmodule module = nullptr;
    CUfunction function = nullptr; // kDriverKernel
    gtblas_handle blas = nullptr;
};
int make_context(Context& c);
void free_context(Context& c);

// One GPU op a call causes: kernels by name and grid.x, copies and sets by size.
struct Op {
    const char* kind; // "kernel", "memcpy", "memset"
    uint64_t bytes;
    std::string name;
    uint32_t grid_x;
};

// One outermost API call: its CUPTI callback domain and exported name, the driver function the
// runtime calls inside it (runtime calls; nullptr: none), and the ops it causes.
struct Call {
    uint32_t domain; // CUpti_CallbackDomain: 1 driver, 2 runtime
    const char* function;
    const char* nested;
    std::vector<Op> ops;
    bool cooperative = false;
};

struct Path {
    const char* group; // "runtime", "driver" or "blas"
    std::vector<Call> calls;
    std::function<int(Context&)> run; // 0, or the cudaError_t / CUresult that failed
};

// Runtime launches, copies and sets; driver launches, every copy and set variant; blas GEMMs.
const std::vector<Path>& paths();

} // namespace gtsim_workload
