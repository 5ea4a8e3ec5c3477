// The summary JSON of a report (`gtrace report --json`, `--summary-json`), which the HTML page
// draws too. Every process gets an entry in `ranks`: a rank process with its `rank`, another
// process that did CUDA work with `rank: null`; `name` says how the report names each. Times are
// milliseconds since the capture's start (`clock_origin_ns`, CLOCK_MONOTONIC of its trace's
// first event).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "analyze/job_report.h"

namespace gtrace {

// The key of a process in `verdict.ranks`: "0" for rank 0, "pid 1234" for a process without one.
std::string verdict_key(const ProcessAnalysis& p);

nlohmann::json report_json(const JobReport& report);

// The --json file's text: indented; bytes that are not UTF-8 (a traced process's command line
// may hold any) become U+FFFD instead of failing the report.
std::string report_json_text(const nlohmann::json& summary);

} // namespace gtrace
