#include "output/launch_texts.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace gtrace {

const std::string& LaunchTexts::text(const GpuOp& op) {
    constexpr size_t kMaxShapes = 4096; // forgotten all at once past this: formatted again
    char key[sizeof op.grid + sizeof op.block + 3 * sizeof(uint32_t) + 1];
    char* p = key;
    for (auto [from, n] : {std::pair<const void*, size_t>{op.grid, sizeof op.grid}, {op.block, sizeof op.block},
                           {&op.registers, 4}, {&op.static_shared, 4}, {&op.dynamic_shared, 4}, {&op.graph, 1}}) {
        std::memcpy(p, from, n);
        p += n;
    }
    std::string_view k(key, sizeof key);
    if (auto it = texts_.find(k); it != texts_.end()) return it->second;
    if (texts_.size() >= kMaxShapes) texts_.clear();
    return texts_
        .emplace(k, fmt::format("grid [{},{},{}] block [{},{},{}] registers_per_thread {} shared_memory {}+{}{}", op.grid[0],
                                op.grid[1], op.grid[2], op.block[0], op.block[1], op.block[2], op.registers, op.static_shared,
                                op.dynamic_shared, op.graph ? " graph" : ""))
        .first->second;
}

} // namespace gtrace
