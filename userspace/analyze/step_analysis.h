// Steps of each rank and where their time goes, in the priority order of PyTorch's profiler
// (Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, Other): each instant of
// a step is credited to the highest-priority category active then, so the parts add up exactly
// to the step's wall time.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analyze/trace_data.h"

namespace gtrace {

enum Category { kKernel, kMemcpy, kMemset, kCommunication, kRuntime, kDataLoader, kCpuExec, kOther, kCategoryCount };
const char* category_name(Category c);

struct StepBreakdown {
    Span span;
    std::array<uint64_t, kCategoryCount> ns{}; // sums to span.dur()
    uint64_t gpu_busy_ns = 0;                  // some kernel running
    uint64_t launches = 0;
};

struct RankAnalysis {
    uint32_t pid = 0;
    int rank = 0;
    std::string label;
    std::string step_rule; // how the steps were found
    std::vector<StepBreakdown> steps;
    // Over all steps:
    std::array<double, kCategoryCount> share{}; // of step time
    double step_ms = 0, gpu_utilization = 0, kernel_ms_per_step = 0;
    double launches_per_step = 0, median_launch_us = 0, median_kernel_us = 0, kernels_shorter_than_launch = 0;
    double median_launch_delay_us = 0; // from a launch call's start to its kernel's start (by correlation id)
    double median_launch_interval_us = 0; // from a launch to the thread's next launch; kernels_shorter_than_launch compares with it
    double h2d_gbps = 0, d2h_gbps = 0;
    std::vector<std::pair<std::string, double>> top_kernels_ms; // name, total ms
    std::vector<std::pair<double, uint64_t>> memory_ms_bytes; // GPU memory allocated: ms from the first step, bytes
    uint64_t memory_peak_bytes = 0;
    std::string verdict;  // data_loading, copy, launch_overhead, gpu, communication
    std::string evidence; // the figures behind it
};

struct AnalysisOptions {
    std::string step_marker = "^Optimizer\\.step"; // ECMAScript regex on torch range names
    bool redact = true; // secret values in process labels (command lines) shown as *** (foundation/redact.h)
};

// The rank processes of a trace (not their forked workers), analysed. Steps end where the main
// thread's step-marker ranges end; without such ranges, at its most frequent synchronizing CUDA
// call site (see README).
std::vector<RankAnalysis> analyze_ranks(const TraceData& trace, const AnalysisOptions& options = {});

} // namespace gtrace
