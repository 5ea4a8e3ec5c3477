// Joins GPU work to the CPU call that issued it, by CUPTI correlation id: the BPF return probe
// reads the id the agent published during the call, and every GPU record carries it. Both
// sides arrive in any order (GPU records come in batches, later); each waits for the other in
// a bounded table. When another tool holds CUPTI's callback API, CUPTI's own API records (same
// thread, inside the call's entry/return interval) supply the id instead.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

#include "decode/api_call.h"
#include "decode/gpu_activity.h"

namespace gtrace {

struct CallRef {
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0;
    gt_cuda_api api{};
    bool via_api_record = false; // the id came from a CUPTI API record, not from BPF
};

struct JoinStats {
    uint64_t gpu_ops = 0;         // kernels, copies and sets seen
    uint64_t joined = 0;          // ... linked to their CPU call
    uint64_t joined_by_api_record = 0;
    uint64_t calls_with_correlation = 0;
};

// Why GPU ops stayed unlinked, from where their correlation id falls among the ids of the calls
// gtrace traced in the same process (CUPTI hands ids out in increasing order).
struct Unlinked {
    uint64_t before_first_call = 0; // issued before the first traced call: in flight when gtrace attached
    uint64_t untraced_call = 0;     // between traced calls: an API gtrace does not probe, or a lost call event
    uint64_t after_last_call = 0;   // after the last traced call: its call event never arrived
    uint64_t no_traced_call = 0;    // in a process with no traced call carrying an id
    uint64_t total() const { return before_first_call + untraced_call + after_last_call + no_traced_call; }
};

class GpuJoin {
public:
    using Emit = std::function<void(const CallRef&, const GpuOp&)>;
    explicit GpuJoin(Emit emit) : emit_(std::move(emit)) {}

    void add_call(const ApiCall& call); // any call; those with a correlation id join
    void add_op(const GpuOp& op);
    void add_api_record(const GpuApiRecord& r);
    // pid exited (its last GPU records taken): its threads' recent calls are let go, and its ops
    // still waiting (no call of it can come now) are counted as unlinked and let go.
    void forget_process(uint32_t pid);
    const JoinStats& stats() const { return stats_; }
    // The ops still waiting for a call, classified (plus those the bounded table dropped).
    Unlinked unlinked() const;

private:
    using Key = uint64_t; // pid << 32 | correlation
    static Key key(uint32_t pid, uint32_t corr) { return (uint64_t{pid} << 32) | corr; }
    void link(Key k, const CallRef& call);
    void classify(Unlinked& u, Key k, uint64_t ops) const; // by where k's id falls among its process's

    Emit emit_;
    JoinStats stats_;
    std::unordered_map<Key, CallRef> calls_;
    std::deque<std::pair<Key, uint64_t>> call_order_; // (key, the call's end), oldest first
    std::unordered_map<Key, std::vector<GpuOp>> waiting_ops_;
    std::deque<std::pair<Key, uint64_t>> op_order_; // (key, its first op's end), oldest first
    // Recent calls per thread without a correlation id, for the API-record fallback.
    std::map<std::pair<uint32_t, uint32_t>, std::deque<CallRef>> recent_;
    std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> call_ids_; // pid → lowest, highest id
    Unlinked forgotten_;       // unlinked ops let go: of processes that exited, or waited too long
};

} // namespace gtrace
