// Ranks as people read them in a job of hundreds: "0-6, 8-15" (dumps, reports).
#pragma once
#include <string>
#include <vector>

namespace gtrace {

std::string rank_ranges(std::vector<int> ranks);

} // namespace gtrace
