#include "analyze/job_report.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "analyze/collectives.h"
#include "analyze/trace_data.h"
#include "foundation/output_file.h"

namespace gtrace {
namespace {

// The files a report reads: a trace file as it is; a Kineto directory's files (and other/'s),
// each partial one only where its complete file is missing.
std::vector<std::string> trace_files(const std::vector<std::string>& traces) {
    std::vector<std::string> files;
    for (const auto& path : traces) {
        std::error_code ec;
        if (!std::filesystem::is_directory(std::filesystem::symlink_status(path, ec))) {
            files.push_back(path);
            continue;
        }
        std::vector<std::string> found;
        for (const std::string& dir : {path, path + "/other"})
            for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
                std::string f = e.path().string();
                bool partial = f.ends_with(".pt.trace.json.partial") && !std::filesystem::exists(f.substr(0, f.size() - 8), ec);
                if (e.is_regular_file(ec) && !e.is_symlink(ec) && (f.ends_with(".pt.trace.json") || partial)) found.push_back(f);
            }
        std::sort(found.begin(), found.end());
        if (found.empty()) found.push_back(path); // reading it says what is wrong
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

} // namespace

size_t JobReport::rank_count() const {
    return static_cast<size_t>(std::count_if(processes.begin(), processes.end(), [](const auto& p) { return p.rank.has_value(); }));
}

Result<JobReport> analyze_job(const std::vector<std::string>& traces, const AnalysisOptions& options) {
    JobReport report;
    report.traces = traces;
    const std::vector<std::string> files = trace_files(traces);
    for (const auto& path : files) {
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
    match_collectives(report.processes); // every rank of the job, whichever file it is in (Kineto: a file per rank)
    std::stable_sort(report.processes.begin(), report.processes.end(), report_order);
    for (auto& p : report.processes) judge_process(p, options.step_marker);
    report.verdict = judge_job(report.processes);
    return report;
}

} // namespace gtrace
