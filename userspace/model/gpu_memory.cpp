#include "model/gpu_memory.h"

#include <algorithm>

namespace gtrace {

void GpuMemory::change(uint32_t pid, int device, uint64_t ts_ns, int64_t delta) {
    uint64_t& total = allocated_[{pid, device}];
    // A free of memory allocated before attach would go below zero: what gtrace saw stays >= 0.
    total = delta < 0 ? total - std::min(total, static_cast<uint64_t>(-delta)) : total + static_cast<uint64_t>(delta);
    peak_ = std::max(peak_, total);
    sink_({pid, device, ts_ns, total});
}

void GpuMemory::on_call(const ApiCall& call) {
    if (from_cupti_.contains(call.pid) || call.ret != 0 || !call.bytes || *call.bytes == 0) return;
    if (call.api == GT_API_CUDA_MALLOC) change(call.pid, -1, call.end_ns, static_cast<int64_t>(*call.bytes));
    else if (call.api == GT_API_CUDA_FREE) change(call.pid, -1, call.end_ns, -static_cast<int64_t>(*call.bytes));
}

void GpuMemory::on_record(uint32_t pid, const gt_gpu_memory& r, uint64_t ts_ns) {
    if (from_cupti_.insert(pid).second) // CUPTI from now on; the API-based count would double it
        allocated_.erase({pid, -1});
    int64_t delta = static_cast<int64_t>(r.bytes);
    change(pid, static_cast<int>(r.device), ts_ns, r.freed ? -delta : delta);
}

void GpuMemory::forget_process(uint32_t pid) {
    from_cupti_.erase(pid);
    std::erase_if(allocated_, [pid](const auto& kv) { return kv.first.first == pid; });
}

} // namespace gtrace
