// gtrace report TRACE... [--json FILE] [--html FILE]: per-rank step breakdown and a bottleneck
// verdict per rank and for the job, from traces gtrace wrote (one per node or per capture).
#pragma once
#include <string>
#include <vector>

#include "cli/result.h"

namespace gtrace {

// Without `ranks_required`, a trace without rank processes prints nothing and is not an error.
// `json_path` / `html_path`: also write the findings as JSON / as a self-contained HTML page ("" = no).
Result<void> run_report(const std::vector<std::string>& traces, const std::string& json_path, bool ranks_required = true,
                        const std::string& html_path = "");

} // namespace gtrace
