// Exported work-issuing API: kernel launches, copies, memsets, graph launches.
#include "api_common.h"

namespace gtsim {
namespace {

cudaError_t launch(uint32_t cbid, const char* fname, const void* params, const void* func, dim3 grid, dim3 block,
                   size_t shared, cudaStream_t stream, bool per_thread) {
    ApiCall call(cbid, fname, params, func);
    if (!func) return call.finish(cudaErrorInvalidDeviceFunction);
    uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.z > 64)
        return call.finish(cudaErrorInvalidConfiguration);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_KERNEL);
    op.async = 1;
    op.name = call.info.symbol_name;
    op.grid[0] = grid.x, op.grid[1] = grid.y, op.grid[2] = grid.z;
    op.block[0] = block.x, op.block[1] = block.y, op.block[2] = block.z;
    op.dynamic_shared = static_cast<uint32_t>(shared);
    return call.finish(call.enqueue(op, stream, per_thread));
}

cudaError_t launch_ex(uint32_t cbid, const char* fname, const cudaLaunchConfig_t* config, const void* func,
                      void** args, bool per_thread) {
    cudaLaunchKernelExC_v11060_params p{config, func, args};
    if (!config) {
        ApiCall call(cbid, fname, &p, func);
        return call.finish(cudaErrorInvalidValue);
    }
    return launch(cbid, fname, &p, func, config->gridDim, config->blockDim, config->dynamicSmemBytes,
                  config->stream, per_thread);
}

// Direction and the memory kinds of both ends; an explicit kind wins over what the pointers say.
bool copy_kinds(const void* dst, const void* src, cudaMemcpyKind kind, gtsim_gpu_op& op) {
    Model& m = Model::get();
    gtsim_mem_kind s = m.classify(src), d = m.classify(dst);
    auto host = [](gtsim_mem_kind k) { return k == GTSIM_MEM_DEVICE ? GTSIM_MEM_PAGEABLE : k; };
    switch (kind) {
    case cudaMemcpyHostToHost: op.copy_kind = GTSIM_COPY_HTOH, s = host(s), d = host(d); break;
    case cudaMemcpyHostToDevice: op.copy_kind = GTSIM_COPY_HTOD, s = host(s), d = GTSIM_MEM_DEVICE; break;
    case cudaMemcpyDeviceToHost: op.copy_kind = GTSIM_COPY_DTOH, s = GTSIM_MEM_DEVICE, d = host(d); break;
    case cudaMemcpyDeviceToDevice: op.copy_kind = GTSIM_COPY_DTOD, s = d = GTSIM_MEM_DEVICE; break;
    case cudaMemcpyDefault: {
        bool sd = s == GTSIM_MEM_DEVICE, dd = d == GTSIM_MEM_DEVICE;
        op.copy_kind = sd ? (dd ? GTSIM_COPY_DTOD : GTSIM_COPY_DTOH) : (dd ? GTSIM_COPY_HTOD : GTSIM_COPY_HTOH);
        break;
    }
    default: return false;
    }
    op.src_kind = s;
    op.dst_kind = d;
    return true;
}

cudaError_t copy(uint32_t cbid, const char* fname, const void* params, void* dst, const void* src, size_t count,
                 cudaMemcpyKind kind, cudaStream_t stream, bool per_thread, bool async) {
    ApiCall call(cbid, fname, params);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_MEMCPY);
    if (!copy_kinds(dst, src, kind, op)) return call.finish(cudaErrorInvalidMemcpyDirection);
    if (count == 0) return call.finish(cudaSuccess); // nothing reaches the device
    if (!dst || !src) return call.finish(cudaErrorInvalidValue);
    op.async = async;
    op.bytes = count;
    cudaError_t rc = call.enqueue(op, stream, per_thread);
    if (rc == cudaSuccess && !async) sleep_until_realtime(op.end_ns);
    return call.finish(rc);
}

cudaError_t fill(uint32_t cbid, const char* fname, const void* params, void* dst, int value, size_t count,
                 cudaStream_t stream, bool per_thread, bool async) {
    ApiCall call(cbid, fname, params);
    if (count == 0) return call.finish(cudaSuccess);
    if (!dst) return call.finish(cudaErrorInvalidValue);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_MEMSET);
    op.async = async;
    op.bytes = count;
    op.dst_kind = GTSIM_MEM_DEVICE;
    op.memset_value = value;
    cudaError_t rc = call.enqueue(op, stream, per_thread);
    if (rc == cudaSuccess && !async) sleep_until_realtime(op.end_ns);
    return call.finish(rc);
}

} // namespace
} // namespace gtsim

