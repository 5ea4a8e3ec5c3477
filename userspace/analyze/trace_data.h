// What the analysis needs from a gtrace trace, per process: its rank, its CUDA calls, its GPU
// work and its main thread's samples — read from the Chrome trace JSON gtrace wrote.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/result.h"

namespace gtrace {

struct Span {
    uint64_t start_ns = 0, end_ns = 0;
    uint64_t dur() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

struct CallSpan : Span {
    std::string name;
    uint32_t tid = 0;
    std::string source; // Python line that made the call, when known
    uint64_t bytes = 0;
    std::string kind; // copy direction
    uint32_t correlation = 0;
};

enum class GpuKind { Kernel, Memcpy, Memset };

struct GpuSpan : Span {
    GpuKind kind = GpuKind::Kernel;
    std::string name;
    uint64_t bytes = 0;
    std::string copy_kind;
    uint32_t correlation = 0;
};

struct ProcessData {
    uint32_t pid = 0;
    std::string label;
    std::optional<int> rank;
    bool forked = false; // a forked copy of another process (DataLoader worker)
    std::vector<CallSpan> calls;
    std::vector<GpuSpan> gpu;
    std::vector<CallSpan> main_samples; // sample slices of the main thread (name = frame)
};

struct TraceData {
    std::string path;
    std::map<uint32_t, ProcessData> processes;
    bool has_gpu = false; // the capture had the GPU agent on
};

// Loads a trace gtrace wrote. A file that is not one (another tool's, truncated, corrupt)
// gives an error that says so.
Result<TraceData> load_trace(const std::string& path);

} // namespace gtrace
