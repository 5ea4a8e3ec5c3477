// gtrace report TRACE... [--json FILE]: per-rank step breakdown and a bottleneck verdict per rank
// and for the job, from traces gtrace wrote (one per node or per capture).
#pragma once
#include <string>
#include <vector>

#include "cli/result.h"

namespace gtrace {

Result<void> run_report(const std::vector<std::string>& traces, const std::string& json_path);

} // namespace gtrace
