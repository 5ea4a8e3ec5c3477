#include "model/gpu_memory.h"

#include <algorithm>

#include <fmt/format.h>

namespace gtrace {

std::string memory_counter_name(const MemorySample& m) {
    if (m.device < 0) return "GPU memory (cudaMalloc)";
    switch (m.counter) {
    case MemoryCounter::DeviceUsed: return fmt::format("GPU device used at attach (device {})", m.device);
    case MemoryCounter::TorchReserved: return fmt::format("torch reserved at attach (device {})", m.device);
    case MemoryCounter::TorchAllocated: return fmt::format("torch allocated at attach (device {})", m.device);
    case MemoryCounter::Allocated: break;
    }
    return fmt::format("GPU memory (device {})", m.device);
}

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

// CUPTI from now on; the API-based count would double it.
void GpuMemory::use_cupti(uint32_t pid) {
    if (from_cupti_.insert(pid).second) allocated_.erase({pid, -1});
}

void GpuMemory::on_record(uint32_t pid, const gt_gpu_memory& r, uint64_t ts_ns) {
    use_cupti(pid);
    int device = static_cast<int>(r.device);
    if (auto it = state_ts_.find({pid, device}); it != state_ts_.end() && ts_ns < it->second) return; // in the state
    int64_t delta = static_cast<int64_t>(r.bytes);
    change(pid, device, ts_ns, r.freed ? -delta : delta);
}

void GpuMemory::on_state(uint32_t pid, const gt_gpu_memory_state& s, uint64_t ts_ns) {
    const int device = static_cast<int>(s.device);
    const bool torch = s.have & GT_MEMSTATE_TORCH;
    if (!torch && !(s.have & GT_MEMSTATE_DEVICE)) return;
    use_cupti(pid);
    state_ts_[{pid, device}] = ts_ns;
    uint64_t start = torch ? s.torch_reserved : s.device_used;
    allocated_[{pid, device}] = start; // records that came first are in it
    peak_ = std::max(peak_, start);
    sink_({pid, device, ts_ns, start, MemoryCounter::Allocated, true});
    if (s.have & GT_MEMSTATE_DEVICE) sink_({pid, device, ts_ns, s.device_used, MemoryCounter::DeviceUsed, true});
    if (torch) {
        sink_({pid, device, ts_ns, s.torch_reserved, MemoryCounter::TorchReserved, true});
        sink_({pid, device, ts_ns, s.torch_allocated, MemoryCounter::TorchAllocated, true});
    }
}

void GpuMemory::forget_process(uint32_t pid) {
    from_cupti_.erase(pid);
    std::erase_if(allocated_, [pid](const auto& kv) { return kv.first.first == pid; });
    std::erase_if(state_ts_, [pid](const auto& kv) { return kv.first.first == pid; });
}

} // namespace gtrace
