// The flow ids of a .pftrace, chosen so that every flow starts once and ends once however calls
// and GPU ops pair up: twin calls with one correlation id, a pid reused, a graph launch's many
// kernels, an id known only from CUPTI's API record after the call was written.
//
// A call with a correlation id starts a flow of its own on its slice (the id's low 32 bits are
// the correlation id, the readers' convention; a serial above them keeps every id unique). The
// first GPU op joined to that very call ends it; any other join gets a new id, which the writer
// starts at an instant inside the call. A GPU op written before its call joined is remembered,
// so that its flow ends at an instant at the op's start.
#pragma once
#include <cstdint>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "decode/gpu_activity.h"
#include "model/gpu_join.h"

namespace gtrace {

class PftraceFlows {
public:
    // A GPU op as the flows know it: (pid, correlation), stream, start.
    using OpKey = std::tuple<uint64_t, uint32_t, uint64_t>;
    static OpKey op_key(const GpuOp& op) { return {key(op.pid, op.correlation), op.stream, op.start_ns}; }

    // The flow id on the slice of a call with this correlation id.
    uint64_t call_written(uint32_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint32_t correlation);

    // Flows started on a call that no GPU op ended: given up on (after a minute, or past the
    // number kept), those of a process gone, all at the end. The writer ends each.
    struct Dangling {
        uint32_t pid = 0, tid = 0;
        uint64_t start_ns = 0, end_ns = 0, id = 0;
    };
    std::vector<Dangling> take_given_up() { return std::exchange(given_up_, {}); }
    std::vector<Dangling> take_process(uint32_t pid);
    std::vector<Dangling> take_all();

    struct Join {
        uint64_t id = 0;
        bool needs_start = false; // the call's slice does not start it: an instant in the call must
    };
    Join join(const CallRef& call, const GpuOp& op);

    // An op written without a flow end (its call not joined yet).
    void op_written_unlinked(const GpuOp& op);
    // Whether `op` was written without its flow end (then forgotten: its end goes on an instant).
    bool take_written_unlinked(const GpuOp& op);

private:
    static uint64_t key(uint32_t pid, uint32_t correlation) { return (uint64_t{pid} << 32) | correlation; }
    uint64_t next_id(uint32_t correlation);

    struct Started {
        uint32_t tid = 0;
        uint64_t start_ns = 0, end_ns = 0, id = 0;
    };
    static Dangling dangling(uint64_t key, const Started& s) {
        return {static_cast<uint32_t>(key >> 32), s.tid, s.start_ns, s.end_ns, s.id};
    }
    std::vector<Dangling> given_up_;
    uint32_t serial_ = 0;
    std::unordered_map<uint64_t, Started> started_; // (pid, correlation) -> the call slice's flow, not ended yet
    struct Order {
        uint64_t key = 0, id = 0, start_ns = 0;
    };
    std::deque<Order> started_order_; // oldest first; entries whose flow ended are skipped
    std::set<OpKey> unlinked_ops_;
    std::deque<OpKey> unlinked_order_; // as written; entries taken meanwhile are skipped
};

} // namespace gtrace
