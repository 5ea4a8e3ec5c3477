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
    if (!symbolizer_.has_runtime(e.pid)) return;
    // A torn stack is remembered as null: its id names no frames we could trust.
    PyStackRef stack = make_py_stack(symbolizer_.symbolize(e), e.truncated != 0);
    std::lock_guard lock(mutex_);
    by_pid_[e.pid][e.id] = std::move(stack);
}

const PyStackRef* PythonStacks::lookup(uint32_t pid, uint64_t id) const {
    auto p = by_pid_.find(pid);
    if (p == by_pid_.end()) return nullptr;
    auto it = p->second.find(id);
    return it == p->second.end() ? nullptr : &it->second;
}

PyStackRef PythonStacks::find(uint32_t pid, uint64_t id) {
    if (!id) return nullptr;
    {
        std::lock_guard lock(mutex_);
        if (const PyStackRef* s = lookup(pid, id)) return *s;
    }
    // BPF submits a definition before the first event naming it: once that event is read, the
    // definition is in its ring, read or not.
    if (pending_) pending_();
    std::lock_guard lock(mutex_);
    if (const PyStackRef* s = lookup(pid, id)) return *s;
    ++unknown_;
    return nullptr;
}

void PythonStacks::forget_process(uint32_t pid) {
    std::lock_guard lock(mutex_);
    by_pid_.erase(pid);
}

uint64_t PythonStacks::unknown_ids() const {
    std::lock_guard lock(mutex_);
    return unknown_;
}

size_t PythonStacks::size() const {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& [pid, stacks] : by_pid_) n += stacks.size();
    return n;
}

} // namespace gtrace
