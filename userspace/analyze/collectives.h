// Time in collectives, per rank and per collective: c10d's calls and waits on the CPU (gtrace/
// comm.h), matched across the ranks of one trace so that each rank's wait for the last to arrive
// is measured, and NCCL's kernels on the GPU. One host's ranks share CLOCK_MONOTONIC: the same
// collective on two ranks overlaps in time (none finishes before the last arrives), and of the
// overlapping ones the one finishing nearest is the same call.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/nccl_traffic.h"
#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// NCCL's kernels ("ncclKernel_AllReduce_…", "ncclDevKernel_AllReduce_…") and gloo's: Communication.
bool is_communication_kernel(std::string_view name);

// Whether a call starts inside one of its thread's `spans` (by thread, sorted by start, not
// overlapping: NCCL's calls).
bool inside_one_of(const CallSpan& c, const std::map<uint32_t, std::vector<Span>>& spans);

// What the collectives of steps closed on the way (analyze/closed_steps.h) add to a report: each
// c10d call with its wait (matched across ranks at the end), NCCL kernels by collective, NCCL traffic.
struct KernelSums {
    uint64_t count = 0, ns = 0;
};
struct CollectiveSums {
    std::vector<CollectiveCall> instances;
    std::map<std::string, KernelSums> kernels; // "AllReduce (NCCL kernels)"
    NcclSums nccl;
    uint64_t bytes() const { return instances.capacity() * (sizeof(CollectiveCall) + 16) + kernels.size() * 96 + nccl.kinds.size() * 160 + nccl.comm_size.size() * 32; }
};

// Steps up to window.end_ns closing (from the first step's start): the collectives over by then
// become `sums` and their spans go — c10d's calls whose wait is over too (or that no wait came to
// by `give_up_before_ns`), NCCL's complete batches with the kernels they ran, NCCL kernels that
// no NCCL call left can be joined to.
void close_collectives(ProcessData& p, const Span& window, uint64_t give_up_before_ns, CollectiveSums& sums);

// While `trace` is loaded: each of its processes in `out` (steps already found) keeps its
// collective calls and its NCCL kernel figures (ProcessAnalysis::collective_calls, _kernels).
void gather_collectives(const TraceData& trace, std::vector<ProcessAnalysis>& out);
// Then, over processes of one trace or of every trace of a job (a Kineto trace is a file per
// rank): each rank's wait for the last to arrive at each call, and from them and the kernels,
// `collectives` and `collective_wait_ms_per_step`. Run again over more processes, it starts over.
void match_collectives(std::vector<ProcessAnalysis>& all);

} // namespace gtrace
