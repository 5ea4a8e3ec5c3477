#include "analyze/clock_alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace gtrace {
namespace {

// First look: as far as hosts' wall clocks plausibly disagree. Then: as far as the ends of one
// collective on two ranks may lie apart once aligned.
constexpr int64_t kCoarseWindowNs = 1'000'000'000;
constexpr int64_t kFineWindowNs = 1'000'000;

int64_t as_signed(uint64_t t) { return static_cast<int64_t>(std::min<uint64_t>(t, std::numeric_limits<int64_t>::max())); }

std::vector<CollectiveCall> pooled(const NodeClock& n) {
    std::vector<CollectiveCall> out;
    for (const auto* rank : n.ranks) out.insert(out.end(), rank->begin(), rank->end());
    return out;
}

void add_ends(std::vector<CollectiveEnd>& ends, const std::vector<CollectiveCall>& calls, int64_t offset_ns) {
    for (const auto& c : calls) ends.push_back({c.name, as_signed(c.done) + offset_ns});
    std::sort(ends.begin(), ends.end(), [](const CollectiveEnd& a, const CollectiveEnd& b) { return a.done < b.done; });
}

// How far the aligned ends lie from the same collectives' ends on the nodes before.
void measure(NodeAlignment& a, const std::vector<CollectiveEnd>& before, const std::vector<CollectiveCall>& calls) {
    auto d = end_differences(before, calls, a.offset_ns(), kFineWindowNs);
    a.matched = d.size();
    if (d.empty()) return;
    for (auto& v : d) v = std::llabs(v);
    a.residual_ns = median(std::move(d));
}

} // namespace

int64_t median(std::vector<int64_t> values) {
    if (values.empty()) return 0;
    auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
    std::nth_element(values.begin(), mid, values.end());
    return *mid;
}

std::optional<int64_t> median_standard_error(const std::vector<int64_t>& values) {
    if (values.size() < 2) return std::nullopt;
    const int64_t mid = median(values);
    std::vector<int64_t> deviations;
    deviations.reserve(values.size());
    for (int64_t v : values) deviations.push_back(std::llabs(v - mid));
    // σ ≈ 1.4826 × MAD for a normal spread; the median's standard error is 1.2533 σ / √n.
    return static_cast<int64_t>(1.858 * static_cast<double>(median(std::move(deviations))) / std::sqrt(static_cast<double>(values.size())));
}

std::string NodeAlignment::doubt() const {
    if (!matched) return "";
    if (matched < kMinAlignmentCollectives)
        return fmt::format("uncertain: {} collectives' ends matched, fewer than {}", matched, kMinAlignmentCollectives);
    if (cpu_pressure && *cpu_pressure >= kContendedCpuShare)
        return fmt::format("uncertain: the CPUs were contended (a runnable task waited {:.0f}% of the capture, /proc/pressure/cpu), "
                           "so collectives end late by scheduling delays",
                           *cpu_pressure * 100);
    if (uncertainty_ns && *uncertainty_ns > kTrustedAlignmentNs)
        return fmt::format("uncertain: the collectives' ends scatter, ±{:.0f} µs", static_cast<double>(*uncertainty_ns) / 1e3);
    return "";
}

std::vector<int64_t> end_differences(const std::vector<CollectiveEnd>& reference, const std::vector<CollectiveCall>& calls,
                                     int64_t shift_ns, int64_t window_ns) {
    std::vector<int64_t> out;
    if (reference.empty()) return out;
    const int64_t lo = reference.front().done, hi = reference.back().done; // outside: nothing to match there
    for (const auto& c : calls) {
        const int64_t t = as_signed(c.done) + shift_ns;
        if (t < lo || t > hi) continue;
        auto at = std::lower_bound(reference.begin(), reference.end(), t, [](const CollectiveEnd& e, int64_t v) { return e.done < v; });
        std::optional<int64_t> best;
        auto consider = [&](const CollectiveEnd& e) {
            int64_t d = e.done - t;
            if (!best || std::llabs(d) < std::llabs(*best)) best = d;
        };
        for (auto f = at; f != reference.end() && f->done - t <= window_ns; ++f)
            if (f->name == c.name) {
                consider(*f);
                break; // the nearest later one
            }
        for (auto b = at; b != reference.begin();) {
            --b;
            if (t - b->done > window_ns) break;
            if (b->name == c.name) {
                consider(*b);
                break; // the nearest earlier one
            }
        }
        if (best) out.push_back(*best);
    }
    return out;
}

void shift_calls(std::vector<CollectiveCall>& calls, int64_t offset_ns) {
    auto shift = [offset_ns](uint64_t& t) {
        int64_t v = as_signed(t) + offset_ns;
        t = v < 0 ? 0 : static_cast<uint64_t>(v);
    };
    for (auto& c : calls) shift(c.arrival), shift(c.done);
}

std::vector<NodeAlignment> align_nodes(const std::vector<NodeClock>& nodes) {
    std::vector<NodeAlignment> out(nodes.size());
    std::vector<CollectiveEnd> before; // the ends of the nodes aligned so far, on the first node's clock
    for (size_t k = 0; k < nodes.size(); ++k) {
        const NodeClock& n = nodes[k];
        NodeAlignment& a = out[k];
        if (n.cpu_pressure || nodes[0].cpu_pressure)
            a.cpu_pressure = std::max(n.cpu_pressure.value_or(0), nodes[0].cpu_pressure.value_or(0));
        const std::vector<CollectiveCall> calls = pooled(n);
        auto same_host = std::find_if(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(k),
                                      [&](const NodeClock& o) { return !n.host.empty() && o.host == n.host; });
        if (k == 0) {
            a.method = "reference";
        } else if (same_host != nodes.begin() + static_cast<std::ptrdiff_t>(k)) {
            size_t j = static_cast<size_t>(same_host - nodes.begin());
            a.clock_offset_ns = out[j].offset_ns(); // one host, one CLOCK_MONOTONIC
            a.method = fmt::format("same host as node {}: one clock", j + 1);
            measure(a, before, calls);
        } else {
            const bool clocks = n.realtime_offset_ns && nodes[0].realtime_offset_ns;
            if (clocks) {
                a.clock_offset_ns = *n.realtime_offset_ns - *nodes[0].realtime_offset_ns;
            } else if (!calls.empty() && !before.empty()) { // no reading: start from the first ends
                auto first = std::min_element(calls.begin(), calls.end(), [](const auto& x, const auto& y) { return x.done < y.done; });
                a.clock_offset_ns = before.front().done - as_signed(first->done);
            }
            auto coarse = end_differences(before, calls, a.clock_offset_ns, kCoarseWindowNs);
            if (coarse.empty()) {
                a.method = clocks ? "clocks only: no collective in common with the nodes before it"
                                  : "not aligned: no clock reading and no collective in common";
            } else {
                int64_t first = median(std::move(coarse));
                auto fine = end_differences(before, calls, a.clock_offset_ns + first, kFineWindowNs);
                a.uncertainty_ns = median_standard_error(fine);
                a.refined_ns = first + (fine.empty() ? 0 : median(std::move(fine)));
                a.method = clocks ? "clocks and collectives" : "collectives only: the trace has no clock reading";
                measure(a, before, calls);
            }
        }
        add_ends(before, calls, a.offset_ns());
    }
    return out;
}

} // namespace gtrace
