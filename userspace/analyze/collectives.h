// Time in collectives, per rank and per collective: c10d's calls and waits on the CPU (gtrace/
// comm.h), matched across the ranks of one trace so that each rank's wait for the last to arrive
// is measured, and NCCL's kernels on the GPU. One host's ranks share CLOCK_MONOTONIC: the same
// collective on two ranks overlaps in time (none finishes before the last arrives), and of the
// overlapping ones the one finishing nearest is the same call.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// NCCL's kernels ("ncclKernel_AllReduce_…", "ncclDevKernel_AllReduce_…") and gloo's: Communication.
bool is_communication_kernel(std::string_view name);

// While `trace` is loaded: each of its processes in `out` (steps already found) keeps its
// collective calls and its NCCL kernel figures (ProcessAnalysis::collective_calls, _kernels).
void gather_collectives(const TraceData& trace, std::vector<ProcessAnalysis>& out);
// Then, over processes of one trace or of every trace of a job (a Kineto trace is a file per
// rank): each rank's wait for the last to arrive at each call, and from them and the kernels,
// `collectives` and `collective_wait_ms_per_step`. Run again over more processes, it starts over.
void match_collectives(std::vector<ProcessAnalysis>& all);

} // namespace gtrace
