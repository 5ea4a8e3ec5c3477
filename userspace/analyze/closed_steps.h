// Steps found and closed while a capture runs: a live analysis past its memory budget
// (analyze/live_trace.h) adds the steps that are over to their sums (analyze/step_sums.h) and
// lets go of their spans, so that an hour of a busy job is reported whole in bounded memory. The
// report then adds the steps after them: the same figures as analysing every step of the trace at
// once (`gtrace report FILE`), as long as every span of a closed step had come in when it closed
// (the live analysis closes steps a second behind the newest events: docs/report.md says what
// can part them).
//
// How steps are found is here too, for both: where the main thread's step-marker ranges end;
// without two of them, at its most frequent synchronizing CUDA call site; steps outside the span
// of the process's GPU records left out (its kernels before attach and after the capture are not
// in the trace: their GPU time would look idle).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "analyze/collectives.h"
#include "analyze/step_sums.h"
#include "analyze/trace_data.h"

namespace gtrace {

// Erases the spans `pick` picks and gives their memory back: closing is there to bound it.
template <typename Spans, typename Pick>
void let_go_of(Spans& spans, Pick pick) {
    if (std::erase_if(spans, pick)) spans.shrink_to_fit();
}

// The same for spans marked by index (one flag per span).
template <typename Spans>
void let_go_of_marked(Spans& spans, const std::vector<bool>& marked) {
    size_t i = 0;
    let_go_of(spans, [&](const auto&) { return marked[i++]; });
}

struct StepRules {
    std::regex marker; // AnalysisOptions::step_marker
    std::string marker_text;
    explicit StepRules(const std::string& step_marker)
        : marker(step_marker, std::regex::ECMAScript | std::regex::optimize), marker_text(step_marker) {}
};

struct ClosedSteps {
    std::vector<StepBreakdown> steps;
    StepSums sums;
    LaunchCarry carry;
    CollectiveSums collectives;
    std::string rule;      // as found when the first steps closed: kept, so that steps go on alike
    std::string sync_site; // the rule's call site ("cudaStreamSynchronize at train.py:12"); empty: marker ranges
    uint64_t end_ns = 0;   // the last closed step's end: the next step starts there
    uint64_t first_gpu_ns = UINT64_MAX, last_gpu_end_ns = 0; // of the GPU records let go
    size_t left_out = 0;   // steps before the first GPU record
    bool cuda_work = false; // a CUDA call or GPU record was let go: the report covers the process
    uint64_t bytes() const { return steps.capacity() * sizeof(StepBreakdown) + sums.bytes() + carry.bytes() + collectives.bytes() + 256; }
};

struct FoundSteps {
    std::vector<Span> steps; // after p.closed's, when it has some
    std::string rule;        // how they were found, and how many were left out
    std::string base_rule, sync_site;
    size_t left_out_before = 0; // before the first GPU record
};

FoundSteps find_steps(const ProcessData& p, const StepRules& rules);

// Closes the steps of `p` that end by `until_ns`: adds them to p.closed and lets go of the spans
// over by then: the collectives over become sums (c10d's calls, matched across ranks at the end,
// each as one CollectiveCall; NCCL's batches and kernels as traffic: close_collectives); GPU
// memory points stay. `open_samples` gives the main thread's sampled frames not over yet (asked
// only when steps close). Returns how many steps closed.
// With none to close yet, it lets go of the spans over before the earliest a step can start.
using OpenSamples = std::function<std::vector<CallSpan>()>;
size_t close_steps(ProcessData& p, const StepRules& rules, uint64_t until_ns, const OpenSamples& open_samples);

// Before a process's first step closes: spans over before the earliest a step can start — the
// first end of a main-thread marker range or synchronizing call, whatever the rule turns out to
// be — are in none, and go (a process that makes no CUDA call, as torchrun's agent, keeps its
// samples this short).
void let_go_before_steps(ProcessData& p, const StepRules& rules, uint64_t until_ns);

// A process the report leaves out (a forked DataLoader worker): its spans over by `until_ns` go.
void let_go_unanalysed(ProcessData& p, uint64_t until_ns);

} // namespace gtrace
