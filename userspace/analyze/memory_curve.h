// GPU memory over a capture, for the report: allocated bytes (all devices of a process) after
// each change, at times relative to the capture's start.
#pragma once
#include <cstdint>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// Changes before `origin_ns` (the state when the capture began: the caching allocator allocated
// before attach) become one point at 0 with the last of their values, so no time is negative.
// So do the points the agent marked at_attach (what it found in use when it started in a running
// process, read just after the capture began): the curve starts at them.
// More than kMaxMemoryBuckets changes are thinned to the lowest and the highest point of each
// run of consecutive changes, in time order: the envelope, and so the peak, survive thinning.
constexpr size_t kMaxMemoryBuckets = 2000;
MemoryCurve memory_curve(const std::vector<MemoryPoint>& memory, uint64_t origin_ns);

} // namespace gtrace
