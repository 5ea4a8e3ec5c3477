#include "analyze/job_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyze/trace_data.h"
#include "foundation/output_file.h"

namespace gtrace {

size_t JobReport::rank_count() const {
    return static_cast<size_t>(std::count_if(processes.begin(), processes.end(), [](const auto& p) { return p.rank.has_value(); }));
}

Result<JobReport> analyze_job(const std::vector<std::string>& traces, const AnalysisOptions& options) {
    JobReport report;
    report.traces = traces;
    for (const auto& path : traces) {
        auto t = load_trace(path);
        if (!t) return t.error();
        if (t->partial_events && partial_in_use(path))
            report.notes.push_back(fmt::format("{} is the partial trace of a capture still running: read its {} whole events so far",
                                               path, *t->partial_events));
        else if (t->partial_events)
            report.notes.push_back(fmt::format("{} is a partial trace (its capture was killed): read its {} whole events; "
                                               "complete it with: gtrace recover {}", path, *t->partial_events, path));
        for (auto& p : analyze_processes(*t, options)) report.processes.push_back(std::move(p));
    }
    std::stable_sort(report.processes.begin(), report.processes.end(), report_order);
    for (auto& p : report.processes) judge_process(p, options.step_marker);
    report.verdict = judge_job(report.processes);
    return report;
}

} // namespace gtrace
