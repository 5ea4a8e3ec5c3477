// What a process's steps add up to — the breakdown of each step and the figures over all of them
// (launches, kernels, copies, waits, Blocked time by kind) — kept as sums apart from the spans
// they come from, so that the steps can be added in parts: the live analysis adds the steps that
// are over and lets their spans go (analyze/closed_steps.h), the report adds the rest at the end.
// Sums are of integer nanoseconds and counts, medians of Quantiles: the figures are the same to
// the last bit however the steps were split (tests/unit/test_closed_steps.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"

namespace gtrace {

// Values whose median is asked. Exact up to kExact of them; past that they are counted in buckets
// 1% wide (relative), and the median is its bucket's middle value — within 1% — so that an hour
// of launches takes kilobytes. Either way the answer depends neither on the values' order nor on
// how they were split before being added.
class Quantiles {
public:
    static constexpr size_t kExact = size_t{1} << 16;
    void add(double v);
    size_t size() const { return n_; }
    double median() const;              // the value at rank size/2 (the upper middle); 0 when none
    size_t count_below(double x) const; // values below x (bucketed: by their bucket's value)
    uint64_t bytes() const { return exact_.capacity() * sizeof(double) + buckets_.size() * 48; }

private:
    void add_bucketed(double v) { ++buckets_[bucket_of(v)]; }
    static int bucket_of(double v);
    static double value_of(int bucket);
    std::vector<double> exact_;
    std::map<int, uint64_t> buckets_;
    uint64_t n_ = 0;
};

struct BlockedSum {
    uint64_t ns = 0;
    std::map<std::string, uint64_t> where; // by the line it went to sleep under
};

struct StepSums {
    Quantiles launch_us, interval_us, kernel_us, delay_us;
    uint64_t paired = 0, shorter = 0; // kernels whose launch has a next one on its thread; of those, shorter than that interval
    uint64_t kernel_ns = 0, h2d_bytes = 0, h2d_ns = 0, d2h_bytes = 0, d2h_ns = 0;
    uint64_t sync_ns = 0, collective_ns = 0; // the main thread's synchronizing CUDA calls, c10d calls
    std::map<std::string, uint64_t> kernel_ns_by_name;
    std::map<std::string, BlockedSum> blocked; // by kind (decode/off_cpu.h)
    bool loader_ranges = false; // the process has DataLoader ranges: sampled frames do not stand in for them
    uint64_t bytes() const;
};

// Launches whose figures need a later part: the interval from a thread's last launch to its next,
// and kernels that start after the part their launch was in.
struct LaunchCarry {
    struct Tail {
        uint64_t start_ns = 0;
        uint32_t correlation = 0;
        std::vector<double> kernel_us; // its kernels seen so far: shorter than its interval, once known?
    };
    struct Pending {
        uint64_t start_ns = 0;
        double interval_us = 0;
    };
    std::map<uint32_t, Tail> tails;                     // by thread
    std::unordered_map<uint32_t, Pending> pending;      // by correlation id: kernel not seen yet
    uint64_t bytes() const { return tails.size() * 96 + pending.size() * 48; }
};

// Adds `steps` (in time order, not overlapping; their breakdown is filled in) to `sums`: the spans
// of `p` that start within them counted, each instant credited to one category. `open_samples`:
// the main thread's frames not yet over (the live analysis's), as spans ending at UINT64_MAX.
void add_steps(const ProcessData& p, std::vector<StepBreakdown>& steps, const std::vector<CallSpan>& open_samples, StepSums& sums,
               LaunchCarry& carry);

// The figures of ProcessAnalysis over r.steps (all of them: those added in every part).
void figures_from_sums(const StepSums& sums, ProcessAnalysis& r);

bool is_sync_call(std::string_view name);
bool is_dataloader_range(std::string_view name); // "enumerate(DataLoader)#..."

} // namespace gtrace
