#include "output/kineto_gpu_ranges.h"

#include <algorithm>

namespace gtrace {

void GpuRangeSpans::Pending::add(const RecentOp& o) {
    auto [it, fresh] = spans.try_emplace({o.device, o.stream}, o.start_ns, o.end_ns);
    if (!fresh) it->second = {std::min(it->second.first, o.start_ns), std::max(it->second.second, o.end_ns)};
}

void GpuRangeSpans::emit(const Pending& p) {
    for (const auto& [where, span] : p.spans) sink_({p.name, p.pid, where.first, where.second, span.first, span.second});
}

void GpuRangeSpans::emit_settled(Thread& t) {
    std::erase_if(t.ranges, [&](const Pending& p) {
        bool settled = p.end_ns + kSettleNs < t.latest_call_ns;
        if (settled) emit(p);
        return settled;
    });
    while (t.ranges.size() > kMaxRanges) emit(t.ranges.front()), t.ranges.pop_front();
}

void GpuRangeSpans::range(const TorchRange& r) {
    Thread& t = threads_[{r.pid, r.tid}];
    Pending p{r.name, r.pid, r.start_ns, r.end_ns, {}};
    for (const RecentOp& o : t.ops)
        if (p.covers(o.call_start_ns)) p.add(o);
    t.ranges.push_back(std::move(p));
    emit_settled(t);
}

void GpuRangeSpans::op(const CallRef& call, const GpuOp& op) {
    Thread& t = threads_[{call.pid, call.tid}];
    RecentOp o{call.start_ns, op.device, op.stream, op.start_ns, op.end_ns};
    for (Pending& p : t.ranges)
        if (p.covers(o.call_start_ns)) p.add(o);
    t.ops.push_back(o);
    t.latest_call_ns = std::max(t.latest_call_ns, o.call_start_ns);
    while (!t.ops.empty() && (t.ops.size() > kMaxOps || t.ops.front().call_start_ns + kKeepOpsNs < t.latest_call_ns))
        t.ops.pop_front();
    emit_settled(t);
}

void GpuRangeSpans::flush_all() {
    for (auto& [key, t] : threads_)
        for (const Pending& p : t.ranges) emit(p);
    threads_.clear();
}

void GpuRangeSpans::forget_process(uint32_t pid) {
    auto first = threads_.lower_bound({pid, 0}), last = threads_.lower_bound({pid + 1, 0});
    for (auto it = first; it != last; ++it)
        for (const Pending& p : it->second.ranges) emit(p);
    threads_.erase(first, last);
}

} // namespace gtrace
