#include "analyze/report_text.h"
#include "analyze/nccl_traffic.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundation/rank_ranges.h"

namespace gtrace {
namespace {

// Kernel names run to hundreds of characters (templates): the text keeps their start.
std::string shortened(const std::string& s, size_t max_chars) {
    if (s.size() <= max_chars) return s;
    size_t cut = max_chars - 1;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut; // not inside a UTF-8 character
    return s.substr(0, cut) + "…";
}

std::string rate(double gbps) { return gbps > 0 ? fmt::format("{:.1f} GB/s", gbps) : "none"; }

std::string heading(const JobReport& report) {
    size_t ranks = report.rank_count(), others = report.processes.size() - ranks;
    std::string what = ranks ? fmt::format("{} rank{}", ranks, ranks == 1 ? "" : "s") : "";
    if (others) what += fmt::format("{}{} process{} without a rank", ranks ? " and " : "", others, others == 1 ? "" : "es");
    if (report.from_summaries)
        return fmt::format("gtrace report: {} from {} node summar{} (no trace read); times from each capture's start\n\n", what,
                           report.traces.size(), report.traces.size() == 1 ? "y" : "ies");
    return fmt::format("gtrace report: {} from {} trace(s); times from the capture's start\n\n", what, report.traces.size());
}

// Which processes get a row and their details: every one, or — past kShownRanks ranks, merged
// from summaries — the straggler, the rank that waits for it most, the rank that waits least
// (JobVerdict::bounding_rank) and any process without a rank.
constexpr size_t kShownRanks = 16;

std::vector<bool> shown_rows(const JobReport& report) {
    std::vector<bool> shown(report.processes.size(), !report.from_summaries || report.processes.size() <= kShownRanks);
    if (shown.empty() || shown[0]) return shown;
    const JobVerdict& v = report.verdict;
    for (size_t i = 0; i < shown.size(); ++i) {
        const std::optional<int>& rank = report.processes[i].rank;
        // Processes without a rank are in no rank-verdict group: each keeps its row.
        shown[i] = !rank || rank == v.bounding_rank || (v.straggler && (*rank == v.straggler->rank || *rank == v.straggler->waiting_rank));
    }
    return shown;
}

// Many ranks: who got which verdict, as rank ranges ("data_loading: ranks 0-511, 513-1023").
std::string verdict_groups(const JobReport& report) {
    if (!report.from_summaries || report.processes.size() <= kShownRanks) return "";
    std::map<std::string, std::vector<int>> by_verdict;
    for (const auto& r : report.processes)
        if (r.rank) by_verdict[r.verdict.empty() ? "no steps" : r.verdict].push_back(*r.rank);
    std::string out = "rank verdicts:";
    for (const auto& [verdict, ranks] : by_verdict)
        out += fmt::format(" {}: {} {};", verdict, ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
    out.back() = '\n';
    return out + fmt::format("(rows and details below for the ranks the verdict names; every rank's in --json)\n\n");
}

std::string table(const JobReport& report, const std::vector<bool>& shown) {
    std::string out = fmt::format("{:>10} {:>6} {:>9}", "process", "steps", "step ms");
    for (int c = 0; c < kCategoryCount; ++c) out += fmt::format(" {:>13}", category_name(static_cast<Category>(c)));
    out += fmt::format(" {:>6}  verdict\n", "GPU%");
    for (size_t i = 0; i < report.processes.size(); ++i) {
        const ProcessAnalysis& r = report.processes[i];
        if (!shown[i]) continue;
        out += fmt::format("{:>10} {:>6} {:>9.2f}", r.rank ? fmt::format("rank {}", *r.rank) : fmt::format("pid {}", r.pid), r.step_count(),
                           r.step_ms);
        for (int c = 0; c < kCategoryCount; ++c) out += fmt::format(" {:>12.1f}%", r.share[static_cast<size_t>(c)] * 100);
        out += fmt::format(" {:>5.1f}%  {}\n", r.gpu_utilization * 100, r.verdict.empty() ? "-" : r.verdict);
    }
    return out;
}

// "+2.503 ms"
std::string signed_ms(int64_t ns) { return fmt::format("{:+.3f} ms", static_cast<double>(ns) / 1e6); }

// Several traces: one line per node (trace argument), and how its clock was aligned.
std::string nodes_table(const JobReport& report, const std::vector<bool>& shown) {
    if (report.nodes.size() < 2) return "";
    size_t width = 4;
    for (const auto& n : report.nodes) width = std::max(width, n.name.size());
    std::string out = report.from_summaries
                          ? fmt::format("{:>{}} {:>8} {:>9}  verdict (clocks not aligned: summaries hold no collective times)\n",
                                        "node", width, "ranks", "step ms")
                          : fmt::format("{:>{}} {:>8} {:>9}  {:<14} clock (times put on {}'s)\n", "node", width, "ranks", "step ms",
                                        "verdict", report.nodes[0].name);
    const bool few = !report.from_summaries || report.nodes.size() <= kShownRanks;
    std::vector<bool> node_shown(report.nodes.size(), few); // many nodes from summaries: those of the ranks with rows
    for (size_t i = 0; i < report.processes.size(); ++i)
        if (shown[i] && report.processes[i].node < node_shown.size()) node_shown[report.processes[i].node] = true;
    size_t left_out = 0;
    for (size_t i = 0; i < report.nodes.size(); ++i) {
        const JobNode& n = report.nodes[i];
        if (!node_shown[i]) {
            ++left_out;
            continue;
        }
        std::string row = fmt::format("{:>{}} {:>8} {:>9.2f}  {:<14} {}", n.name, width, rank_ranges(n.ranks), n.step_ms,
                                      n.verdict.empty() ? "-" : n.verdict, report.from_summaries ? "" : clock_alignment_text(n.clock));
        out += row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
    }
    if (left_out) out += fmt::format("({} other nodes: their rows in --json)\n", left_out);
    // NCCL's traffic per node: its ranks' bytes per step added, the bandwidth a rank's kernels had.
    for (size_t i = 0; i < report.nodes.size(); ++i) {
        if (!node_shown[i]) continue;
        std::vector<const ProcessAnalysis*> ranks;
        for (const auto& p : report.processes)
            if (p.rank && p.node == i) ranks.push_back(&p);
        std::string kinds;
        for (const NcclTraffic& t : combined_nccl_traffic(ranks))
            kinds += fmt::format("{}{} {:.3f} MB per step{}", kinds.empty() ? "" : "; ", t.name, t.bytes / 1e6,
                                 t.kernels ? fmt::format(", busbw {:.1f} GB/s", t.busbw_gbps) : "");
        if (!kinds.empty()) out += fmt::format("NCCL on {} (its ranks' bytes added; bandwidth per rank): {}\n", report.nodes[i].name, kinds);
    }
    if (report.steps_overlap) {
        uint64_t first = UINT64_MAX;
        for (const auto& n : report.nodes)
            if (n.steps_span) first = std::min(first, n.steps_span->start_ns);
        std::vector<std::string> spans;
        for (const auto& n : report.nodes)
            spans.push_back(n.steps_span ? fmt::format("{} {:.2f}-{:.2f} s", n.name, static_cast<double>(n.steps_span->start_ns - first) / 1e9,
                                                       static_cast<double>(n.steps_span->end_ns - first) / 1e9)
                                         : n.name + " none");
        out += fmt::format("steps every node recorded: {:.0f}% of their time ({}; from the first step seen)\n", *report.steps_overlap * 100,
                           fmt::join(spans, ", "));
    }
    return out + "\n";
}

std::string details(const ProcessAnalysis& r) {
    std::string out = fmt::format("{}: {}: {}{}\n", r.name, r.verdict.empty() ? "no verdict" : r.verdict, r.evidence,
                                  r.step_rule.empty() ? "" : " [" + r.step_rule + "]");
    if (r.step_count() > 0) {
        out += fmt::format("  launches: {:.1f} per step, median call {:.1f} µs, median interval to the thread's next launch {:.1f} µs; "
                           "kernels: median {:.1f} µs, {:.0f}% shorter than that interval; launch to kernel start: median {:.1f} µs\n",
                           r.launches_per_step, r.median_launch_us, r.median_launch_interval_us, r.median_kernel_us,
                           r.kernels_shorter_than_launch * 100, r.median_launch_delay_us);
        out += fmt::format("  copies: HtoD {}, DtoH {}\n", rate(r.h2d_gbps), rate(r.d2h_gbps));
        out += fmt::format("  main thread waits per step: in collectives {:.2f} ms, for the DataLoader {:.2f} ms, in CUDA syncs "
                           "{:.2f} ms, asleep elsewhere (Blocked) {:.2f} ms, not named {:.2f} ms\n",
                           r.waits.collective, r.waits.dataloader, r.waits.cuda_sync, r.waits.blocked, r.waits.other);
        for (const BlockedIn& b : r.blocked)
            if (b.ms_per_step >= 0.005)
                out += fmt::format("    blocked in {}: {:.2f} ms per step{}\n", b.kind, b.ms_per_step, b.where.empty() ? "" : ", under " + b.where);
        if (!r.top_kernels_ms.empty()) out += "  top kernels (GPU time over the steps):\n";
        for (const auto& [name, ms] : r.top_kernels_ms) out += fmt::format("    {:>10.2f} ms  {}\n", ms, shortened(name, 100));
    }
    double n = r.step_count() == 0 ? 1 : static_cast<double>(r.step_count());
    if (!r.collectives.empty())
        out += fmt::format("  collectives ({}; waits for the last rank to arrive: {:.2f} ms per step):\n",
                           r.step_count() == 0 ? "over the capture" : "per step", r.collective_wait_ms_per_step);
    for (const auto& f : r.collectives) {
        std::string waited;
        for (const auto& [rank, ms] : f.waited_for_ms) waited += fmt::format("{}rank {} {:.2f} ms", waited.empty() ? "" : ", ", rank, ms / n);
        out += fmt::format("    {:>10.2f} ms  {:>6.3g} {}  {}{}\n", f.ms / n, static_cast<double>(f.count) / n, f.gpu ? "kernels" : "calls  ",
                           f.name, waited.empty() ? "" : "  (waiting for " + waited + ")");
    }
    if (!r.nccl_traffic.empty())
        out += fmt::format("  NCCL calls ({}; sizes and bandwidths as nccl-tests counts them):\n", r.step_count() == 0 ? "over the capture" : "per step");
    for (const auto& t : r.nccl_traffic) {
        std::string bw = t.kernels ? fmt::format("algbw {:.1f} GB/s, busbw {:.1f} GB/s over {} kernels ({:.3f} ms per step)", t.algbw_gbps,
                                                 t.busbw_gbps, t.kernels, t.kernel_ms / n)
                                   : std::string("no kernel of theirs in the trace (GPU records off, or not joined)");
        out += fmt::format("    {:<14} {:>6.3g} calls  {:>10}  {}; n = {}{}\n", t.name, static_cast<double>(t.calls) / n,
                           fmt::format("{:.3f} MB", t.bytes / n / 1e6), bw, t.nranks ? std::to_string(t.nranks) : "not known",
                           !t.nranks ? " (communicator made before the capture, no rank: sizes per rank)" : t.nranks_assumed ? " (the world's: communicator made before the capture)" : "");
    }
    if (r.memory.peak_bytes)
        out += fmt::format("  GPU memory: peak {:.1f} MiB allocated, at {:.1f} ms{}\n", static_cast<double>(r.memory.peak_bytes) / (1 << 20),
                           r.memory.peak_ms,
                           r.memory.at_attach_bytes
                               ? fmt::format(" ({:.1f} MiB in use at attach)", static_cast<double>(*r.memory.at_attach_bytes) / (1 << 20))
                               : std::string());
    return out;
}

} // namespace

std::string clock_alignment_text(const NodeAlignment& a) {
    if (a.method == "reference" || a.method.starts_with("same host")) return a.method;
    std::string out = fmt::format("{} by its clock reading", signed_ms(a.clock_offset_ns));
    if (a.matched) {
        const std::string doubt = a.doubt();
        out += fmt::format(", {} from {} collectives' ends (±{:.0f} µs); residual skew {:.1f} µs{}", signed_ms(a.refined_ns), a.matched,
                           static_cast<double>(a.uncertainty_ns.value_or(0)) / 1e3, static_cast<double>(a.residual_ns.value_or(0)) / 1e3,
                           doubt.empty() ? "" : " — " + doubt);
    }
    else
        out += fmt::format(" ({})", a.method);
    return out;
}

std::string format_report(const JobReport& report) {
    const std::vector<bool> shown = shown_rows(report);
    std::string out = "\n" + heading(report) + verdict_groups(report) + table(report, shown) + "\n" + nodes_table(report, shown);
    for (size_t i = 0; i < report.processes.size(); ++i)
        if (shown[i]) out += details(report.processes[i]);
    const JobVerdict& v = report.verdict;
    if (v.straggler) {
        out += fmt::format("\nJOB VERDICT: straggler — {}\n", v.evidence);
        if (const JobNode* n = report.nodes.size() > 1 ? report.node_of_rank(v.straggler->rank) : nullptr)
            out += fmt::format("  straggler: node {} rank {}\n", n->name, v.straggler->rank);
    }
    else if (!v.verdict.empty())
        out += fmt::format("\nJOB VERDICT: {}{}\n", v.verdict, v.leading.empty() ? "" : " — no dominant cause; leading cause: " + v.leading);
    if (!v.straggler && report.processes.size() > 1 && !v.evidence.empty()) out += fmt::format("  {}\n", v.evidence);
    if (!v.remedy.empty()) out += fmt::format("  what helps: {}\n", v.remedy);
    return out;
}

} // namespace gtrace
