#include "model/gpu_join.h"

#include <algorithm>

namespace gtrace {
namespace {

constexpr size_t kMaxCalls = 1 << 20;   // calls waiting for their GPU records
// ... and no longer than this after newer calls: the agent hands records over within a second
// of the op's end, and a training loop's GPU runs seconds behind its CPU at most. Without it a
// slow job's table would grow for hours before the count bound (~100 MiB) stops it.
constexpr uint64_t kMaxCallAgeNs = 60'000'000'000;
constexpr size_t kMaxWaitingOps = 1 << 18;
constexpr size_t kRecentPerThread = 4096;
constexpr uint64_t kApiSlackNs = 2000;  // the clock offset's uncertainty, generously

} // namespace

void GpuJoin::link(Key k, const CallRef& call) {
    auto w = waiting_ops_.find(k);
    if (w != waiting_ops_.end()) {
        for (const auto& op : w->second) {
            ++stats_.joined;
            stats_.joined_by_api_record += call.via_api_record;
            emit_(call, op);
        }
        waiting_ops_.erase(w);
    }
    if (calls_.emplace(k, call).second) {
        call_order_.emplace_back(k, call.end_ns);
        while (call_order_.size() > kMaxCalls || call_order_.front().second + kMaxCallAgeNs < call.end_ns) {
            calls_.erase(call_order_.front().first);
            call_order_.pop_front();
        }
    }
}

void GpuJoin::add_call(const ApiCall& c) {
    CallRef ref{c.pid, c.tid, c.start_ns, c.end_ns, c.api};
    if (c.correlation) {
        ++stats_.calls_with_correlation;
        auto [it, fresh] = call_ids_.try_emplace(c.pid, c.correlation, c.correlation);
        if (!fresh) {
            it->second.first = std::min(it->second.first, c.correlation);
            it->second.second = std::max(it->second.second, c.correlation);
        }
        link(key(c.pid, c.correlation), ref);
        return;
    }
    auto& q = recent_[{c.pid, c.tid}];
    q.push_back(ref);
    if (q.size() > kRecentPerThread) q.pop_front();
}

void GpuJoin::add_op(const GpuOp& op) {
    ++stats_.gpu_ops;
    Key k = key(op.pid, op.correlation);
    if (auto it = calls_.find(k); it != calls_.end()) {
        ++stats_.joined;
        stats_.joined_by_api_record += it->second.via_api_record;
        emit_(it->second, op);
        return;
    }
    auto& v = waiting_ops_[k];
    if (v.empty()) op_order_.emplace_back(k, op.end_ns);
    v.push_back(op);
    // An op whose call has not come within a minute will not come: its process's calls were
    // not traced (before attach, another thread's untraced API). Without the age bound the ops
    // of a slow job would wait for hours before the count bound lets them go.
    while (!op_order_.empty() && (op_order_.size() > kMaxWaitingOps || op_order_.front().second + kMaxCallAgeNs < op.end_ns)) {
        auto [old_key, _] = op_order_.front();
        op_order_.pop_front();
        if (old_key == k) continue; // just queued again after an op linked (its entry is the newer one)
        if (auto old = waiting_ops_.find(old_key); old != waiting_ops_.end()) {
            classify(forgotten_, old_key, old->second.size());
            waiting_ops_.erase(old);
        }
    }
}

void GpuJoin::forget_process(uint32_t pid) {
    recent_.erase(recent_.lower_bound({pid, 0}), recent_.lower_bound({pid + 1, 0}));
    for (auto it = waiting_ops_.begin(); it != waiting_ops_.end();) {
        if (static_cast<uint32_t>(it->first >> 32) != pid) {
            ++it;
            continue;
        }
        classify(forgotten_, it->first, it->second.size());
        it = waiting_ops_.erase(it); // its key in op_order_ goes when it comes up
    }
    call_ids_.erase(pid);
}

void GpuJoin::classify(Unlinked& u, Key k, uint64_t ops) const {
    uint32_t pid = static_cast<uint32_t>(k >> 32), corr = static_cast<uint32_t>(k);
    auto ids = call_ids_.find(pid);
    uint64_t& bucket = ids == call_ids_.end()        ? u.no_traced_call
                       : corr < ids->second.first    ? u.before_first_call
                       : corr > ids->second.second   ? u.after_last_call
                                                     : u.untraced_call;
    bucket += ops;
}

Unlinked GpuJoin::unlinked() const {
    Unlinked u = forgotten_;
    for (const auto& [k, ops] : waiting_ops_) classify(u, k, ops.size());
    return u;
}

void GpuJoin::add_api_record(const GpuApiRecord& r) {
    auto it = recent_.find({r.pid, r.tid});
    if (it == recent_.end()) return;
    // CUPTI's API record lies inside the probed call's entry..return interval.
    for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) {
        if (c->start_ns <= r.start_ns + kApiSlackNs && r.end_ns <= c->end_ns + kApiSlackNs) {
            CallRef call = *c;
            call.via_api_record = true;
            link(key(r.pid, r.correlation), call);
            return;
        }
        if (c->end_ns + kApiSlackNs < r.start_ns) return; // older calls cannot contain it
    }
}

} // namespace gtrace
