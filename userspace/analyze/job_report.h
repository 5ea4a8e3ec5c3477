// A report's findings over one or more traces of a job (one per node or per capture): every
// process analysed (analyze/step_analysis.h) and judged (analyze/verdict.h). What output/
// renders as text, JSON and HTML.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "analyze/clock_alignment.h"
#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"
#include "analyze/verdict.h"
#include "foundation/result.h"

namespace gtrace {

// One trace argument (a file, or a Kineto directory): one node of the job, its host's clock.
struct JobNode {
    std::string name; // its host; its trace's file name when the traces do not say or hosts repeat
    std::string host;
    std::string trace;
    NodeAlignment clock; // how its times were put on the first node's (the report's times are)
    std::vector<int> ranks;
    double step_ms = 0;   // its slowest rank's
    std::string verdict;  // its ranks' verdict ("a/b" when they differ)
    // The time its ranks' steps cover, first step's start to last step's end, on the first
    // node's clock (CLOCK_MONOTONIC ns); none without steps.
    std::optional<Span> steps_span;
    std::optional<double> cpu_pressure; // the share of its capture a runnable task waited for a CPU (PSI)
};

struct JobReport {
    std::vector<std::string> traces;
    std::vector<JobNode> nodes;
    std::vector<ProcessAnalysis> processes; // ranks first by rank, then other processes by pid
    JobVerdict verdict;
    std::vector<std::string> notes; // for stderr: partial traces read
    // Several nodes: the share of the nodes' steps' time that every node recorded (the spans'
    // intersection over their union): 1 when --start-at and --steps gave each node one window.
    std::optional<double> steps_overlap;
    bool from_summaries = false; // merged from nodes' summaries (merge_summaries), not read from traces
    size_t rank_count() const;
    const JobNode* node_of_rank(int rank) const;
};

// Reads every trace (of a Kineto directory, each file in it and in other/) and analyses it; each
// argument is a node, aligned to the first (analyze/clock_alignment.h) before the collectives of
// all ranks are matched. An unreadable trace is the error (exit 11).
Result<JobReport> analyze_job(const std::vector<std::string>& traces, const AnalysisOptions& options);

// The report of one capture from its spans as the capture built them (analyze/live_trace.h), the
// trace it wrote named `output`: what analyze_job({output}) gives on reading that trace back.
JobReport analyze_capture(const TraceData& trace, const std::string& output, const AnalysisOptions& options);

// gtrace report --summaries: each file one node's summary (analyze/summary_reader.h), read as the
// invoking user (at most 256 MiB each); the ranks keep the verdicts their node gave them and the
// job is judged across all of them (verdict.h: CollectiveMatching::WithinNodes). No trace is
// read: clocks are not aligned, how well the nodes' steps overlap is not known. A rank in two
// summaries is taken from the first (a note says so).
Result<JobReport> merge_summaries(const std::vector<std::string>& paths);

// A straggler on a host whose CPUs were contended (JobNode::cpu_pressure >= kContendedCpuShare):
// ranks of a balanced job lag there for want of a CPU (beside two busy loops on 2 cores, one rank
// waited for the other every step). The verdict stays what was measured; the evidence and remedy
// say to look at the host first (JobVerdict::host_cpu_pressure). analyze_job calls it.
void say_contended_host(JobReport& report);

} // namespace gtrace
