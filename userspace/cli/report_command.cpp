#include "foundation/printable.h"
#include "cli/report_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "analyze/job_report.h"
#include "foundation/output_file.h"
#include "analyze/html_report.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"

namespace gtrace {

Result<void> run_report(const std::vector<std::string>& traces, const ReportOptions& options) {
    auto report = options.summaries ? merge_summaries(traces) : analyze_job(traces, options.analysis);
    if (!report) return report.error();
    return present_report(*report, options);
}

Result<void> present_report(const JobReport& report, const ReportOptions& options) {
    for (const auto& note : report.notes) print_safe(stderr, "gtrace: {}\n", note);
    if (report.processes.empty() && options.summaries)
        return make_error(ExitCode::BadTrace, "no process in the summaries: each names the ranks of one node's capture");
    if (report.processes.empty() && options.processes_required)
        return make_error(ExitCode::BadTrace, "no process with CUDA work in the trace(s): trace a job that uses the GPU "
                                              "(gtrace attach --pid PID, or gtrace record -- COMMAND)");
    if (options.print && !report.processes.empty()) print_safe(stdout, "{}", format_report(report));
    if (options.json_path.empty() && options.html_path.empty()) return {};
    nlohmann::json summary = report_json(report);
    if (!options.capture.is_null()) summary["capture"] = options.capture;
    if (!options.json_path.empty())
        if (auto written = write_output(options.json_path, report_json_text(summary), options.force); !written) return written;
    if (!options.html_path.empty())
        if (auto written = write_html_report(summary, options.html_path, options.force); !written) return written;
    return {};
}

} // namespace gtrace
