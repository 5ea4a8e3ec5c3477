#include "analyze/job_report.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "analyze/collectives.h"
#include "analyze/memory_curve.h"
#include "analyze/summary_reader.h"
#include "analyze/trace_data.h"
#include "foundation/json_file.h"
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

// A node is named by its host; by its trace's file name where the hosts are unknown or repeat
// (two captures on one host), by the whole path where those repeat too.
void name_nodes(std::vector<JobNode>& nodes) {
    auto count = [&](auto field, const std::string& value) {
        return std::count_if(nodes.begin(), nodes.end(), [&](const JobNode& n) { return field(n) == value; });
    };
    auto host = [](const JobNode& n) { return n.host; };
    auto file = [](const JobNode& n) { return std::filesystem::path(n.trace).filename().string(); };
    for (auto& n : nodes) {
        if (!n.host.empty() && count(host, n.host) == 1) n.name = n.host;
        else if (!file(n).empty() && count(file, file(n)) == 1) n.name = file(n);
        else n.name = n.trace;
    }
}

// Puts every node's collectives on the first node's clock (the times the matching compares).
void align(JobReport& report, std::vector<NodeClock>& clocks) {
    for (auto& p : report.processes)
        if (p.rank) clocks[p.node].ranks.push_back(&p.collective_calls);
    auto alignment = align_nodes(clocks);
    for (size_t i = 0; i < report.nodes.size(); ++i) report.nodes[i].clock = alignment[i];
    for (auto& p : report.processes) shift_calls(p.collective_calls, alignment[p.node].offset_ns());
}

// How much of the nodes' steps every node recorded: the intersection of their spans over their union.
std::optional<double> steps_overlap(const std::vector<JobNode>& nodes) {
    if (nodes.size() < 2) return std::nullopt;
    uint64_t lo = 0, hi = UINT64_MAX, first = UINT64_MAX, last = 0;
    for (const auto& n : nodes) {
        if (!n.steps_span) return 0.0; // a node without steps shares none
        lo = std::max(lo, n.steps_span->start_ns), hi = std::min(hi, n.steps_span->end_ns);
        first = std::min(first, n.steps_span->start_ns), last = std::max(last, n.steps_span->end_ns);
    }
    if (last <= first) return std::nullopt;
    return hi > lo ? static_cast<double>(hi - lo) / static_cast<double>(last - first) : 0.0;
}

void summarize_nodes(JobReport& report) {
    for (const auto& p : report.processes) {
        if (!p.rank || p.node >= report.nodes.size()) continue;
        JobNode& n = report.nodes[p.node];
        n.ranks.push_back(*p.rank);
        n.step_ms = std::max(n.step_ms, p.step_ms);
        if (!p.steps.empty()) {
            const int64_t offset = n.clock.offset_ns();
            auto shifted = [offset](uint64_t t) { return static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(t) + offset)); };
            Span s{shifted(p.steps.front().span.start_ns), shifted(p.steps.back().span.end_ns)};
            n.steps_span = n.steps_span ? Span{std::min(n.steps_span->start_ns, s.start_ns), std::max(n.steps_span->end_ns, s.end_ns)} : s;
        }
        if (!p.verdict.empty() && ("/" + n.verdict + "/").find("/" + p.verdict + "/") == std::string::npos)
            n.verdict += (n.verdict.empty() ? "" : "/") + p.verdict;
    }
}

} // namespace

void say_contended_host(JobReport& report) {
    JobVerdict& v = report.verdict;
    if (!v.straggler) return;
    const JobNode* node = report.node_of_rank(v.straggler->rank);
    if (!node || !node->cpu_pressure || *node->cpu_pressure < kContendedCpuShare) return;
    v.host_cpu_pressure = node->cpu_pressure;
    v.evidence += fmt::format("; its host's CPUs were contended (a runnable task waited for a CPU {:.0f}% of the capture, "
                              "/proc/pressure/cpu): rank {} may lag for want of a CPU, not for its own work",
                              100 * *node->cpu_pressure, v.straggler->rank);
    v.remedy = "first give the job CPUs of its own (other processes on the host, fewer DataLoader workers than cores, "
               "taskset/cgroup limits), then capture again; " + v.remedy;
}

size_t JobReport::rank_count() const {
    return static_cast<size_t>(std::count_if(processes.begin(), processes.end(), [](const auto& p) { return p.rank.has_value(); }));
}

const JobNode* JobReport::node_of_rank(int rank) const {
    for (const auto& p : processes)
        if (p.rank == rank && p.node < nodes.size()) return &nodes[p.node];
    return nullptr;
}

