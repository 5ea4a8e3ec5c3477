#include "model/gpu_join.h"

namespace gtrace {
namespace {

constexpr size_t kMaxCalls = 1 << 20;   // calls waiting for their GPU records
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
        call_order_.push_back(k);
        if (call_order_.size() > kMaxCalls) {
            calls_.erase(call_order_.front());
            call_order_.pop_front();
        }
    }
}

void GpuJoin::add_call(const ApiCall& c) {
    CallRef ref{c.pid, c.tid, c.start_ns, c.end_ns, c.api};
    if (c.correlation) {
        ++stats_.calls_with_correlation;
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
    if (v.empty()) {
        op_order_.push_back(k);
        if (op_order_.size() > kMaxWaitingOps) {
            waiting_ops_.erase(op_order_.front());
            op_order_.pop_front();
        }
    }
    v.push_back(op);
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
