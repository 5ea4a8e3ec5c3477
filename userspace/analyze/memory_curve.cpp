#include "analyze/memory_curve.h"

#include <algorithm>
#include <map>
#include <optional>

namespace gtrace {

MemoryCurve memory_curve(const std::vector<MemoryPoint>& memory, uint64_t origin_ns) {
    MemoryCurve curve;
    if (memory.empty()) return curve;
    std::vector<MemoryPoint> sorted = memory; // file order is nearly time order; ties keep it
    std::optional<uint64_t> at_attach;
    for (auto& m : sorted) {
        if (!m.at_attach) continue;
        // The agent read it a moment after the capture began: what was in use then. Changes
        // between the two are in it (the agent's memory records start with it).
        m.ts_ns = std::min(m.ts_ns, origin_ns);
        at_attach = at_attach.value_or(0) + m.allocated_bytes;
    }
    curve.at_attach_bytes = at_attach;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.ts_ns < b.ts_ns; });
    std::map<uint32_t, uint64_t> per_device;
    std::vector<std::pair<uint64_t, uint64_t>> totals; // ns since the start, all devices
    for (const auto& m : sorted) {
        per_device[m.device] = m.allocated_bytes;
        uint64_t sum = 0;
        for (const auto& [d, b] : per_device) sum += b;
        uint64_t t = m.ts_ns > origin_ns ? m.ts_ns - origin_ns : 0;
        if (!totals.empty() && totals.back().first == t && t == 0) totals.back().second = sum; // the state at the start
        else totals.emplace_back(t, sum);
    }
    for (const auto& [t, bytes] : totals)
        if (bytes > curve.peak_bytes) curve.peak_bytes = bytes, curve.peak_ms = static_cast<double>(t) / 1e6;
    auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
    size_t stride = (totals.size() + kMaxMemoryBuckets - 1) / kMaxMemoryBuckets;
    for (size_t i = 0; i < totals.size(); i += stride) {
        auto from = totals.begin() + static_cast<long>(i), to = totals.begin() + static_cast<long>(std::min(i + stride, totals.size()));
        auto [lo, hi] = std::minmax_element(from, to, [](const auto& a, const auto& b) { return a.second < b.second; });
        if (lo > hi) std::swap(lo, hi);
        curve.points.emplace_back(ms(lo->first), lo->second);
        if (hi != lo) curve.points.emplace_back(ms(hi->first), hi->second);
    }
    if (stride > 1 && curve.points.back().first != ms(totals.back().first)) // where the capture left it
        curve.points.emplace_back(ms(totals.back().first), totals.back().second);
    return curve;
}

} // namespace gtrace