namespace {

// One trace's processes into the report, as the node's; its host, clock and CPU pressure to the node's clock.
void add_trace(JobReport& report, NodeClock& clock, size_t node, const TraceData& t, const AnalysisOptions& options) {
    if (clock.host.empty()) clock.host = t.host;
    if (!clock.realtime_offset_ns) clock.realtime_offset_ns = t.realtime_offset_ns;
    if (t.cpu_pressure) clock.cpu_pressure = std::max(clock.cpu_pressure.value_or(0), *t.cpu_pressure);
    for (auto& p : analyze_processes(t, options)) {
        p.node = node;
        report.processes.push_back(std::move(p));
    }
}

void add_node(JobReport& report, std::vector<NodeClock>& clocks, NodeClock clock, const std::string& trace) {
    JobNode n;
    n.host = clock.host;
    n.cpu_pressure = clock.cpu_pressure;
    n.trace = trace;
    report.nodes.push_back(std::move(n));
    clocks.push_back(std::move(clock));
}

// Every node's processes are in: clocks aligned, collectives matched, every process and the job judged.
void judge(JobReport& report, std::vector<NodeClock>& clocks, const AnalysisOptions& options) {
    name_nodes(report.nodes);
    if (report.nodes.size() > 1) align(report, clocks);
    match_collectives(report.processes); // every rank of the job, whichever file it is in (Kineto: a file per rank)
    std::stable_sort(report.processes.begin(), report.processes.end(), report_order);
    for (auto& p : report.processes) judge_process(p, options.step_marker);
    report.verdict = judge_job(report.processes);
    say_contended_host(report);
    summarize_nodes(report);
    report.steps_overlap = steps_overlap(report.nodes);
}

// A node's times count from its capture's start: the first event of all its files (Kineto writes a
// file per rank), as the capture's own report counts them. Each file's processes were analysed
// from that file's first event; those that began later are put on the node's start, and their
// memory curves (kept, as points, until the node's last file was read) made again from it.
void count_from_node_start(std::vector<ProcessAnalysis>& processes, size_t first,
                           std::vector<std::pair<size_t, std::vector<MemoryPoint>>>& memory) {
    uint64_t origin = UINT64_MAX;
    for (size_t i = first; i < processes.size(); ++i)
        if (processes[i].origin_ns) origin = std::min(origin, processes[i].origin_ns); // 0: a file without events
    for (auto& [i, points] : memory) {
        ProcessAnalysis& p = processes[i];
        if (origin == UINT64_MAX || p.origin_ns == origin) continue;
        p.origin_ns = origin;
        p.memory = memory_curve(points, origin);
    }
}

} // namespace

Result<JobReport> analyze_job(const std::vector<std::string>& traces, const AnalysisOptions& options) {
    JobReport report;
    report.traces = traces;
    std::vector<NodeClock> clocks;
    for (size_t node = 0; node < traces.size(); ++node) {
        NodeClock clock;
        const size_t first = report.processes.size();
        std::vector<std::pair<size_t, std::vector<MemoryPoint>>> memory;
        const auto files = trace_files({traces[node]});
        for (const auto& path : files) {
            auto t = load_trace(path);
            if (!t) return t.error();
            if (t->partial_events && partial_in_use(path))
                report.notes.push_back(fmt::format("{} is the partial trace of a capture still running: read its {} whole events so far",
                                                   path, *t->partial_events));
            else if (t->partial_events)
                report.notes.push_back(fmt::format("{} is a partial trace (its capture was killed): read its {} whole events; "
                                                   "complete it with: gtrace recover {}", path, *t->partial_events, path));
            const size_t from = report.processes.size();
            add_trace(report, clock, node, *t, options);
            if (files.size() > 1)
                for (size_t i = from; i < report.processes.size(); ++i)
                    memory.emplace_back(i, std::move(t->processes[report.processes[i].pid].memory));
        }
        count_from_node_start(report.processes, first, memory);
        add_node(report, clocks, std::move(clock), traces[node]);
    }
    judge(report, clocks, options);
    return report;
}

JobReport analyze_capture(const TraceData& trace, const std::string& output, const AnalysisOptions& options) {
    JobReport report;
    report.traces = {output};
    if (trace.spans_from_ns)
        report.notes.push_back(fmt::format("this report covers the capture's last {:.3g} s: its analysis keeps at most {:.1f} MiB of spans "
                                           "in memory and let the older ones go; for all of it run: gtrace report {}",
                                           static_cast<double>(trace.spans_to_ns - *trace.spans_from_ns) / 1e9,
                                           static_cast<double>(trace.spans_max_bytes) / 1048576.0, output));
    else if (trace.late_spans)
        report.notes.push_back(fmt::format("{} span(s) came in after the step they start in had closed (analyze/closed_steps.h): this report "
                                           "misses them; gtrace report {} has them",
                                           trace.late_spans, output));
    std::vector<NodeClock> clocks;
    NodeClock clock;
    add_trace(report, clock, 0, trace, options);
    add_node(report, clocks, std::move(clock), output);
    judge(report, clocks, options);
    return report;
}

Result<JobReport> merge_summaries(const std::vector<std::string>& paths) {
    JobReport report;
    report.traces = paths, report.from_summaries = true;
    std::map<int, std::string> rank_from; // each rank once: the first summary that holds it
    for (size_t node = 0; node < paths.size(); ++node) {
        auto j = read_json_file(paths[node], 256u << 20, "a gtrace summary", kSummarySkippedKeys);
        if (!j) return j.error();
        auto summary = read_node_summary(*j, paths[node]);
        if (!summary) return summary.error();
        JobNode n;
        n.host = summary->host, n.trace = paths[node], n.cpu_pressure = summary->cpu_pressure;
        n.clock.method = "not aligned (summaries hold no collective times)";
        report.nodes.push_back(std::move(n));
        for (auto& p : summary->processes) {
            if (p.rank) {
                auto [it, first] = rank_from.emplace(*p.rank, paths[node]);
                if (!first) {
                    report.notes.push_back(fmt::format("rank {} is in {} and in {}: taken from the first", *p.rank, it->second, paths[node]));
                    continue;
                }
            }
            p.node = node;
            report.processes.push_back(std::move(p));
        }
    }
    name_nodes(report.nodes);
    std::stable_sort(report.processes.begin(), report.processes.end(), report_order);
    report.verdict = judge_job(report.processes, CollectiveMatching::WithinNodes);
    say_contended_host(report);
    summarize_nodes(report);
    return report;
}

} // namespace gtrace
