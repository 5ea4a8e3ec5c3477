#include "decode/api_call.h"

#include <cstring>

namespace gtrace {
namespace {

uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

// cudaLaunchConfig_t and CUlaunchConfig both start with six 32-bit dimensions (grid then
// block) and then the dynamic shared memory size.
void dims_from_config(const unsigned long long* c, LaunchArgs& l) {
    l.grid = {lo(c[0]), hi(c[0]), lo(c[1])};
    l.block = {hi(c[1]), lo(c[2]), hi(c[2])};
}

} // namespace

ApiCall decode_api_call(const gt_api_event& e) {
    ApiCall c;
    c.api = static_cast<gt_cuda_api>(e.api);
    c.pid = e.pid;
    c.tid = e.tid;
    c.start_ns = e.enter_ns;
    c.end_ns = e.exit_ns;
    c.ret = e.ret;
    c.correlation = e.correlation;
    c.thread_name.assign(e.comm, strnlen(e.comm, sizeof e.comm));
    const auto* a = e.args;
    const auto* s = e.stack_args;
    switch (c.api) {
    case GT_API_CUDA_LAUNCH_KERNEL:
    case GT_API_CUDA_LAUNCH_KERNEL_PTSZ: {
        // (func, dim3 grid, dim3 block, args, sharedMem, stream): each 12-byte dim3 takes two registers.
        LaunchArgs l;
        l.function = a[0];
        l.grid = {lo(a[1]), hi(a[1]), lo(a[2])};
        l.block = {lo(a[3]), hi(a[3]), lo(a[4])};
        l.shared_mem = s[0];
        c.stream = s[1];
        c.launch = l;
        break;
    }
    case GT_API_CUDA_LAUNCH_KERNEL_EXC:
    case GT_API_CUDA_LAUNCH_KERNEL_EXC_PTSZ: {
        // (const cudaLaunchConfig_t*, func, args): {grid, block, size_t smem, stream, ...}
        LaunchArgs l;
        l.function = a[1];
        dims_from_config(e.config, l);
        l.shared_mem = e.config[3];
        c.stream = e.config[4];
        c.launch = l;
        break;
    }
    case GT_API_CU_LAUNCH_KERNEL:
    case GT_API_CU_LAUNCH_KERNEL_PTSZ: {
        // (f, gx, gy, gz, bx, by, | bz, sharedMemBytes, hStream, ...)
        LaunchArgs l;
        l.driver = true;
        l.function = a[0];
        l.grid = {lo(a[1]), lo(a[2]), lo(a[3])};
        l.block = {lo(a[4]), lo(a[5]), lo(s[0])};
        l.shared_mem = lo(s[1]);
        c.stream = s[2];
        c.launch = l;
        break;
    }
    case GT_API_CU_LAUNCH_KERNEL_EX:
    case GT_API_CU_LAUNCH_KERNEL_EX_PTSZ: {
        // (const CUlaunchConfig*, f, params, extra): {6 dims, unsigned smem, (pad), hStream, ...}
        LaunchArgs l;
        l.driver = true;
        l.function = a[1];
        dims_from_config(e.config, l);
        l.shared_mem = lo(e.config[3]);
        c.stream = e.config[4];
        c.launch = l;
        break;
    }
    case GT_API_CUDA_MEMCPY:
    case GT_API_CUDA_MEMCPY_PTDS:
        c.bytes = a[2];
        c.copy_kind = static_cast<int>(a[3]);
        break;
    case GT_API_CUDA_MEMCPY_ASYNC:
    case GT_API_CUDA_MEMCPY_ASYNC_PTSZ:
        c.bytes = a[2];
        c.copy_kind = static_cast<int>(a[3]);
        c.stream = a[4];
        break;
    case GT_API_CUDA_MEMSET:
    case GT_API_CUDA_MEMSET_PTDS:
        c.ptr = a[0];
        c.bytes = a[2];
        break;
    case GT_API_CUDA_MEMSET_ASYNC:
    case GT_API_CUDA_MEMSET_ASYNC_PTSZ:
        c.ptr = a[0];
        c.bytes = a[2];
        c.stream = a[3];
        break;
    case GT_API_CUDA_MALLOC:
        c.ptr = e.out_value;
        c.bytes = a[1];
        break;
    case GT_API_CUDA_FREE:
        c.ptr = a[0];
        break;
    case GT_API_CUDA_STREAM_SYNCHRONIZE:
    case GT_API_CUDA_STREAM_SYNCHRONIZE_PTSZ:
        c.stream = a[0];
        break;
    case GT_API_CUDA_EVENT_SYNCHRONIZE:
        c.event = a[0];
        break;
    case GT_API_CUDA_GRAPH_LAUNCH:
    case GT_API_CUDA_GRAPH_LAUNCH_PTSZ:
        c.graph = a[0];
        c.stream = a[1];
        break;
    case GT_API_CU_MODULE_GET_FUNCTION:
    case GT_API_CU_LIBRARY_GET_KERNEL:
    case GT_API_CU_KERNEL_GET_FUNCTION:
        c.handle = e.out_value;
        break;
    case GT_API_CUDA_DEVICE_SYNCHRONIZE:
    case GT_API_COUNT:
        break;
    }
    return c;
}

const char* copy_kind_name(int kind) {
    switch (kind) {
    case 0: return "HtoH";
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 3: return "DtoD";
    case 4: return "Default";
    default: return "unknown";
    }
}

} // namespace gtrace
