// What each rank's NCCL calls moved (the calls gtrace/comm.h probes, with their arguments), and at
// what bandwidth, joined to the NCCL kernels they enqueued.
//
// Joining: NCCL enqueues a call's kernel from inside the call, or for calls between
// ncclGroupStart and ncclGroupEnd, from inside the outermost ncclGroupEnd ("Group Calls", NCCL's
// user guide). A kernel's launch call (same correlation id) on the same thread inside such a call
// names the calls it ran; the kernel's GPU time goes to them.
//
// Sizes and bandwidths as nccl-tests defines them (doc/PERFORMANCE.md): algbw = size / time; busbw
// = algbw x 2(n-1)/n for AllReduce, (n-1)/n for AllGather and ReduceScatter (whose size is the
// whole buffer: count x n), 1 for Broadcast, Reduce and SendRecv (size: what the rank sent, or
// received when it only received). n is the communicator's size, from its ncclCommInitRank when
// the capture saw it, else the world's (said so: a subgroup's communicator would be smaller).
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// What a process's NCCL calls moved, by kind, as sums that parts of a capture add to (closed
// steps: analyze/closed_steps.h): byte counts are whole numbers (exact in a double), times integer ns.
struct NcclKindSums {
    uint64_t calls = 0, kernels = 0, kernel_ns = 0;
    double bytes = 0, unscaled_bytes = 0, joined_bytes = 0, unscaled_joined_bytes = 0;
    uint32_t nranks = 0;
};
struct NcclSums {
    std::map<std::string, NcclKindSums> kinds;
    std::unordered_map<uint64_t, uint32_t> comm_size; // communicators seen created: their size
};

// Adds the NCCL calls of `p` in `window` (those `included`, by index in p.collectives; null: all),
// by batch, and the NCCL kernels joined to them; `joined`: their kernels' correlation ids.
void add_nccl_traffic(const ProcessData& p, const Span& window, const std::vector<bool>* included, NcclSums& sums,
                      std::unordered_set<uint32_t>* joined);
// While `trace` is loaded: each process's NCCL calls in its steps, by kind, joined to its NCCL
// kernels (after those of steps closed: `closed`). Sizes on communicators not seen created stay
// per rank until nccl_bandwidths.
void gather_nccl_traffic(const ProcessData& p, const Span& window, const NcclSums* closed, ProcessAnalysis& out);
// Over the job: a communicator not seen created is taken as the world — the rank's WORLD_SIZE,
// else the job's ranks (a process without a rank: not known, no bus bandwidth); bandwidths.
void nccl_bandwidths(std::vector<ProcessAnalysis>& all);

// Several ranks' figures together (a node's): per kind, each rank's bytes and kernel time per step
// added, and the bandwidths over those sums (a rank's, on average); calls and kernels in all.
std::vector<NcclTraffic> combined_nccl_traffic(const std::vector<const ProcessAnalysis*>& ranks);

// nccl-tests' bus bandwidth factor for a kind ("AllReduce") on n ranks; 0 when it has none.
double nccl_bus_factor(const std::string& kind, uint32_t n);

} // namespace gtrace
