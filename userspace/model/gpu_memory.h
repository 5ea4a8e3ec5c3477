// GPU memory allocated over time, per process and device: from CUPTI's memory records when the
// process has an active agent (every allocation, with its device), else from the cudaMalloc and
// cudaFree calls BPF saw. Each change becomes a counter sample through the sink.
//
// In a running process the agent first reports what is in use already (gt_gpu_memory_state):
// the allocated curve starts there — at the caching allocator's reserved bytes in a PyTorch
// process (what its cudaMallocs hold, which CUPTI's records then change), else at the device's
// used bytes (every context and process on the device: an upper bound of the process's own) —
// and the figures read are written once each as their own counters.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "decode/api_call.h"
#include "gtrace/agent.h"
#include "foundation/process_observer.h"

namespace gtrace {

enum class MemoryCounter : uint8_t {
    Allocated,      // "GPU memory (device N)": the process's allocations, as gtrace knows them
    DeviceUsed,     // the device's used bytes when the agent started (cuMemGetInfo)
    TorchReserved,  // the caching allocator's reserved bytes then
    TorchAllocated, // its allocated bytes (live tensors) then
};

struct MemorySample {
    uint32_t pid = 0;
    int device = -1; // -1: from API calls, device not known
    uint64_t ts_ns = 0;
    uint64_t allocated_bytes = 0; // the counter's value
    MemoryCounter counter = MemoryCounter::Allocated;
    bool at_attach = false; // the state the agent found: the curve's start, not a change
};

// The counter track's name in every trace format: "GPU memory (device N)" (unchanged from
// earlier traces), "GPU memory (cudaMalloc)", "GPU device used at attach (device N)", "torch
// reserved at attach (device N)", "torch allocated at attach (device N)".
std::string memory_counter_name(const MemorySample& m);

class GpuMemory final : public ProcessObserver {
public:
    using Sink = std::function<void(const MemorySample&)>;
    explicit GpuMemory(Sink sink) : sink_(std::move(sink)) {}

    // A traced cudaMalloc or cudaFree (after TraceModel gave the free its size).
    void on_call(const ApiCall& call);
    // A CUPTI memory record, its timestamp already on CLOCK_MONOTONIC.
    void on_record(uint32_t pid, const gt_gpu_memory& r, uint64_t ts_ns);
    // The agent's figures at attach (its ts already on CLOCK_MONOTONIC, as `ts_ns`).
    void on_state(uint32_t pid, const gt_gpu_memory_state& s, uint64_t ts_ns);
    void forget_process(uint32_t pid);
    void process_exited(uint32_t pid) override { forget_process(pid); }
    uint64_t peak_bytes() const { return peak_; }

private:
    void change(uint32_t pid, int device, uint64_t ts_ns, int64_t delta);
    void use_cupti(uint32_t pid);
    Sink sink_;
    std::map<std::pair<uint32_t, int>, uint64_t> allocated_;
    std::map<std::pair<uint32_t, int>, uint64_t> state_ts_; // records before it are in the state
    std::set<uint32_t> from_cupti_; // processes whose records are the source
    uint64_t peak_ = 0;
};

} // namespace gtrace
