#include "decode/python_stacks.h"

#include <fmt/format.h>

namespace gtrace {

void PythonStacks::define(const gt_py_stack_event& e) {
    auto stack = std::make_shared<PyStack>();
    stack->frames = symbolizer_.symbolize(e);
    stack->truncated = e.truncated != 0;
    for (const auto& f : stack->frames) stack->texts.push_back(f.text());
    if (const PyFrame* src = source_frame(stack->frames)) stack->source = src->text();
    if (stack->truncated && !stack->texts.empty())
        stack->texts.push_back(fmt::format("[truncated: deeper than {} frames]", GT_PY_MAX_FRAMES));
    // A torn stack is remembered as empty: its id names no frames we could trust.
    by_pid_[e.pid][e.id] = stack->frames.empty() ? nullptr : std::move(stack);
}

PyStackRef PythonStacks::find(uint32_t pid, uint64_t id) {
    if (!id) return nullptr;
    auto p = by_pid_.find(pid);
    if (p != by_pid_.end())
        if (auto it = p->second.find(id); it != p->second.end()) return it->second;
    ++unknown_;
    return nullptr;
}

size_t PythonStacks::size() const {
    size_t n = 0;
    for (const auto& [pid, stacks] : by_pid_) n += stacks.size();
    return n;
}

} // namespace gtrace
