#include "output/pftrace_flows.h"

namespace gtrace {
namespace {

// Calls waiting for their GPU op, as many as GpuJoin keeps; past that the oldest call's flow
// starts at an instant when its op comes after all.
constexpr size_t kMaxStarted = 1 << 20;
constexpr uint64_t kMaxStartedAgeNs = 60'000'000'000; // as GpuJoin keeps a call (model/gpu_join.cpp)
constexpr size_t kMaxUnlinkedOps = 1 << 16;

} // namespace

uint64_t PftraceFlows::next_id(uint32_t correlation) {
    if (++serial_ == 0) serial_ = 1; // after 2^32 flows; a serial 0 would reuse an id of the first round
    return (uint64_t{serial_} << 32) | correlation;
}

uint64_t PftraceFlows::call_written(uint32_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint32_t correlation) {
    uint64_t id = next_id(correlation), k = key(pid, correlation);
    // A second call with the same id keeps the first's entry (GpuJoin joins ops to the first
    // one): its own flow has nothing to end it.
    if (!started_.try_emplace(k, Started{tid, start_ns, end_ns, id}).second) {
        given_up_.push_back(dangling(k, Started{tid, start_ns, end_ns, id}));
        return id;
    }
    started_order_.push_back({k, id, start_ns});
    while (started_order_.size() > kMaxStarted || started_order_.front().start_ns + kMaxStartedAgeNs < start_ns) {
        auto old = started_order_.front();
        started_order_.pop_front();
        if (auto it = started_.find(old.key); it != started_.end() && it->second.id == old.id) {
            given_up_.push_back(dangling(it->first, it->second));
            started_.erase(it);
        }
    }
    return id;
}

std::vector<PftraceFlows::Dangling> PftraceFlows::take_process(uint32_t pid) {
    std::vector<Dangling> out;
    std::erase_if(started_, [&](const auto& kv) {
        bool of_pid = kv.first >> 32 == pid;
        if (of_pid) out.push_back(dangling(kv.first, kv.second));
        return of_pid;
    });
    return out; // their started_order_ entries are skipped when they come up
}

std::vector<PftraceFlows::Dangling> PftraceFlows::take_all() {
    std::vector<Dangling> out = std::exchange(given_up_, {});
    for (const auto& [k, s] : started_) out.push_back(dangling(k, s));
    started_.clear();
    started_order_.clear();
    return out;
}

PftraceFlows::Join PftraceFlows::join(const CallRef& call, const GpuOp& op) {
    auto it = started_.find(key(op.pid, op.correlation));
    if (it != started_.end() && it->second.tid == call.tid && it->second.start_ns == call.start_ns) {
        Join j{it->second.id, false};
        started_.erase(it); // a second op of the call (a graph launch) gets a flow of its own
        return j;
    }
    return {next_id(op.correlation), true};
}

// Kept a minute, as GpuJoin keeps an op waiting for its call: a process's ops issued before its
// first traced call never get one, and a capture left on for hours must not keep them all.
void PftraceFlows::op_written_unlinked(const GpuOp& op) {
    OpKey k = op_key(op);
    if (!unlinked_ops_.insert(k).second) return;
    unlinked_order_.push_back(k);
    while (!unlinked_order_.empty() &&
           (unlinked_ops_.size() > kMaxUnlinkedOps || std::get<2>(unlinked_order_.front()) + kMaxStartedAgeNs < op.start_ns)) {
        unlinked_ops_.erase(unlinked_order_.front()); // gone already when its call came
        unlinked_order_.pop_front();
    }
}

bool PftraceFlows::take_written_unlinked(const GpuOp& op) {
    return unlinked_ops_.erase(op_key(op)) > 0;
}

} // namespace gtrace
