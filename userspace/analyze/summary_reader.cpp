#include "analyze/summary_reader.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace gtrace {
namespace {

constexpr int kMaxRank = 1 << 24;

// A finite, non-negative number at `key`, else 0: another node's file decides nothing else.
double number(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return 0;
    double v = it->get<double>();
    return std::isfinite(v) && v >= 0 ? v : 0;
}

std::string text(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const nlohmann::json& member(const nlohmann::json& j, const char* key) {
    static const nlohmann::json none;
    auto it = j.find(key);
    return it != j.end() ? *it : none;
}

std::optional<int> rank_of(const nlohmann::json& v) {
    if (!v.is_number_integer()) return std::nullopt;
    int64_t r = v.get<int64_t>();
    if (r < 0 || r > kMaxRank) return std::nullopt;
    return static_cast<int>(r);
}

std::vector<CollectiveFigures> collectives(const nlohmann::json& list) {
    std::vector<CollectiveFigures> out;
    if (!list.is_array()) return out;
    for (const auto& c : list) {
        if (!c.is_object()) continue;
        CollectiveFigures f;
        f.name = text(c, "name"), f.gpu = text(c, "on") == "gpu";
        f.count = static_cast<uint64_t>(std::min(number(c, "count"), 1e15)), f.ms = number(c, "ms"), f.wait_ms = number(c, "wait_ms");
        const nlohmann::json& waited = member(c, "waited_for_ms");
        if (waited.is_object())
            for (const auto& [rank, ms] : waited.items()) {
                int r = -1;
                auto [end, ec] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
                if (ec == std::errc{} && end == rank.data() + rank.size() && r >= 0 && r <= kMaxRank && ms.is_number() &&
                    std::isfinite(ms.get<double>()))
                    f.waited_for_ms[r] = std::max(0.0, ms.get<double>());
            }
        out.push_back(std::move(f));
    }
    return out;
}

ProcessAnalysis process(const nlohmann::json& r) {
    ProcessAnalysis p;
    p.rank = rank_of(member(r, "rank"));
    p.pid = static_cast<uint32_t>(std::min(number(r, "pid"), 4194304.0));
    p.name = text(r, "name"), p.label = text(r, "label"), p.step_rule = text(r, "step_rule");
    p.summarized_steps = static_cast<size_t>(std::min(number(r, "steps"), 1e12));
    p.step_ms = number(r, "step_ms"), p.gpu_utilization = number(r, "gpu_utilization");
    p.kernel_ms_per_step = number(r, "kernel_ms_per_step"), p.launches_per_step = number(r, "launches_per_step");
    p.median_launch_us = number(r, "median_launch_us"), p.median_launch_delay_us = number(r, "median_launch_delay_us");
    p.median_launch_interval_us = number(r, "median_launch_interval_us"), p.median_kernel_us = number(r, "median_kernel_us");
    p.kernels_shorter_than_launch = number(r, "kernels_shorter_than_launch");
    p.h2d_gbps = number(r, "h2d_GBps"), p.d2h_gbps = number(r, "d2h_GBps");
    if (const auto& shares = member(r, "breakdown_share"); shares.is_object())
        for (const auto& [name, share] : shares.items())
            if (auto c = category_by_name(name); c && share.is_number()) p.share[*c] = std::clamp(share.get<double>(), 0.0, 1.0);
    if (const auto& top = member(r, "top_kernels"); top.is_array())
        for (const auto& k : top)
            if (k.is_object()) p.top_kernels_ms.emplace_back(text(k, "name"), number(k, "total_ms"));
    const nlohmann::json& memory = member(r, "memory");
    if (memory.is_object()) p.memory.peak_bytes = static_cast<uint64_t>(std::min(number(memory, "peak_bytes"), 1e18)), p.memory.peak_ms = number(memory, "peak_ms");
    p.collectives = collectives(member(r, "collectives"));
    if (const auto& nccl = member(r, "nccl"); nccl.is_array()) // per step in the summary: back to the whole steps
        for (const auto& k : nccl) {
            if (!k.is_object() || p.nccl_traffic.size() >= 64) continue;
            double steps = p.summarized_steps ? static_cast<double>(p.summarized_steps) : 1;
            NcclTraffic t;
            t.name = text(k, "kind").substr(0, 64);
            t.calls = static_cast<uint64_t>(std::min(number(k, "calls"), 1e15));
            t.kernels = static_cast<uint64_t>(std::min(number(k, "kernels"), 1e15));
            t.bytes = number(k, "bytes_per_step") * steps, t.kernel_ms = number(k, "kernel_ms_per_step") * steps;
            t.algbw_gbps = number(k, "algbw_GBps"), t.busbw_gbps = number(k, "busbw_GBps");
            t.joined_bytes = t.algbw_gbps * t.kernel_ms * 1e6; // what the bandwidth was over
            t.nranks = static_cast<uint32_t>(std::min(number(k, "nranks"), 1e6));
            t.nranks_assumed = member(k, "nranks_assumed").is_boolean() && member(k, "nranks_assumed").get<bool>();
            p.nccl_traffic.push_back(std::move(t));
        }
    p.collective_wait_ms_per_step = number(r, "collective_wait_ms_per_step");
    if (const auto& w = member(r, "main_thread_waits_ms_per_step"); w.is_object())
        p.waits = {number(w, "collective"), number(w, "dataloader"), number(w, "cuda_sync"), number(w, "blocked"), number(w, "other")};
    if (const auto& blocked = member(r, "blocked"); blocked.is_array())
        for (const auto& b : blocked)
            if (b.is_object()) p.blocked.push_back({text(b, "kind"), text(b, "where"), number(b, "ms_per_step")});
    p.verdict = text(r, "verdict"), p.leading = text(r, "leading"), p.evidence = text(r, "evidence");
    if (const auto& causes = member(r, "causes"); causes.is_array())
        for (const auto& c : causes)
            if (auto cat = c.is_object() ? category_by_name(text(c, "category")) : std::nullopt) p.causes.emplace_back(*cat, std::min(number(c, "share"), 1.0));
    p.cause_share = std::min(number(r, "cause_share"), 1.0);
    return p;
}

} // namespace

std::optional<Category> category_by_name(const std::string& name) {
    for (int c = 0; c < kCategoryCount; ++c)
        if (name == category_name(static_cast<Category>(c))) return static_cast<Category>(c);
    return std::nullopt;
}

Result<NodeSummary> read_node_summary(const nlohmann::json& j, const std::string& path) {
    if (!j.is_object() || !member(j, "ranks").is_array() || !member(j, "verdict").is_object())
        return make_error(ExitCode::BadTrace, fmt::format("{}: not a gtrace summary (what gtrace report --json or attach --summary-json "
                                                          "writes): no \"ranks\" and \"verdict\"", path));
    NodeSummary s;
    // attach/record --summary-json: the capture's facts; gtrace report --json: its own fields.
    const nlohmann::json& capture = member(j, "capture").is_object() ? member(j, "capture") : j;
    s.host = text(capture, "host");
    const nlohmann::json& pressure = member(capture, "cpu_pressure");
    if (pressure.is_object() && member(pressure, "some").is_number()) s.cpu_pressure = std::min(number(pressure, "some"), 1.0);
    else if (pressure.is_number()) s.cpu_pressure = std::min(number(capture, "cpu_pressure"), 1.0);
    for (const auto& r : member(j, "ranks"))
        if (r.is_object()) s.processes.push_back(process(r));
    return s;
}

} // namespace gtrace
