#include "model/backward_passes.h"

#include <algorithm>

namespace gtrace {

// torch names the engine's device threads pt_autograd_<device> (torch/csrc/autograd/engine.cpp);
// a thread name is at most 15 characters, so it may be cut.
bool is_autograd_thread(std::string_view thread_name) { return thread_name.starts_with("pt_autograd"); }

void BackwardPasses::begun(uint32_t pid, uint32_t tid, uint64_t start_ns, PyStackRef stack) {
    ++passes_;
    auto& open = open_[pid];
    std::erase_if(open, [&](const Open& o) { return o.tid == tid; }); // one left open by a lost end
    open.push_back({tid, start_ns, std::move(stack)});
}

void BackwardPasses::ended(uint32_t pid, uint32_t tid) {
    auto it = open_.find(pid);
    if (it == open_.end()) return;
    std::erase_if(it->second, [&](const Open& o) { return o.tid == tid; });
    if (it->second.empty()) open_.erase(it);
}

BackwardPasses::Origin BackwardPasses::origin_of(uint32_t pid, std::string_view thread_name, uint64_t call_start_ns) {
    if (!is_autograd_thread(thread_name)) return {};
    auto it = open_.find(pid);
    if (it == open_.end()) return {};
    const Open* match = nullptr;
    for (const Open& o : it->second) {
        if (o.start_ns > call_start_ns) continue;
        if (match) {
            ++ambiguous_; // two threads in backward at once: which pass the call serves is unknown
            return {};
        }
        match = &o;
    }
    if (!match) return {};
    if (!match->stack) {
        ++without_stack_;
        return {};
    }
    ++attributed_;
    return {match->stack, match->tid};
}

nlohmann::json BackwardPasses::facts() const {
    return {{"passes", passes_},
            {"calls_given_the_pass_stack", attributed_},
            {"calls_left_without_stack_two_passes_open", ambiguous_},
            {"calls_left_without_stack_pass_had_none", without_stack_}};
}

} // namespace gtrace
