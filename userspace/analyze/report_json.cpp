#include "analyze/report_json.h"
#include "analyze/nccl_traffic.h"

#include <optional>

#include <fmt/format.h>

namespace gtrace {
namespace {

// The step's categories ranked by share, with their ms per step when the step is one process's.
nlohmann::json causes_json(const std::vector<std::pair<Category, double>>& causes, std::optional<double> step_ms) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [c, s] : causes) {
        out.push_back({{"category", category_name(c)}, {"share", s}});
        if (step_ms) out.back()["ms"] = s * *step_ms;
    }
    return out;
}

double ms_since(uint64_t origin_ns, uint64_t ns) { return ns > origin_ns ? static_cast<double>(ns - origin_ns) / 1e6 : 0.0; }

nlohmann::json per_step(const ProcessAnalysis& r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r.steps) {
        nlohmann::json ms = nlohmann::json::object();
        for (int c = 0; c < kCategoryCount; ++c) ms[category_name(static_cast<Category>(c))] = static_cast<double>(s.ns[static_cast<size_t>(c)]) / 1e6;
        double wall = static_cast<double>(s.span.dur());
        steps.push_back({{"start_ms", ms_since(r.origin_ns, s.span.start_ns)}, {"wall_ms", wall / 1e6}, {"breakdown_ms", ms},
                         {"gpu_utilization", wall > 0 ? static_cast<double>(s.gpu_busy_ns) / wall : 0.0}});
    }
    return steps;
}

// Per collective: count, time and wait for the last rank to arrive, over the steps and per step.
// Bytes are not measured (reading tensor sizes would need libtorch's private struct layouts).
nlohmann::json collectives_json(const ProcessAnalysis& r) {
    double n = r.step_count() == 0 ? 1 : static_cast<double>(r.step_count());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : r.collectives) {
        nlohmann::json waited = nlohmann::json::object();
        for (const auto& [rank, ms] : f.waited_for_ms) waited[std::to_string(rank)] = ms;
        out.push_back({{"name", f.name}, {"on", f.gpu ? "gpu" : "cpu"}, {"count", f.count}, {"ms", f.ms}, {"ms_per_step", f.ms / n},
                       {"wait_ms", f.wait_ms}, {"wait_ms_per_step", f.wait_ms / n}, {"waited_for_ms", waited}});
    }
    return out;
}

// NCCL's calls by kind: sizes as nccl-tests counts them, per step over `steps`, and bandwidths.
nlohmann::json nccl_json(const std::vector<NcclTraffic>& kinds, double steps) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : kinds)
        out.push_back({{"kind", t.name}, {"calls", t.calls}, {"bytes_per_step", t.bytes / steps}, {"kernels", t.kernels},
                       {"kernel_ms_per_step", t.kernel_ms / steps}, {"algbw_GBps", t.algbw_gbps}, {"busbw_GBps", t.busbw_gbps},
                       {"nranks", t.nranks}, {"nranks_assumed", t.nranks_assumed}});
    return out;
}

nlohmann::json process_json(const ProcessAnalysis& r) {
    nlohmann::json breakdown = nlohmann::json::object(), share = nlohmann::json::object();
    for (int c = 0; c < kCategoryCount; ++c) {
        breakdown[category_name(static_cast<Category>(c))] = r.share[static_cast<size_t>(c)] * r.step_ms;
        share[category_name(static_cast<Category>(c))] = r.share[static_cast<size_t>(c)];
    }
    nlohmann::json memory = {{"peak_bytes", r.memory.peak_bytes}, {"peak_ms", r.memory.peak_ms}, {"points", nlohmann::json::array()}};
    for (const auto& [ms, bytes] : r.memory.points) memory["points"].push_back({ms, bytes});
    if (r.memory.at_attach_bytes) memory["at_attach_bytes"] = *r.memory.at_attach_bytes; // where points start
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [name, ms] : r.top_kernels_ms) top.push_back({{"name", name}, {"total_ms", ms}});
    nlohmann::json j = {{"rank", r.rank ? nlohmann::json(*r.rank) : nlohmann::json(nullptr)},
                        {"name", r.name},
                        {"pid", r.pid},
                        {"label", r.label},
                        {"clock_origin_ns", r.origin_ns},
                        {"step_rule", r.step_rule},
                        {"steps", r.step_count()},
                        {"step_ms", r.step_ms},
                        {"breakdown_ms", breakdown},
                        {"breakdown_share", share},
                        {"gpu_utilization", r.gpu_utilization},
                        {"kernel_ms_per_step", r.kernel_ms_per_step},
                        {"launches_per_step", r.launches_per_step},
                        {"median_launch_us", r.median_launch_us},
                        {"median_launch_delay_us", r.median_launch_delay_us},
                        {"median_launch_interval_us", r.median_launch_interval_us},
                        {"median_kernel_us", r.median_kernel_us},
                        {"kernels_shorter_than_launch", r.kernels_shorter_than_launch},
                        {"h2d_GBps", r.h2d_gbps},
                        {"d2h_GBps", r.d2h_gbps},
                        {"top_kernels", top},
                        {"verdict", r.verdict},
                        {"evidence", r.evidence},
                        {"cause_share", r.cause_share},
                        {"causes", causes_json(r.causes, r.step_ms)},
                        {"per_step", per_step(r)},
                        {"memory", memory},
                        {"collectives", collectives_json(r)},
                        {"nccl", nccl_json(r.nccl_traffic, r.step_count() == 0 ? 1 : static_cast<double>(r.step_count()))},
                        {"collective_wait_ms_per_step", r.collective_wait_ms_per_step},
                        {"main_thread_waits_ms_per_step",
                         {{"collective", r.waits.collective}, {"dataloader", r.waits.dataloader}, {"cuda_sync", r.waits.cuda_sync},
                          {"blocked", r.waits.blocked}, {"other", r.waits.other}}}};
    if (!r.leading.empty()) j["leading"] = r.leading;
    nlohmann::json blocked = nlohmann::json::array(); // the Blocked category by what the main thread slept in
    for (const BlockedIn& b : r.blocked) blocked.push_back({{"kind", b.kind}, {"where", b.where}, {"ms_per_step", b.ms_per_step}});
    j["blocked"] = blocked;
    return j;
}

