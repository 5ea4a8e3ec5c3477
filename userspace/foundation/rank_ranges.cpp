#include "foundation/rank_ranges.h"

#include <algorithm>

#include <fmt/format.h>

namespace gtrace {

std::string rank_ranges(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        out += fmt::format("{}{}", out.empty() ? "" : ", ", j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
        i = j + 1;
    }
    return out;
}

} // namespace gtrace
