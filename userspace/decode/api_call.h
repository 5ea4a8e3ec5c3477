// A CUDA API call decoded from its raw BPF record: named arguments instead of registers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decode/python_stacks.h"
#include "gtrace/cuda_api.h"
#include "gtrace/events.h"

namespace gtrace {

struct Dim3 {
    uint32_t x = 0, y = 0, z = 0;
};

struct LaunchArgs {
    bool driver = false;      // cuLaunchKernel*: `function` is a CUfunction handle
    uint64_t function = 0;    // host stub address (runtime) or CUfunction (driver)
    Dim3 grid, block;
    uint64_t shared_mem = 0;
};

struct ApiCall {
    gt_cuda_api api{};
    uint32_t pid = 0, tid = 0;
    uint64_t start_ns = 0, end_ns = 0; // CLOCK_MONOTONIC
    int64_t ret = 0;
    uint32_t correlation = 0; // CUPTI correlation id (0: no agent, or not GPU work)
    bool by_agent = false;    // recorded by the agent's CUPTI callback: no arguments (the GPU op has them)
    std::optional<LaunchArgs> launch;
    std::string kernel; // filled in by the symbolizer for launches
    std::string thread_name;
    PyStackRef stack;         // the Python stack at the call's entry (null: none)
    uint32_t stack_thread = 0; // not 0: `stack` is this thread's, which began the backward pass the call is part of
    // --autograd-links: made while autograd ran node `sequence_nr`; the stack of the forward op that made it.
    std::optional<uint64_t> sequence_nr;
    PyStackRef forward_stack;
    std::optional<uint64_t> stream, bytes, ptr, event, graph, handle;
    std::optional<int> copy_kind; // cudaMemcpyKind
};

ApiCall decode_api_call(const gt_api_event& e);

// "HtoD", "DtoH", … for cudaMemcpyKind values.
const char* copy_kind_name(int kind);

} // namespace gtrace
