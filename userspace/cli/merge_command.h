// gtrace merge -o JOB.pftrace TRACE... : the .pftrace traces of a job's nodes (one per node) as
// one trace on one time line. analyze/ aligns the nodes' clocks (analyze/clock_alignment.h),
// output/ rewrites the packets (output/pftrace_merge.h); this keeps the command line.
#pragma once
#include <string>
#include <vector>

namespace gtrace {

// Parses the command line and merges; exits through fail() on an error.
int run_merge_command(const std::vector<std::string>& args);

} // namespace gtrace
