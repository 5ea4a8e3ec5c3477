// Time in collectives, per rank and per collective: c10d's calls and waits on the CPU (gtrace/
// comm.h), matched across the ranks of one trace so that each rank's wait for the last to arrive
// is measured, and NCCL's kernels on the GPU. One host's ranks share CLOCK_MONOTONIC: the same
// collective on two ranks overlaps in time (none finishes before the last arrives), and of the
// overlapping ones the one finishing nearest is the same call.
#pragma once
#include <string_view>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// NCCL's kernels ("ncclKernel_AllReduce_…", "ncclDevKernel_AllReduce_…") and gloo's: Communication.
bool is_communication_kernel(std::string_view name);

// Fills `collectives` and `collective_wait_ms_per_step` of every process of `trace` in `out`
// (its steps already found: the figures cover them).
void measure_collectives(const TraceData& trace, std::vector<ProcessAnalysis>& out);

} // namespace gtrace
