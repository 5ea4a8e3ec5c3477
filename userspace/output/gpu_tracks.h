// GPU work in the Chrome trace: one track per device and stream under the process that issued
// it, kernel/copy/set slices with their CUPTI facts, and a flow arrow from each CPU call to the
// GPU work it caused (Perfetto draws it; category "ac2g" as in PyTorch's profiler traces).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "decode/gpu_activity.h"
#include "model/gpu_join.h"
#include "output/chrome_trace.h"

namespace gtrace {

// Track ids far above any thread id (pid_max is at most 2^22).
constexpr uint32_t kGpuTrackBase = 1000000000u;
inline uint32_t gpu_track_tid(uint32_t device, uint32_t stream) { return kGpuTrackBase + device * 100000u + stream % 100000u; }

class GpuTracks {
public:
    explicit GpuTracks(ChromeTraceWriter& writer) : writer_(writer) {}
    void write_op(const GpuOp& op);
    void write_flow(const CallRef& call, const GpuOp& op);
    // Names of the GPU tracks, for the writer's thread metadata.
    const std::map<std::pair<uint32_t, uint32_t>, std::string>& track_names() const { return names_; }

private:
    ChromeTraceWriter& writer_;
    std::map<std::pair<uint32_t, uint32_t>, std::string> names_;
    uint64_t next_flow_ = 1;
    std::string buf_;
};

} // namespace gtrace
