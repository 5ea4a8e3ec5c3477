// gtrace report TRACE... [--json FILE]: per-rank step breakdown and a bottleneck verdict per rank
// and for the job, from traces gtrace wrote (one per node or per capture).
#pragma once
#include <string>
#include <vector>

#include "cli/result.h"

namespace gtrace {

// Without `ranks_required`, a trace without rank processes prints nothing and is not an error.
Result<void> run_report(const std::vector<std::string>& traces, const std::string& json_path, bool ranks_required = true);

} // namespace gtrace
