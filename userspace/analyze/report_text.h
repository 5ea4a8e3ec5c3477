// The terminal text of a report (`gtrace report`, and `attach`/`record` at the end of a
// capture): the breakdown table, then per process its verdict with the figures behind it,
// launch statistics, copy bandwidth, top kernels and GPU memory, then the job's verdict.
#pragma once
#include <string>

#include "analyze/job_report.h"

namespace gtrace {

std::string format_report(const JobReport& report);

// How a node's times were put on the first node's: "+2.503 ms by its clock reading, −2.498 ms
// from 20 collectives' ends; residual skew 12.0 µs", or the method ("reference", ...).
std::string clock_alignment_text(const NodeAlignment& a);

} // namespace gtrace
