// A kernel's "launch" annotation (grid, block, registers, shared memory, graph), formatted once
// per launch shape: a graph replays the same few shapes up to a million times a second, and
// formatting each was a fifth of gtrace's time per GPU record (perf, bench/capture_rate.py).
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>

#include "decode/gpu_activity.h"

namespace gtrace {

class LaunchTexts {
public:
    const std::string& text(const GpuOp& op);

private:
    struct BytesHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, std::string, BytesHash, std::equal_to<>> texts_; // keyed by the shape's bytes
};

} // namespace gtrace
