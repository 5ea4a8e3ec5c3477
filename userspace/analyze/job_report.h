// A report's findings over one or more traces of a job (one per node or per capture): every
// process analysed (analyze/step_analysis.h) and judged (analyze/verdict.h). What output/
// renders as text, JSON and HTML.
#pragma once
#include <string>
#include <vector>

#include "analyze/step_analysis.h"
#include "analyze/verdict.h"
#include "foundation/result.h"

namespace gtrace {

struct JobReport {
    std::vector<std::string> traces;
    std::vector<ProcessAnalysis> processes; // ranks first by rank, then other processes by pid
    JobVerdict verdict;
    std::vector<std::string> notes; // for stderr: partial traces read
    size_t rank_count() const;
};

// Reads every trace (of a Kineto directory, each file in it and in other/) and analyses it.
// An unreadable trace is the error (exit 11).
Result<JobReport> analyze_job(const std::vector<std::string>& traces, const AnalysisOptions& options);

} // namespace gtrace
