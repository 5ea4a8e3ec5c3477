// The terminal text of a report (`gtrace report`, and `attach`/`record` at the end of a
// capture): the breakdown table, then per process its verdict with the figures behind it,
// launch statistics, copy bandwidth, top kernels and GPU memory, then the job's verdict.
#pragma once
#include <string>

#include "analyze/job_report.h"

namespace gtrace {

std::string format_report(const JobReport& report);

} // namespace gtrace
