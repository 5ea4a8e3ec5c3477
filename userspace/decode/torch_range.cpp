#include "decode/torch_range.h"

#include <cstring>

#include <fmt/format.h>

namespace gtrace {
namespace {

bool ends_with(const std::string& s, const char* tail) { return s.ends_with(tail); }

// Python < 3.11 has no co_qualname: the frame then carries the bare function name.
bool is_function(const PyFrame& f, const char* name) {
    return f.qualname == name || ends_with(f.qualname, (std::string(".") + name).c_str());
}

} // namespace

std::string torch_range_name(const gt_torch_range_event& e, const std::vector<PyFrame>& stack) {
    if (e.kind == GT_RANGE_BACKWARD) return "autograd backward";
    if (e.named) return std::string(e.name, strnlen(e.name, sizeof e.name));
    // The frame that opened the range: the caller of record_function.__enter__ (or of the
    // decorator's wrapper, for @record_function).
    for (size_t i = 0; i + 1 < stack.size(); ++i) {
        const PyFrame& f = stack[i];
        if (!ends_with(f.filename, "torch/autograd/profiler.py") || !is_function(f, "__enter__")) continue;
        const PyFrame& caller = stack[i + 1];
        if (ends_with(caller.filename, "torch/optim/optimizer.py"))
            return is_function(caller, "zero_grad") ? "Optimizer.zero_grad" : "Optimizer.step";
        if (ends_with(caller.filename, "torch/utils/data/dataloader.py") && is_function(caller, "__next__"))
            return "enumerate(DataLoader).__next__";
        if (ends_with(caller.filename, "torch/nn/parallel/distributed.py") && is_function(caller, "forward"))
            return "DistributedDataParallel.forward";
        return fmt::format("record_function ({}:{})", caller.filename, caller.line);
    }
    // Opened by C++ (RECORD_USER_SCOPE in libtorch), from inside this Python function.
    if (!stack.empty()) return fmt::format("record_function [C++] (in {})", stack.front().qualname);
    return "record_function";
}

} // namespace gtrace
