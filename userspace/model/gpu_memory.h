// GPU memory allocated over time, per process and device: from CUPTI's memory records when the
// process has an active agent (every allocation, with its device), else from the cudaMalloc and
// cudaFree calls BPF saw. Each change becomes a counter sample through the sink.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "decode/api_call.h"
#include "gtrace/agent.h"

namespace gtrace {

struct MemorySample {
    uint32_t pid = 0;
    int device = -1; // -1: from API calls, device not known
    uint64_t ts_ns = 0;
    uint64_t allocated_bytes = 0;
};

class GpuMemory {
public:
    using Sink = std::function<void(const MemorySample&)>;
    explicit GpuMemory(Sink sink) : sink_(std::move(sink)) {}

    // A traced cudaMalloc or cudaFree (after TraceModel gave the free its size).
    void on_call(const ApiCall& call);
    // A CUPTI memory record, its timestamp already on CLOCK_MONOTONIC.
    void on_record(uint32_t pid, const gt_gpu_memory& r, uint64_t ts_ns);
    void forget_process(uint32_t pid);
    uint64_t peak_bytes() const { return peak_; }

private:
    void change(uint32_t pid, int device, uint64_t ts_ns, int64_t delta);
    Sink sink_;
    std::map<std::pair<uint32_t, int>, uint64_t> allocated_;
    std::set<uint32_t> from_cupti_; // processes whose records are the source
    uint64_t peak_ = 0;
};

} // namespace gtrace
