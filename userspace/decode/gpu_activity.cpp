#include "decode/gpu_activity.h"

#include <cstring>

#include "foundation/elf_symbols.h"

namespace gtrace {
namespace {

// CUpti_ActivityMemcpyKind values (cupti_activity.h).
const char* memcpy_kind_name(uint8_t kind) {
    switch (kind) {
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 3: return "HtoA";
    case 4: return "AtoH";
    case 5: return "AtoA";
    case 6: return "AtoD";
    case 7: return "DtoA";
    case 8: return "DtoD";
    case 9: return "HtoH";
    case 10: return "PtoP";
    default: return "unknown";
    }
}

void fill_op(GpuOp& op, uint32_t pid, const gt_gpu_op& r, int64_t offset) {
    op.pid = pid;
    op.correlation = r.h.correlation;
    op.start_ns = gpu_to_monotonic(r.start, offset);
    op.end_ns = gpu_to_monotonic(r.end, offset);
    op.device = r.device;
    op.context = r.context;
    op.stream = r.stream;
}

} // namespace

double GpuOp::bandwidth_gbps() const {
    return end_ns > start_ns ? static_cast<double>(bytes) / static_cast<double>(end_ns - start_ns) : 0.0;
}

std::optional<GpuOp> decode_gpu_op(uint32_t pid, const gt_gpu_header& h, int64_t offset) {
    GpuOp op;
    switch (h.type) {
    case GT_GPU_KERNEL: {
        if (h.size < sizeof(gt_gpu_kernel)) return std::nullopt;
        const auto& k = reinterpret_cast<const gt_gpu_kernel&>(h);
        fill_op(op, pid, k.op, offset);
        op.kind = GpuOpKind::Kernel;
        size_t len = std::min<size_t>(k.name_len, h.size - sizeof(gt_gpu_kernel));
        op.name = demangle(std::string(k.name, len));
        std::memcpy(op.grid, k.grid, sizeof op.grid);
        std::memcpy(op.block, k.block, sizeof op.block);
        op.registers = k.registers;
        op.static_shared = k.static_shared;
        op.dynamic_shared = k.dynamic_shared;
        op.graph = k.graph != 0;
        return op;
    }
    case GT_GPU_MEMCPY:
    case GT_GPU_MEMSET: {
        if (h.size < sizeof(gt_gpu_copy)) return std::nullopt;
        const auto& c = reinterpret_cast<const gt_gpu_copy&>(h);
        fill_op(op, pid, c.op, offset);
        op.bytes = c.bytes;
        if (h.type == GT_GPU_MEMCPY) {
            op.kind = GpuOpKind::Memcpy;
            op.copy_kind = memcpy_kind_name(c.copy_kind);
            op.name = "Memcpy " + op.copy_kind;
        } else {
            op.kind = GpuOpKind::Memset;
            op.name = "Memset";
        }
        return op;
    }
    case GT_GPU_SYNC: {
        if (h.size < sizeof(gt_gpu_sync)) return std::nullopt;
        const auto& s = reinterpret_cast<const gt_gpu_sync&>(h);
        fill_op(op, pid, s.op, offset);
        op.kind = GpuOpKind::Sync;
        op.sync_type = s.sync_type;
        op.name = "Synchronize";
        return op;
    }
    default:
        return std::nullopt;
    }
}

std::optional<GpuApiRecord> decode_gpu_api(uint32_t pid, const gt_gpu_header& h, int64_t offset) {
    if (h.type != GT_GPU_API || h.size < sizeof(gt_gpu_api)) return std::nullopt;
    const auto& a = reinterpret_cast<const gt_gpu_api&>(h);
    return GpuApiRecord{pid, a.tid, h.correlation, gpu_to_monotonic(a.start, offset), gpu_to_monotonic(a.end, offset)};
}

} // namespace gtrace
