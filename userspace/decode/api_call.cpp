#include "decode/api_call.h"

#include <cstring>

#include "format/api_table.h"

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

namespace {

// cudaMemcpyKind values.
constexpr int kHtoD = 1, kDtoH = 2, kDtoD = 3, kDefault = 4;

bool is_async(gt_cuda_api api) { return api_name(api).find("Async") != std::string_view::npos; }

// Launch arguments by signature family.
void decode_launch(const gt_api_event& e, gt_api_decode family, ApiCall& c) {
    const auto* a = e.args;
    const auto* s = e.stack_args;
    LaunchArgs l;
    switch (family) {
    case GT_DEC_LAUNCH_RT:
        // (func, dim3 grid, dim3 block, args, sharedMem, stream): each 12-byte dim3 takes two registers.
        l.function = a[0];
        l.grid = {lo(a[1]), hi(a[1]), lo(a[2])};
        l.block = {lo(a[3]), hi(a[3]), lo(a[4])};
        l.shared_mem = s[0];
        c.stream = s[1];
        break;
    case GT_DEC_LAUNCH_RT_EXC:
        // (const cudaLaunchConfig_t*, func, args): {grid, block, size_t smem, stream, ...}
        l.function = a[1];
        dims_from_config(e.config, l);
        l.shared_mem = e.config[3];
        c.stream = e.config[4];
        break;
    case GT_DEC_LAUNCH_DRV:
        // (f, gx, gy, gz, bx, by, | bz, sharedMemBytes, hStream, ...)
        l.driver = true;
        l.function = a[0];
        l.grid = {lo(a[1]), lo(a[2]), lo(a[3])};
        l.block = {lo(a[4]), lo(a[5]), lo(s[0])};
        l.shared_mem = lo(s[1]);
        c.stream = s[2];
        break;
    case GT_DEC_LAUNCH_DRV_EX:
        // (const CUlaunchConfig*, f, params, extra): {6 dims, unsigned smem, (pad), hStream, ...}
        l.driver = true;
        l.function = a[1];
        dims_from_config(e.config, l);
        l.shared_mem = lo(e.config[3]);
        c.stream = e.config[4];
        break;
    default: // legacy launches: the function only (its grid was set by earlier calls)
        l.driver = true;
        l.function = a[0];
        if (c.api == GT_API_CU_LAUNCH_GRID_ASYNC) c.stream = a[3];
        break;
    }
    c.launch = l;
}

// Copies and sets: bytes, direction, stream where the signature has them in registers.
void decode_transfer(const gt_api_event& e, gt_api_decode family, ApiCall& c) {
    const auto* a = e.args;
    const auto* s = e.stack_args;
    bool async = is_async(c.api);
    auto set_elems = [&](uint64_t count, unsigned elem, int stream_arg) {
        c.ptr = a[0];
        c.bytes = count * elem;
        if (async) c.stream = a[stream_arg];
    };
    switch (family) {
    case GT_DEC_COPY_RT: // (dst, src, count, kind[, stream])
        c.bytes = a[2];
        c.copy_kind = static_cast<int>(a[3]);
        if (async) c.stream = a[4];
        break;
    case GT_DEC_COPY_RT_2D: // (dst, dpitch, src, spitch, width, height | kind[, stream])
        c.bytes = a[4] * a[5];
        c.copy_kind = static_cast<int>(s[0]);
        if (async) c.stream = s[1];
        break;
    case GT_DEC_COPY_PEER: // (dst, dstDev, src, srcDev, count[, stream])
        c.bytes = a[4];
        c.copy_kind = kDefault;
        if (async) c.stream = a[5];
        break;
    case GT_DEC_COPY_DRV:
    case GT_DEC_COPY_DRV_HTOD:
    case GT_DEC_COPY_DRV_DTOH:
    case GT_DEC_COPY_DRV_DTOD: // (dst, src, bytes[, stream])
        c.bytes = a[2];
        c.copy_kind = family == GT_DEC_COPY_DRV_HTOD ? kHtoD : family == GT_DEC_COPY_DRV_DTOH ? kDtoH
                    : family == GT_DEC_COPY_DRV_DTOD ? kDtoD : kDefault;
        if (async) c.stream = a[3];
        break;
    case GT_DEC_SET_RT: // (ptr, value, count[, stream])
        set_elems(a[2], 1, 3);
        break;
    case GT_DEC_SET_RT_2D: // (ptr, pitch, value, width, height[, stream])
        set_elems(a[3] * a[4], 1, 5);
        break;
    case GT_DEC_SET_DRV8: set_elems(a[2], 1, 3); break;
    case GT_DEC_SET_DRV16: set_elems(a[2], 2, 3); break;
    case GT_DEC_SET_DRV32: set_elems(a[2], 4, 3); break;
    case GT_DEC_SET_DRV_2D8: set_elems(a[3] * a[4], 1, 5); break; // (dst, pitch, value, width, height[, stream])
    case GT_DEC_SET_DRV_2D16: set_elems(a[3] * a[4], 2, 5); break;
    case GT_DEC_SET_DRV_2D32: set_elems(a[3] * a[4], 4, 5); break;
    default: break; // arrays, symbols, 3D, batches: the GPU record has the bytes
    }
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
    switch (gt_api_decode family = api_decode(c.api)) {
    case GT_DEC_LAUNCH_RT:
    case GT_DEC_LAUNCH_RT_EXC:
    case GT_DEC_LAUNCH_DRV:
    case GT_DEC_LAUNCH_DRV_EX:
    case GT_DEC_LAUNCH_DRV_LEGACY:
        decode_launch(e, family, c);
        break;
    case GT_DEC_GRAPH:
        c.graph = a[0];
        c.stream = a[1];
        break;
    case GT_DEC_MALLOC:
        c.ptr = e.out_value;
        c.bytes = a[1];
        break;
    case GT_DEC_FREE:
        c.ptr = a[0];
        break;
    case GT_DEC_SYNC_STREAM:
        c.stream = a[0];
        break;
    case GT_DEC_SYNC_EVENT:
        c.event = a[0];
        break;
    case GT_DEC_FUNC_LOOKUP:
        c.handle = e.out_value;
        break;
    case GT_DEC_NONE:
        break;
    default:
        decode_transfer(e, family, c);
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
