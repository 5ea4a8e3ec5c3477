#include "model/autograd_links.h"

#include <algorithm>

namespace gtrace {

void AutogradLinks::forward_op(uint32_t pid, uint64_t sequence_nr, PyStackRef stack) {
    ++forward_seen_;
    auto& ops = forward_ops_[pid];
    ops[sequence_nr] = std::move(stack); // a number reused (another thread's counter): the newest op has it
    while (ops.size() > kForwardOpsKept) ops.erase(ops.begin());
}

void AutogradLinks::end_open(Thread& t, uint64_t sp, uint64_t ts_ns) {
    std::erase_if(t.open, [&](uint64_t number) {
        Node& n = t.nodes[number - t.first];
        if (n.sp > sp) return false; // an outer node
        n.end_ns = std::max(ts_ns, n.start_ns);
        return true;
    });
}

void AutogradLinks::node_begun(uint32_t pid, uint32_t tid, uint64_t sequence_nr, uint64_t sp, uint64_t ts_ns) {
    ++nodes_seen_;
    Thread& t = threads_[{pid, tid}];
    end_open(t, sp, ts_ns); // a running node at or below this frame has returned
    t.nodes.push_back({sequence_nr, sp, ts_ns, 0});
    t.open.push_back(t.first + t.nodes.size() - 1);
    // Bounded even behind a node whose return was never seen and that no later node closed.
    while (!t.nodes.empty() &&
           (t.nodes.size() > kNodesKept || (t.nodes.front().end_ns && t.nodes.front().end_ns + kEndedKeptNs < ts_ns))) {
        if (!t.open.empty() && t.open.front() == t.first) t.open.erase(t.open.begin());
        t.nodes.pop_front();
        ++t.first;
    }
}

void AutogradLinks::node_ended(uint32_t pid, uint32_t tid, uint64_t sp, uint64_t ts_ns) {
    auto it = threads_.find({pid, tid});
    bool running = it != threads_.end() && std::ranges::any_of(it->second.open, [&](uint64_t number) {
                       return it->second.nodes[number - it->second.first].sp == sp;
                   });
    if (!running) {
        ++ends_unmatched_; // begun before attach
        return;
    }
    end_open(it->second, sp, ts_ns); // and the nested ones whose returns were not seen
}

void AutogradLinks::forget_process(uint32_t pid) {
    forward_ops_.erase(pid);
    std::erase_if(threads_, [pid](const auto& entry) { return entry.first.first == pid; });
}

std::optional<AutogradLinks::Link> AutogradLinks::link_of(uint32_t pid, uint32_t tid, uint64_t ts_ns) {
    auto it = threads_.find({pid, tid});
    if (it == threads_.end()) return std::nullopt;
    // Nodes nest: the innermost running at ts is the latest begun by then that had not ended.
    // Back from there, past a few siblings that ended before (an outer node's children).
    const auto& nodes = it->second.nodes;
    auto after = std::ranges::upper_bound(nodes, ts_ns, {}, &Node::start_ns);
    const Node* inner = nullptr;
    for (int looked = 0; after != nodes.begin() && looked < kSiblingsLooked && !inner; ++looked) {
        const Node& n = *--after;
        if (!n.end_ns || n.end_ns >= ts_ns) inner = &n;
    }
    if (!inner) return std::nullopt;
    Link link{inner->sequence_nr, nullptr};
    if (auto ops = forward_ops_.find(pid); ops != forward_ops_.end())
        if (auto op = ops->second.find(inner->sequence_nr); op != ops->second.end()) link.forward_stack = op->second;
    ++(link.forward_stack ? calls_linked_ : calls_forward_unseen_);
    return link;
}

nlohmann::json AutogradLinks::facts() const {
    return {{"forward_ops", forward_seen_},
            {"nodes_run", nodes_seen_},
            {"node_ends_unmatched", ends_unmatched_},
            {"calls_linked_to_forward_op", calls_linked_},
            {"calls_in_node_forward_op_unseen", calls_forward_unseen_}};
}

} // namespace gtrace