using namespace gtsim;

GTSIM_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                                          cudaStream_t stream) {
    cudaLaunchKernel_v7000_params p{func, grid, block, args, shared, stream};
    return launch(GTSIM_CBID(cudaLaunchKernel_v7000), "cudaLaunchKernel", &p, func, grid, block, shared, stream, false);
}

GTSIM_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                                               cudaStream_t stream) {
    cudaLaunchKernel_ptsz_v7000_params p{func, grid, block, args, shared, stream};
    return launch(GTSIM_CBID(cudaLaunchKernel_ptsz_v7000), "cudaLaunchKernel_ptsz", &p, func, grid, block, shared,
                  stream, true);
}

GTSIM_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
    return launch_ex(GTSIM_CBID(cudaLaunchKernelExC_v11060), "cudaLaunchKernelExC", config, func, args, false);
}

GTSIM_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void** args) {
    return launch_ex(GTSIM_CBID(cudaLaunchKernelExC_ptsz_v11060), "cudaLaunchKernelExC_ptsz", config, func, args,
                     true);
}

GTSIM_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    cudaMemcpy_v3020_params p{dst, src, count, kind};
    return copy(GTSIM_CBID(cudaMemcpy_v3020), "cudaMemcpy", &p, dst, src, count, kind, nullptr, false, false);
}

GTSIM_EXPORT cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    cudaMemcpy_ptds_v7000_params p{dst, src, count, kind};
    return copy(GTSIM_CBID(cudaMemcpy_ptds_v7000), "cudaMemcpy_ptds", &p, dst, src, count, kind, nullptr, true,
                false);
}

GTSIM_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                         cudaStream_t stream) {
    cudaMemcpyAsync_v3020_params p{dst, src, count, kind, stream};
    return copy(GTSIM_CBID(cudaMemcpyAsync_v3020), "cudaMemcpyAsync", &p, dst, src, count, kind, stream, false,
                true);
}

GTSIM_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                              cudaStream_t stream) {
    cudaMemcpyAsync_ptsz_v7000_params p{dst, src, count, kind, stream};
    return copy(GTSIM_CBID(cudaMemcpyAsync_ptsz_v7000), "cudaMemcpyAsync_ptsz", &p, dst, src, count, kind, stream,
                true, true);
}

GTSIM_EXPORT cudaError_t cudaMemset(void* dst, int value, size_t count) {
    cudaMemset_v3020_params p{dst, value, count};
    return fill(GTSIM_CBID(cudaMemset_v3020), "cudaMemset", &p, dst, value, count, nullptr, false, false);
}

GTSIM_EXPORT cudaError_t cudaMemset_ptds(void* dst, int value, size_t count) {
    cudaMemset_ptds_v7000_params p{dst, value, count};
    return fill(GTSIM_CBID(cudaMemset_ptds_v7000), "cudaMemset_ptds", &p, dst, value, count, nullptr, true, false);
}

GTSIM_EXPORT cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
    cudaMemsetAsync_v3020_params p{dst, value, count, stream};
    return fill(GTSIM_CBID(cudaMemsetAsync_v3020), "cudaMemsetAsync", &p, dst, value, count, stream, false, true);
}

GTSIM_EXPORT cudaError_t cudaMemsetAsync_ptsz(void* dst, int value, size_t count, cudaStream_t stream) {
    cudaMemsetAsync_ptsz_v7000_params p{dst, value, count, stream};
    return fill(GTSIM_CBID(cudaMemsetAsync_ptsz_v7000), "cudaMemsetAsync_ptsz", &p, dst, value, count, stream, true,
                true);
}

// Graphs are not modelled: the call is traced, then refused.
GTSIM_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    cudaGraphLaunch_v10000_params p{exec, stream};
    ApiCall call(GTSIM_CBID(cudaGraphLaunch_v10000), "cudaGraphLaunch", &p);
    return call.finish(cudaErrorNotSupported);
}

GTSIM_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
    cudaGraphLaunch_ptsz_v10000_params p{exec, stream};
    ApiCall call(GTSIM_CBID(cudaGraphLaunch_ptsz_v10000), "cudaGraphLaunch_ptsz", &p);
    return call.finish(cudaErrorNotSupported);
}
