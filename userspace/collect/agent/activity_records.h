// CUPTI's activity records (kernels, copies, sets, synchronizations, memory, API calls)
// translated into the ring's records (gtrace/agent.h).
#pragma once
#include <cstdint>
#include <vector>

#include <cupti.h>

#include "gtrace/agent.h"

namespace gtrace::agent {

// Writes one record into the ring (the ring's lock held). GPU ops whose correlation id is in
// `trimmed` (sorted: calls in flight when the session stopped) are left out and counted.
void write_record(gt_agent_ring* ring, const CUpti_Activity* a, const std::vector<uint32_t>& trimmed);

} // namespace gtrace::agent
