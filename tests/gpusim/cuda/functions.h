// Launchable kernels of the simulated driver: CUfunction and CUkernel handles, fake modules and
// libraries whose images name their kernels, and the runtime's host-function stubs.
#pragma once

#include <cuda.h>

namespace gtsim {

// The magic a fake module or library image starts with; kernel names follow, one per line,
// and a NUL ends the image.
inline constexpr const char kModuleMagic[] = "gtsim-module\n";

struct Function {
    const char* name; // interned for the life of the process
};

// The function a CUfunction or CUkernel handle launches, or nullptr if it is neither.
const Function* launchable(const void* handle);
// The runtime's handle for a kernel's host stub: named by dladdr() when the address is exactly a
// dynamic symbol (mangled, as CUPTI reports it), else kernel_0x<addr>. Interned.
const Function* host_function(const void* stub);
// The CUkernel CUDA 13's __cudaGetKernel hands out for a host stub (nvcc's <<<>>> launches pass
// it to cudaLaunchKernel instead of the stub): a handle of its own, launching host_function(stub).
const void* host_kernel(const void* stub);

CUresult module_load(CUmodule* out, const void* image);
CUresult module_get_function(CUfunction* out, CUmodule mod, const char* name);
CUresult module_unload(CUmodule mod);
CUresult library_load(CUlibrary* out, const void* image);
CUresult library_get_kernel(CUkernel* out, CUlibrary lib, const char* name);
CUresult library_unload(CUlibrary lib);
// A CUkernel and the CUfunction it gives are different handles of the same kernel, as in CUDA.
CUresult kernel_get_function(CUfunction* out, CUkernel kernel);

} // namespace gtsim
