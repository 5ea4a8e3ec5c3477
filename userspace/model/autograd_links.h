// Forward op to backward node (--autograd-links). Autograd gives each node a forward op creates
// the creating thread's next sequence number, and runs it in backward under that number on an
// engine thread: the link the PyTorch profiler draws between a forward op and the backward work
// it causes. gtrace sees both ends (gtrace/torch_ranges.h): the number with the forward op's
// Python stack, and each node's run on its thread, begin to end. A call made inside a node's run
// (innermost, by time: the agent's call records come up to a poll after the probes' events)
// gets the node's number and the stack of the forward op that made it — the line in the model's
// forward() whose gradient the backward kernel computes.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/python_stacks.h"
#include "foundation/process_observer.h"

namespace gtrace {

class AutogradLinks final : public ProcessObserver {
public:
    void forward_op(uint32_t pid, uint64_t sequence_nr, PyStackRef stack);
    // `sp` is the node's frame on its thread: it pairs the end with its begin, and a begin at or
    // below an open node's frame ends that one (its return was not seen: an exception, a tail call).
    void node_begun(uint32_t pid, uint32_t tid, uint64_t sequence_nr, uint64_t sp, uint64_t ts_ns);
    void node_ended(uint32_t pid, uint32_t tid, uint64_t sp, uint64_t ts_ns);
    void forget_process(uint32_t pid);
    void process_exited(uint32_t pid) override { forget_process(pid); }

    struct Link {
        uint64_t sequence_nr = 0;
        PyStackRef forward_stack; // null: the forward op was not seen (before attach, another thread's)
    };
    // The node the thread was running at `ts_ns`, if any; counts what it decides.
    std::optional<Link> link_of(uint32_t pid, uint32_t tid, uint64_t ts_ns);

    nlohmann::json facts() const;

    // How long an ended node is kept for the calls that arrive after it (agent records: a poll).
    static constexpr uint64_t kEndedKeptNs = 2'000'000'000;
    static constexpr size_t kNodesKept = 16384;          // per thread, at most
    static constexpr size_t kForwardOpsKept = 1u << 17; // per process: the newest numbers
    static constexpr int kSiblingsLooked = 64;

private:
    struct Node {
        uint64_t sequence_nr = 0, sp = 0, start_ns = 0, end_ns = 0; // end 0: running
    };
    struct Thread {
        std::deque<Node> nodes;     // in start order
        uint64_t first = 0;         // the number of nodes.front() among all the thread's nodes
        std::vector<uint64_t> open; // the numbers of those still running (a few: they nest)
    };
    // Ends the running nodes at or below frame `sp` (the stack grows down).
    static void end_open(Thread& t, uint64_t sp, uint64_t ts_ns);

    std::map<std::pair<uint32_t, uint32_t>, Thread> threads_; // (pid, tid)
    std::map<uint32_t, std::map<uint64_t, PyStackRef>> forward_ops_;  // pid → number → stack
    uint64_t forward_seen_ = 0, nodes_seen_ = 0, ends_unmatched_ = 0;
    uint64_t calls_linked_ = 0, calls_forward_unseen_ = 0;
};

} // namespace gtrace
