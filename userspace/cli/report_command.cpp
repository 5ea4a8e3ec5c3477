#include "cli/report_command.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/step_analysis.h"
#include "analyze/trace_data.h"
#include "foundation/output_file.h"
#include "output/html_report.h"

namespace gtrace {
namespace {

const char* remedy(const std::string& verdict) {
    if (verdict == "data_loading")
        return "more DataLoader workers (num_workers), persistent_workers, pin_memory, lighter per-item work or "
               "pre-processed data";
    if (verdict == "copy")
        return "pinned host memory (pin_memory=True) with non_blocking copies, fewer .item()/.cpu() syncs in the loop, "
               "keep tensors on the GPU, overlap copies with compute on a side stream";
    if (verdict == "launch_overhead")
        return "fewer, larger kernels: CUDA graphs or torch.compile, fused optimizers (foreach/fused=True), bigger "
               "batches, no per-step .item()";
    if (verdict == "gpu") return "the GPU is the limit: look at the top kernels (mixed precision, better algorithms)";
    if (verdict == "communication") return "overlap communication with compute (bucket sizes), fewer syncs";
    if (verdict == "straggler")
        return "find why that rank is slower (its data, its GPU, its host); the other ranks wait for it in every collective";
    return "";
}

struct Straggler {
    int rank = 0;
    double kernel_ms = 0, others_ms = 0; // kernel time per step: its, and the other ranks' median
};

// One rank slower than the rest: its GPU time per step well above the others'.
std::optional<Straggler> straggler(const std::vector<RankAnalysis>& ranks) {
    if (ranks.size() < 2) return std::nullopt;
    auto slowest = std::max_element(ranks.begin(), ranks.end(),
                                    [](const auto& a, const auto& b) { return a.kernel_ms_per_step < b.kernel_ms_per_step; });
    std::vector<double> others;
    for (const auto& r : ranks)
        if (&r != &*slowest) others.push_back(r.kernel_ms_per_step);
    std::sort(others.begin(), others.end());
    double typical = others[others.size() / 2];
    if (slowest->kernel_ms_per_step > 1.5 * typical && slowest->kernel_ms_per_step - typical > 0.1 * slowest->step_ms)
        return Straggler{slowest->rank, slowest->kernel_ms_per_step, typical};
    return std::nullopt;
}

nlohmann::json rank_json(const RankAnalysis& r) {
    nlohmann::json breakdown = nlohmann::json::object(), share = nlohmann::json::object();
    for (int c = 0; c < kCategoryCount; ++c) {
        breakdown[category_name(static_cast<Category>(c))] = r.share[static_cast<size_t>(c)] * r.step_ms;
        share[category_name(static_cast<Category>(c))] = r.share[static_cast<size_t>(c)];
    }
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r.steps) {
        nlohmann::json ms = nlohmann::json::object();
        for (int c = 0; c < kCategoryCount; ++c) ms[category_name(static_cast<Category>(c))] = static_cast<double>(s.ns[static_cast<size_t>(c)]) / 1e6;
        double wall = static_cast<double>(s.span.dur());
        steps.push_back({{"start_ns", s.span.start_ns}, {"wall_ms", wall / 1e6}, {"breakdown_ms", ms},
                         {"gpu_utilization", wall > 0 ? static_cast<double>(s.gpu_busy_ns) / wall : 0.0}});
    }
    nlohmann::json memory = {{"peak_bytes", r.memory_peak_bytes}, {"points", nlohmann::json::array()}};
    for (const auto& [ms, bytes] : r.memory_ms_bytes) memory["points"].push_back({ms, bytes});
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [name, ms] : r.top_kernels_ms) top.push_back({{"name", name}, {"total_ms", ms}});
    return {{"rank", r.rank},          {"pid", r.pid},
            {"label", r.label},        {"step_rule", r.step_rule},
            {"steps", r.steps.size()}, {"step_ms", r.step_ms},
            {"breakdown_ms", breakdown}, {"breakdown_share", share},
            {"gpu_utilization", r.gpu_utilization},
            {"kernel_ms_per_step", r.kernel_ms_per_step},
            {"launches_per_step", r.launches_per_step},
            {"median_launch_us", r.median_launch_us},
            {"median_launch_delay_us", r.median_launch_delay_us},
            {"median_launch_interval_us", r.median_launch_interval_us},
            {"median_kernel_us", r.median_kernel_us},
            {"kernels_shorter_than_launch", r.kernels_shorter_than_launch},
            {"h2d_GBps", r.h2d_gbps},  {"d2h_GBps", r.d2h_gbps},
            {"top_kernels", top},      {"verdict", r.verdict},
            {"evidence", r.evidence},  {"per_step", steps},
            {"memory", memory}};
}

struct JobVerdict {
    std::string job;
    std::optional<Straggler> slow;
};

// The job's verdict: the straggler if there is one, else the ranks' most common verdict.
JobVerdict job_verdict(const std::vector<RankAnalysis>& ranks) {
    std::map<std::string, int> votes;
    for (const auto& r : ranks)
        if (!r.verdict.empty()) ++votes[r.verdict];
    JobVerdict v{{}, straggler(ranks)};
    if (v.slow) v.job = "straggler";
    else if (!votes.empty())
        v.job = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    return v;
}

