// An NVTX range from an agent's ring (GT_GPU_NVTX_RANGE), as a range of its thread: named by its
// message, with its domain, category and payload. The agent's process may be hostile: lengths
// are checked against the record's size, and a payload that is not a finite number is dropped.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gtrace/agent.h"

namespace gtrace {

// What an NVTX range carries besides its message.
struct NvtxRangeInfo {
    std::string domain;    // empty: the default domain
    uint32_t category = 0; // 0: none
    std::optional<double> payload;
    uint32_t end_tid = 0;  // start/end ranges may end on another thread
    bool push_pop = true;  // false: start/end
};

struct NvtxRange {
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0;
    std::string name; // the message; "(NVTX range)" when it had none
    std::shared_ptr<const NvtxRangeInfo> info;
};

std::optional<NvtxRange> decode_nvtx_range(uint32_t pid, const gt_gpu_header& h);

} // namespace gtrace
