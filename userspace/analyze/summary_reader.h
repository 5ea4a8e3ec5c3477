// One node's summary — what `gtrace report --json` and `attach`/`record --summary-json` write
// (analyze/report_json.h) — read back into the figures a job's verdict is judged on, so that
// `gtrace report --summaries` merges hundreds of nodes without reading a trace. Per-step rows
// and memory curves are not read (the merge needs neither). A summary is another node's file:
// every field is checked for its type and range; a field missing or wrong reads as absent.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/step_analysis.h"
#include "foundation/result.h"

namespace gtrace {

struct NodeSummary {
    std::string host;                  // "" when the summary does not say (gtrace report --json of an older trace)
    std::optional<double> cpu_pressure; // the share of its capture a runnable task waited for a CPU
    std::vector<ProcessAnalysis> processes; // with their verdicts and evidence as the node judged them
};

// The keys whose values a merge never reads: left out while parsing (a long capture's per-step
// rows are most of a summary's bytes).
inline const std::vector<std::string> kSummarySkippedKeys = {"per_step", "points"};

// From a summary's JSON; a one-line error (exit 11) when it is not one gtrace wrote.
Result<NodeSummary> read_node_summary(const nlohmann::json& j, const std::string& path);

// Category by the name report_json writes ("Kernel", "CPU Exec", ...).
std::optional<Category> category_by_name(const std::string& name);

} // namespace gtrace
