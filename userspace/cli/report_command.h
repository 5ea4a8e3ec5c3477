// gtrace report TRACE... [--json FILE] [--html FILE]: reads the options' traces, has analyze/
// judge them (analyze/job_report.h) and output/ render the findings as text, JSON and HTML.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/job_report.h"
#include "analyze/step_analysis.h" // AnalysisOptions
#include "foundation/result.h"

namespace gtrace {

struct ReportOptions {
    std::string json_path, html_path; // also write the findings as JSON / as a self-contained HTML page
    bool force = false;               // replace an existing json_path / html_path
    bool processes_required = true;   // false: a trace without a process that did CUDA work prints nothing, is no error
    bool print = true;                // the terminal summary on stdout
    AnalysisOptions analysis;
    bool summaries = false;           // the files are nodes' summaries to merge (analyze/job_report.h merge_summaries)
    nlohmann::json capture;           // the facts of the capture that just wrote the trace (--summary-json)
};

Result<void> run_report(const std::vector<std::string>& traces, const ReportOptions& options);
// The findings printed and written as `options` asks (what run_report does once it has them).
Result<void> present_report(const JobReport& report, const ReportOptions& options);

} // namespace gtrace