// With a straggler, every other rank is bound by it: each collective waits for that rank.
void blame_straggler(std::vector<RankAnalysis>& ranks, const Straggler& slow) {
    for (auto& r : ranks)
        if (r.rank != slow.rank && !r.steps.empty()) {
            r.evidence = fmt::format("waits for rank {} in every collective (it runs {:.2f} ms of kernels per step, this rank "
                                     "{:.2f} ms); own figures: {}",
                                     slow.rank, slow.kernel_ms, r.kernel_ms_per_step, r.evidence);
            r.verdict = "straggler";
        }
}

void print_report(const std::vector<std::string>& traces, const std::vector<RankAnalysis>& ranks, const JobVerdict& v) {
    fmt::print("\ngtrace report: {} ranks from {} trace(s)\n\n", ranks.size(), traces.size());
    fmt::print("{:>5} {:>6} {:>9}", "rank", "steps", "step ms");
    for (int c = 0; c < kCategoryCount; ++c) fmt::print(" {:>13}", category_name(static_cast<Category>(c)));
    fmt::print(" {:>6}  verdict\n", "GPU%");
    for (const auto& r : ranks) {
        fmt::print("{:>5} {:>6} {:>9.2f}", r.rank, r.steps.size(), r.step_ms);
        for (int c = 0; c < kCategoryCount; ++c) fmt::print(" {:>12.1f}%", r.share[static_cast<size_t>(c)] * 100);
        fmt::print(" {:>5.1f}%  {}\n", r.gpu_utilization * 100, r.verdict.empty() ? "-" : r.verdict);
    }
    fmt::print("\n");
    for (const auto& r : ranks) {
        fmt::print("rank {}: {}: {}{}\n", r.rank, r.verdict.empty() ? "no verdict" : r.verdict, r.evidence,
                   r.step_rule.empty() ? "" : " [" + r.step_rule + "]");
        if (r.memory_peak_bytes)
            fmt::print("  GPU memory: peak {:.1f} MiB allocated\n", static_cast<double>(r.memory_peak_bytes) / (1 << 20));
    }
    if (v.slow)
        fmt::print("\nJOB VERDICT: straggler — rank {} runs {:.2f} ms of kernels per step, the others about {:.2f} ms\n",
                   v.slow->rank, v.slow->kernel_ms, v.slow->others_ms);
    else if (!v.job.empty())
        fmt::print("\nJOB VERDICT: {}\n", v.job);
    if (!v.job.empty()) fmt::print("  what helps: {}\n", remedy(v.job));
}

// The summary JSON (--json, --summary-json) and the HTML page drawn from it.
Result<void> write_outputs(const std::vector<std::string>& traces, const std::vector<RankAnalysis>& ranks,
                           const JobVerdict& v, const ReportOptions& options) {
    if (options.json_path.empty() && options.html_path.empty()) return {};
    nlohmann::json verdict_ranks = nlohmann::json::object(), per_rank = nlohmann::json::array();
    for (const auto& r : ranks) {
        verdict_ranks[std::to_string(r.rank)] = r.verdict;
        per_rank.push_back(rank_json(r));
    }
    nlohmann::json out = {{"traces", traces},
                          {"verdict", {{"job", v.job}, {"ranks", verdict_ranks}, {"remedy", remedy(v.job)}}},
                          {"ranks", per_rank}};
    if (v.slow) out["straggler_rank"] = v.slow->rank;
    if (!options.capture.is_null()) out["capture"] = options.capture;
    if (!options.json_path.empty())
        if (auto written = write_output(options.json_path, out.dump(2) + "\n", options.force); !written) return written;
    if (!options.html_path.empty())
        if (auto written = write_html_report(out, options.html_path, options.force); !written) return written;
    return {};
}

} // namespace

Result<void> run_report(const std::vector<std::string>& traces, const ReportOptions& options) {
    std::vector<RankAnalysis> ranks;
    for (const auto& path : traces) {
        auto t = load_trace(path);
        if (!t) return t.error();
        if (t->partial_events && partial_in_use(path))
            fmt::print(stderr, "gtrace: {} is the partial trace of a capture still running: read its {} whole events so far\n",
                       path, *t->partial_events);
        else if (t->partial_events)
            fmt::print(stderr, "gtrace: {} is a partial trace (its capture was killed): read its {} whole events; "
                               "complete it with: gtrace recover {}\n", path, *t->partial_events, path);
        for (auto& r : analyze_ranks(*t, options.analysis)) ranks.push_back(std::move(r));
    }
    std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    // The job's verdict first: the straggler is judged on kernel time, which blaming leaves alone.
    JobVerdict verdict = job_verdict(ranks);
    if (verdict.slow) blame_straggler(ranks, *verdict.slow);
    if (ranks.empty() && !options.ranks_required) return write_outputs(traces, ranks, verdict, options);
    if (ranks.empty())
        return make_error(ExitCode::BadTrace, "no rank process in the trace(s): attach gtrace to a torchrun job (ranks carry RANK)");

    if (options.print) print_report(traces, ranks, verdict);
    return write_outputs(traces, ranks, verdict, options);
}

} // namespace gtrace
