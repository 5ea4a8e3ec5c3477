#include "decode/python_stacks.h"

#include <fmt/format.h>

namespace gtrace {

PyStackRef make_py_stack(std::vector<PyFrame> frames, bool truncated) {
    if (frames.empty()) return nullptr;
    auto stack = std::make_shared<PyStack>();
    stack->frames = std::move(frames);
    stack->truncated = truncated;
    for (const auto& f : stack->frames) stack->texts.push_back(f.text());
    if (const PyFrame* src = source_frame(stack->frames)) {
        stack->source = src->text();
        stack->source_index = static_cast<int>(src - stack->frames.data());
    }
    if (stack->truncated) stack->texts.push_back(fmt::format("[truncated: deeper than {} frames]", GT_PY_MAX_FRAMES));
    return stack;
}

void PythonStacks::define(const gt_py_stack_event& e) {
    // A torn stack is remembered as null: its id names no frames we could trust.
    by_pid_[e.pid][e.id] = make_py_stack(symbolizer_.symbolize(e), e.truncated != 0);
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
