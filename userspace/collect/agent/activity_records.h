// CUPTI's activity records (kernels, copies, sets, synchronizations, memory, API calls)
// translated into the ring's records (gtrace/agent.h).
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

#include <cupti.h>

#include "gtrace/agent.h"

namespace gtrace::agent {

// What a stopping session leaves out: GPU ops of calls in flight when the callbacks went off
// (their ends are past the capture), and of calls made after (ids above the last one the
// callbacks saw: CUPTI's ids only grow), whose kernels CUPTI may still record.
struct StopTrim {
    std::vector<uint32_t> in_flight; // sorted
    uint32_t after = 0;              // 0: none
};

// Writes one record into the ring (the ring's lock held); ops `trim` names are counted instead.
void write_record(gt_agent_ring* ring, const CUpti_Activity* a, const StopTrim& trim);

// Waits, `lock` (the ring's) let go, until `ring` has room for the largest record: a completed
// buffer is held (CUPTI meanwhile fills others, up to the agent's bound) rather than dropped
// while gtrace catches up. A reader that makes no room within a quarter of a second is taken
// for stalled (`stalled` set): records then drop, counted, without waiting until it makes room
// again, so that a dead gtrace delays the agent once, not once per buffer.
void wait_for_room(std::unique_lock<std::mutex>& lock, gt_agent_ring* const& ring, bool& stalled);

} // namespace gtrace::agent
