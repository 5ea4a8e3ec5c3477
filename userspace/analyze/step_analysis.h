// Steps of each process that did CUDA work (the ranks of a torchrun job, or a plain `python
// train.py`) and where their time goes, in the priority order of PyTorch's profiler (Kernel,
// Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, Other), with Blocked before CPU
// Exec: the main thread asleep, off the CPU (sched_switch), and not in anything above — so CPU
// Exec is time on the CPU. Each instant of a step is credited to the highest-priority category
// active then, so the parts add up exactly to the step's wall time. The figures only;
// analyze/verdict.h judges them.
#pragma once
#include <array>
#include <map>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyze/trace_data.h"
#include "decode/torch_range.h"

namespace gtrace {

enum Category { kKernel, kMemcpy, kMemset, kCommunication, kRuntime, kDataLoader, kBlocked, kCpuExec, kOther, kCategoryCount };
const char* category_name(Category c);

struct StepBreakdown {
    Span span;
    std::array<uint64_t, kCategoryCount> ns{}; // sums to span.dur()
    uint64_t gpu_busy_ns = 0;                  // some kernel running
    uint64_t launches = 0;
};

// Allocated GPU memory over the capture: ms since the capture's start (never negative: the
// state at the start is the value at 0), bytes; thinned keeping each stretch's lowest and highest.
struct MemoryCurve {
    std::vector<std::pair<double, uint64_t>> points;
    uint64_t peak_bytes = 0;
    double peak_ms = 0; // when the peak was first reached
    std::optional<uint64_t> at_attach_bytes; // in use when the agent started (attach), all devices
};

// One collective (by name) on one process, over its steps: from c10d's calls and waits on the
// CPU (analyze/collectives.h), or NCCL's kernels on the GPU.
struct CollectiveFigures {
    std::string name;    // "all_reduce"; GPU kernels: "AllReduce (NCCL kernels)"
    uint64_t count = 0;
    double ms = 0;       // in its calls and waits (every thread), or its kernels' GPU time
    double wait_ms = 0;  // of that, waiting for the rank that arrived last
    std::map<int, double> waited_for_ms; // by that rank
    bool gpu = false;
};

// What one rank's NCCL calls of one kind moved over the steps (analyze/nccl_traffic.h): sizes as
// nccl-tests counts them, the GPU time of the kernels they enqueued, and the bandwidths.
struct NcclTraffic {
    std::string name;          // "AllReduce", "SendRecv", "Group(AllReduce+AllGather)"
    uint64_t calls = 0;
    double bytes = 0;          // the size moved, as nccl-tests counts it
    uint64_t kernels = 0;      // the NCCL kernels they enqueued that the trace has
    double kernel_ms = 0;      // those kernels' GPU time
    double joined_bytes = 0;   // the size of the calls those kernels ran: what the bandwidths divide
    uint32_t nranks = 0;       // the communicator's size; 0: not known
    bool nranks_assumed = false; // not seen created (before the capture): the job's ranks
    double algbw_gbps = 0, busbw_gbps = 0; // 0: no kernel joined (GPU records off, or none in the steps)
    // Before the job's pass: sizes of AllGather/ReduceScatter calls on a communicator not seen
    // created, per rank (they scale by the communicator's size once it is assumed).
    double unscaled_bytes = 0, unscaled_joined_bytes = 0;
};

// One collective call on one rank: from its call (arrival) to the end of the wait on its Work.
struct CollectiveCall {
    std::string name;
    uint64_t arrival = 0, done = 0, busy_ns = 0; // busy: in the call and the wait
    uint64_t wait_ns = 0;                        // for the last rank to arrive
    int waited_for = -1;
};

// Where the main thread waits, ms per step: what the probes name — a collective's call or wait,
// the DataLoader's queue (its ranges), a synchronizing CUDA call —, asleep elsewhere (Blocked:
// named by the stack it went to sleep with), and not named (Other: neither on the CPU in a
// sample, nor asleep as recorded, nor in anything probed).
struct MainThreadWaits {
    double collective = 0, dataloader = 0, cuda_sync = 0, blocked = 0, other = 0;
};

// Blocked time of one kind (decode/off_cpu.h: "a lock", "a queue", ...), ms per step, and the
// line it happens under most.
struct BlockedIn {
    std::string kind, where;
    double ms_per_step = 0;
};

struct ProcessAnalysis {
    uint32_t pid = 0;
    std::optional<int> rank; // none: a process without RANK (plain `python train.py`, a notebook, a server)
    std::string name;        // "rank 0", or "pid 1234 (python3 train.py)": how the report names it
    std::string label;       // the trace's label of the process
    size_t node = 0;         // of the job's nodes (JobReport::nodes): the trace argument it came from
    // The share of its capture in which some runnable task on its host waited for a CPU (the
    // trace's otherData.cpu_pressure; none: not known).
    std::optional<double> host_cpu_pressure;
    uint64_t origin_ns = 0;  // the capture's start (its trace's first event): every time below is relative to it
    std::string step_rule;   // how the steps were found
    std::vector<StepBreakdown> steps;
    // A rank read from a summary (gtrace report --summaries) keeps its figures and its step count,
    // not its steps: step_count() is what every figure "per step" divides by.
    size_t summarized_steps = 0;
    size_t step_count() const { return steps.empty() ? summarized_steps : steps.size(); }
    // Over all steps:
    std::array<double, kCategoryCount> share{}; // of step time
    double step_ms = 0, gpu_utilization = 0, kernel_ms_per_step = 0;
    double launches_per_step = 0, median_launch_us = 0, median_kernel_us = 0, kernels_shorter_than_launch = 0;
    double median_launch_delay_us = 0; // from a launch call's start to its kernel's start (by correlation id)
    double median_launch_interval_us = 0; // from a launch to the thread's next launch; kernels_shorter_than_launch compares with it
    double h2d_gbps = 0, d2h_gbps = 0;
    std::vector<std::pair<std::string, double>> top_kernels_ms; // name, total ms
    MemoryCurve memory;
    std::vector<CollectiveFigures> collectives; // largest time first
    double collective_wait_ms_per_step = 0;     // waiting for the last rank to arrive, all collectives
    std::vector<CollectiveCall> collective_calls;       // what those come from (analyze/collectives.h)
    std::vector<CollectiveFigures> collective_kernels;
    std::vector<NcclTraffic> nccl_traffic; // by kind, most bytes first
    std::optional<int> world_size;         // its WORLD_SIZE, when the trace says
    MainThreadWaits waits;
    std::vector<BlockedIn> blocked; // the Blocked category by kind, largest first
    // Filled by analyze/verdict.h:
    std::string verdict;  // data_loading, copy, launch_overhead, gpu, communication, mixed, straggler; empty: no steps
    std::string leading;  // with `mixed`: the verdict the figures lean to (the largest identified cause)
    std::string evidence; // the figures behind it
    std::vector<std::pair<Category, double>> causes; // the step's categories ranked by share (non-zero ones)
    double cause_share = 0; // the verdict's (or leading cause's) own categories, as a share of the whole step
};

struct AnalysisOptions {
    std::string step_marker = kDefaultStepMarker; // ECMAScript regex on torch range names
    bool redact = true; // secret values in process labels (command lines) shown as *** (foundation/redact.h)
};

// The processes of a trace that a report covers: every rank process, and every other process
// that made CUDA calls or has GPU records (forked copies — DataLoader workers — are left out).
// Steps end where the main thread's step-marker ranges end; without such ranges, at its most
// frequent synchronizing CUDA call site (see docs/report.md). Ranks first by rank, then by pid. Their
// collectives are gathered, not yet matched across ranks: match_collectives over the whole job.
std::vector<ProcessAnalysis> analyze_processes(const TraceData& trace, const AnalysisOptions& options = {});

// The report's order: ranks by rank, then the other processes by pid.
bool report_order(const ProcessAnalysis& a, const ProcessAnalysis& b);

} // namespace gtrace