nlohmann::json nodes_json(const JobReport& report) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : report.nodes) {
        const NodeAlignment& a = n.clock;
        nlohmann::json clock = {{"offset_ns", a.offset_ns()}, {"clock_offset_ns", a.clock_offset_ns}, {"refined_ns", a.refined_ns},
                                {"matched_collectives", a.matched}, {"method", a.method}};
        if (a.residual_ns) clock["residual_skew_us"] = static_cast<double>(*a.residual_ns) / 1e3;
        if (a.uncertainty_ns) clock["uncertainty_us"] = static_cast<double>(*a.uncertainty_ns) / 1e3;
        if (a.cpu_pressure) clock["cpu_pressure"] = *a.cpu_pressure;
        if (std::string doubt = a.doubt(); !doubt.empty()) clock["doubt"] = std::move(doubt);
        nlohmann::json node = {{"name", n.name}, {"host", n.host}, {"trace", n.trace}, {"ranks", n.ranks}, {"step_ms", n.step_ms},
                               {"verdict", n.verdict}, {"clock", clock}};
        if (n.cpu_pressure) node["cpu_pressure"] = *n.cpu_pressure;
        std::vector<const ProcessAnalysis*> ranks;
        for (const auto& p : report.processes)
            if (p.rank && &report.nodes[p.node] == &n) ranks.push_back(&p);
        node["nccl"] = nccl_json(combined_nccl_traffic(ranks), 1); // already per step, the node's ranks added
        if (n.steps_span) // on the first node's clock, as the collectives' times
            node["steps_span_ns"] = {n.steps_span->start_ns, n.steps_span->end_ns};
        out.push_back(std::move(node));
    }
    return out;
}

} // namespace

std::string verdict_key(const ProcessAnalysis& p) { return p.rank ? std::to_string(*p.rank) : fmt::format("pid {}", p.pid); }

std::string report_json_text(const nlohmann::json& summary) {
    return summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

nlohmann::json report_json(const JobReport& report) {
    nlohmann::json verdicts = nlohmann::json::object(), entries = nlohmann::json::array();
    for (const auto& p : report.processes) {
        verdicts[verdict_key(p)] = p.verdict;
        entries.push_back(process_json(p));
    }
    const JobVerdict& v = report.verdict;
    nlohmann::json verdict = {{"job", v.verdict}, {"ranks", verdicts}, {"remedy", v.remedy}, {"evidence", v.evidence},
                              {"causes", causes_json(v.causes, std::nullopt)}};
    if (!v.leading.empty()) verdict["leading"] = v.leading;
    if (v.host_cpu_pressure) verdict["host_cpu_pressure"] = *v.host_cpu_pressure;
    nlohmann::json out = {{"traces", report.traces}, {"verdict", verdict}, {"ranks", entries}};
    if (v.straggler) out["straggler_rank"] = v.straggler->rank;
    if (report.nodes.size() == 1) { // what a merge of summaries names the node by (analyze/summary_reader.h)
        if (!report.nodes[0].host.empty()) out["host"] = report.nodes[0].host;
        if (report.nodes[0].cpu_pressure) out["cpu_pressure"] = *report.nodes[0].cpu_pressure;
    }
    if (!report.notes.empty()) out["notes"] = report.notes;
    if (report.from_summaries) out["from_summaries"] = true;
    if (report.nodes.size() > 1) {
        out["nodes"] = nodes_json(report);
        if (report.steps_overlap) out["steps_overlap"] = *report.steps_overlap;
        if (const JobNode* n = v.straggler ? report.node_of_rank(v.straggler->rank) : nullptr) out["straggler_node"] = n->name;
    }
    if (v.straggler && !v.straggler->collective.empty())
        out["straggler"] = {{"rank", v.straggler->rank}, {"waiting_rank", v.straggler->waiting_rank},
                            {"collective", v.straggler->collective}, {"wait_ms_per_step", v.straggler->wait_ms}};
    return out;
}

} // namespace gtrace
