#include "analyze/step_analysis.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyze/closed_steps.h"
#include "analyze/collectives.h"
#include "analyze/memory_curve.h"
#include "discover/proc_tree.h"
#include "foundation/redact.h"

namespace gtrace {
namespace {

// The capture's start: its trace's first event. GPU memory counters are left out, since one may
// carry the state from before the capture (analyze/memory_curve.h puts that at the start).
uint64_t capture_start(const TraceData& trace) {
    uint64_t first = UINT64_MAX, first_memory = UINT64_MAX;
    auto earliest = [&first](const auto& spans) {
        for (const auto& s : spans) first = std::min(first, s.start_ns);
    };
    for (const auto& [pid, p] : trace.processes) {
        earliest(p.calls), earliest(p.gpu), earliest(p.main_samples), earliest(p.ranges), earliest(p.collectives), earliest(p.off_cpu);
        for (const auto& m : p.memory) first_memory = std::min(first_memory, m.ts_ns);
    }
    if (trace.first_span_ns) first = std::min(first, *trace.first_span_ns); // spans let go with closed steps
    if (first == UINT64_MAX) first = first_memory;
    return first == UINT64_MAX ? 0 : first;
}

// "rank 0"; a process without a rank by its pid and command line, "pid 1234 (python3 train.py)".
std::string process_name(const ProcessData& p, bool redact) {
    if (p.rank) return fmt::format("rank {}", *p.rank);
    std::string cmd = short_command(redact ? redact_text(p.cmdline) : p.cmdline, 60);
    return cmd.empty() ? fmt::format("pid {}", p.pid) : fmt::format("pid {} ({})", p.pid, cmd);
}

} // namespace

const char* category_name(Category c) {
    static const char* names[] = {"Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "Blocked", "CPU Exec", "Other"};
    return c < kCategoryCount ? names[c] : "?";
}

bool report_order(const ProcessAnalysis& a, const ProcessAnalysis& b) {
    if (a.rank && b.rank) return *a.rank < *b.rank;
    if (a.rank || b.rank) return a.rank.has_value();
    return a.pid < b.pid;
}

std::vector<ProcessAnalysis> analyze_processes(const TraceData& trace, const AnalysisOptions& options) {
    const StepRules rules(options.step_marker);
    const uint64_t origin = capture_start(trace);
    std::vector<ProcessAnalysis> out;
    for (const auto& [pid, p] : trace.processes) {
        if (p.forked || (!p.rank && p.calls.empty() && p.gpu.empty() && !(p.closed && p.closed->cuda_work))) continue;
        ProcessAnalysis r;
        r.pid = pid;
        r.rank = p.rank;
        r.origin_ns = origin;
        r.host_cpu_pressure = trace.cpu_pressure;
        r.label = options.redact ? redact_text(p.label) : p.label; // a trace written with --no-redact, or before
        r.name = process_name(p, options.redact);
        FoundSteps found = find_steps(p, rules);
        r.step_rule = found.rule;
        // Steps a capture closed on the way (analyze/closed_steps.h) first, with their sums.
        StepSums sums = p.closed ? p.closed->sums : StepSums{};
        LaunchCarry carry = p.closed ? p.closed->carry : LaunchCarry{};
        for (const Span& s : found.steps) r.steps.push_back({s, {}, 0, 0});
        add_steps(p, r.steps, {}, sums, carry);
        if (p.closed) r.steps.insert(r.steps.begin(), p.closed->steps.begin(), p.closed->steps.end());
        r.memory = memory_curve(p.memory, origin);
        figures_from_sums(sums, r);
        out.push_back(std::move(r));
    }
    gather_collectives(trace, out); // matched across ranks by the job (analyze_job): ranks may be in several files
    std::stable_sort(out.begin(), out.end(), report_order);
    return out;
}

} // namespace gtrace
