// Names a PyTorch record_function range. torch 2.x hands BPF the name itself; torch 1.13 only
// gives it to a profiler, so there the range is named from the Python code that opened it:
// torch's own optimizer and DataLoader ranges by what they are, any other by its call site.
#pragma once
#include <string>
#include <vector>

#include "decode/python_frames.h"
#include "gtrace/torch_ranges.h"

namespace gtrace {

// The torch range that ends a training step unless --step-marker says otherwise: the optimizer's
// step, which every PyTorch optimizer wraps in a record_function range.
inline constexpr const char* kDefaultStepMarker = "^Optimizer\\.step";

// "Optimizer.step#Adam.step" (torch 2.x), "Optimizer.step", "enumerate(DataLoader).__next__",
// "Optimizer.zero_grad", "DistributedDataParallel.forward", "record_function (train.py:42)",
// "record_function [C++] (in backward)" for one libtorch opened itself, or "record_function".
std::string torch_range_name(const gt_torch_range_event& e, const std::vector<PyFrame>& stack);

} // namespace gtrace
