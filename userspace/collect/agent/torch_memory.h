// A PyTorch process's caching-allocator figures, per device, through torch's public Python API
// (torch.cuda.memory_reserved / memory_allocated, the same in torch 1.4 through 2.x): the
// allocator's C++ entry points are inline in its headers and its stats struct has no stable
// layout, so no exported symbol gives them safely. Only when the process has torch's CUDA
// library (libc10_cuda.so) loaded and an initialized CPython; torch is never imported and its
// CUDA never initialized by the agent (the code reads sys.modules and torch.cuda.is_initialized()).
#pragma once
#include <cstdint>
#include <vector>

#include "gtrace/agent.h"

namespace gtrace::agent {

struct TorchMemory {
    uint8_t status = GT_TORCH_NO_PYTHON; // enum gt_memory_state_torch
    struct Device {
        uint64_t reserved = 0, allocated = 0;
    };
    std::vector<Device> devices; // by torch's device index (= CUDA's ordinal)
};

TorchMemory read_torch_memory();

} // namespace gtrace::agent
