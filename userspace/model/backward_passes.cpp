#include "model/backward_passes.h"

#include <algorithm>

namespace gtrace {

// torch names the engine's device threads pt_autograd_<device> (torch/csrc/autograd/engine.cpp);
// a thread name is at most 15 characters, so it may be cut.
bool is_autograd_thread(std::string_view thread_name) { return thread_name.starts_with("pt_autograd"); }

void BackwardPasses::begun(uint32_t pid, uint32_t tid, uint64_t start_ns, PyStackRef stack) {
    ++passes_;
    auto& passes = passes_of_[pid];
    std::erase_if(passes, [&](const Pass& p) { return p.tid == tid && !p.end_ns; }); // one left open by a lost end
    passes.push_back({tid, start_ns, 0, std::move(stack)});
    size_t ended = std::ranges::count_if(passes, [](const Pass& p) { return p.end_ns != 0; });
    for (auto it = passes.begin(); ended > kEndedKept && it != passes.end();) {
        if (it->end_ns) {
            it = passes.erase(it);
            --ended;
        } else {
            ++it;
        }
    }
}

void BackwardPasses::ended(uint32_t pid, uint32_t tid, uint64_t end_ns) {
    auto it = passes_of_.find(pid);
    if (it == passes_of_.end()) return;
    for (Pass& p : it->second)
        if (p.tid == tid && !p.end_ns) p.end_ns = std::max(end_ns, p.start_ns);
}

BackwardPasses::Origin BackwardPasses::origin_of(uint32_t pid, std::string_view thread_name, uint64_t call_start_ns) {
    if (!is_autograd_thread(thread_name)) return {};
    auto it = passes_of_.find(pid);
    if (it == passes_of_.end()) return {};
    const Pass* match = nullptr;
    for (const Pass& p : it->second) {
        if (p.start_ns > call_start_ns || (p.end_ns && p.end_ns < call_start_ns)) continue;
        if (match) {
            ++ambiguous_; // two threads in backward at once: which pass the call serves is unknown
            return {};
        }
        match = &p;
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
