// Exported driver API: fake modules and libraries, kernel handles, and kernel launches.
#include "call.h"
#include "functions.h"
#include "twins.h"

using namespace gtsim;

namespace {

struct Launch {
    CUfunction f;
    unsigned grid[3], block[3];
    unsigned shared;
    CUstream stream;
    bool per_thread;
    bool cooperative;
};

CUresult launch(uint32_t cbid, const char* name, const void* params, const Launch& l) {
    const Function* fn = launchable(l.f);
    DriverCall call(cbid, name, params, fn ? fn->name : nullptr);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (!fn) return call.finish(CUDA_ERROR_INVALID_HANDLE);
    uint64_t threads = uint64_t{l.block[0]} * l.block[1] * l.block[2];
    if (!l.grid[0] || !l.grid[1] || !l.grid[2] || !threads || threads > 1024 || l.block[2] > 64)
        return call.finish(CUDA_ERROR_INVALID_VALUE);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_KERNEL);
    op.async = 1;
    op.name = fn->name;
    op.cooperative = l.cooperative;
    for (int i = 0; i < 3; ++i) op.grid[i] = l.grid[i], op.block[i] = l.block[i];
    op.dynamic_shared = l.shared;
    return call.finish(call.enqueue(op, l.stream, l.per_thread));
}

CUresult launch_plain(uint32_t cbid, const char* name, const void* params, CUfunction f, unsigned gx, unsigned gy,
                      unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream stream,
                      bool per_thread, bool cooperative) {
    return launch(cbid, name, params, Launch{f, {gx, gy, gz}, {bx, by, bz}, shared, stream, per_thread, cooperative});
}

CUresult launch_ex(uint32_t cbid, const char* name, const CUlaunchConfig* c, CUfunction f, void** args, void** extra,
                   bool per_thread) {
    cuLaunchKernelEx_params p{c, f, args, extra};
    if (!c) {
        const Function* fn = launchable(f);
        DriverCall call(cbid, name, &p, fn ? fn->name : nullptr);
        return call.finish(CUDA_ERROR_INVALID_VALUE);
    }
    bool cooperative = false;
    for (unsigned i = 0; c->attrs && i < c->numAttrs; ++i)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative) cooperative = true;
    return launch(cbid, name, &p,
                  Launch{f, {c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                         c->sharedMemBytes, c->hStream, per_thread, cooperative});
}

} // namespace

GTSIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    cuModuleLoadData_params p{module, image};
    DriverCall call(GTSIM_DCBID(cuModuleLoadData), "cuModuleLoadData", &p);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    return call.finish(module_load(module, image));
}

GTSIM_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
    cuModuleGetFunction_params p{hfunc, hmod, name};
    DriverCall call(GTSIM_DCBID(cuModuleGetFunction), "cuModuleGetFunction", &p);
    return call.finish(module_get_function(hfunc, hmod, name));
}

GTSIM_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
    cuModuleUnload_params p{hmod};
    DriverCall call(GTSIM_DCBID(cuModuleUnload), "cuModuleUnload", &p);
    return call.finish(module_unload(hmod));
}

GTSIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                        void** jitOptionsValues, unsigned int numJitOptions,
                                        CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                        unsigned int numLibraryOptions) {
    cuLibraryLoadData_params p{library,        code,           jitOptions,          jitOptionsValues,
                               numJitOptions,  libraryOptions, libraryOptionValues, numLibraryOptions};
    DriverCall call(GTSIM_DCBID(cuLibraryLoadData), "cuLibraryLoadData", &p);
    return call.finish(library_load(library, code)); // context-independent, as in CUDA
}

GTSIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
    cuLibraryGetKernel_params p{pKernel, library, name};
    DriverCall call(GTSIM_DCBID(cuLibraryGetKernel), "cuLibraryGetKernel", &p);
    return call.finish(library_get_kernel(pKernel, library, name));
}

GTSIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
    cuLibraryUnload_params p{library};
    DriverCall call(GTSIM_DCBID(cuLibraryUnload), "cuLibraryUnload", &p);
    return call.finish(library_unload(library));
}

GTSIM_EXPORT CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
    cuKernelGetFunction_params p{pFunc, kernel};
    DriverCall call(GTSIM_DCBID(cuKernelGetFunction), "cuKernelGetFunction", &p);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    return call.finish(kernel_get_function(pFunc, kernel));
}

#define GTSIM_LAUNCH(fn, per_thread, cooperative)                                                                    \
    GTSIM_EXPORT CUresult fn(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,          \
                             unsigned bz, unsigned shared, CUstream stream, void** args, void** extra) {             \
        fn##_params p{f, gx, gy, gz, bx, by, bz, shared, stream, args, extra};                                       \
        return launch_plain(GTSIM_DCBID(fn), #fn, &p, f, gx, gy, gz, bx, by, bz, shared, stream, per_thread,        \
                            cooperative);                                                                            \
    }
GTSIM_LAUNCH(cuLaunchKernel, false, false)
GTSIM_LAUNCH(cuLaunchKernel_ptsz, true, false)
#undef GTSIM_LAUNCH

#define GTSIM_LAUNCH_COOP(fn, per_thread)                                                                            \
    GTSIM_EXPORT CUresult fn(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,          \
                             unsigned bz, unsigned shared, CUstream stream, void** args) {                           \
        fn##_params p{f, gx, gy, gz, bx, by, bz, shared, stream, args};                                              \
        return launch_plain(GTSIM_DCBID(fn), #fn, &p, f, gx, gy, gz, bx, by, bz, shared, stream, per_thread, true); \
    }
GTSIM_LAUNCH_COOP(cuLaunchCooperativeKernel, false)
GTSIM_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, true)
#undef GTSIM_LAUNCH_COOP

GTSIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** args, void** extra) {
    return launch_ex(GTSIM_DCBID(cuLaunchKernelEx), "cuLaunchKernelEx", config, f, args, extra, false);
}

GTSIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** args, void** extra) {
    return launch_ex(GTSIM_DCBID(cuLaunchKernelEx_ptsz), "cuLaunchKernelEx_ptsz", config, f, args, extra, true);
}
