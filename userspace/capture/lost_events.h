// Lost events by where they were lost, for the summary and otherData.lost: the BPF ring (per
// event class), the agents' rings, CUPTI. Each source has its own remedy, so none is lumped in.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/trace_model.h"

namespace gtrace {

// {"total", "bpf_ring": {"total", one count per event class}, "agent_ring", "cupti"}
nlohmann::json lost_facts(const TraceModel& model);
// The summary's line (without its indent): "lost events: 0", or a WARNING naming each source
// that lost something with its count and what to do about it.
std::string lost_summary(const TraceModel& model);

} // namespace gtrace
