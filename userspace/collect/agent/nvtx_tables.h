// Attach mode: the agent becomes the NVTX injection of modules that initialized NVTX long ago.
// gtrace finds each module's nvtxGlobals_v3 (a hidden symbol, in the file's .symtab) and names
// its address; the agent, on its own thread, looks at the table's state and
// - initialized without a tool (every slot null, calls are no-ops): stores its functions into
//   the slots, each an aligned pointer store that a calling thread sees whole, before or after;
// - never used yet: takes the initialization over exactly as NVTX's nvtxInitOnce would (state
//   FRESH → STARTED by compare-and-swap, slots filled, the rest null, then COMPLETE), so that a
//   thread making its first NVTX call meanwhile waits in nvtxInitOnce as it would for a tool;
// - served by another tool, or initializing elsewhere: leaves it alone.
// Each outcome goes to gtrace as a GT_GPU_NVTX_MODULE record.
#pragma once
#include <cstdint>
#include <vector>

#include "gtrace/agent.h"

namespace gtrace::agent {

// `tables`: addresses of nvtxGlobals_v3 in this process. Writes one record per table.
void install_nvtx_tables(gt_agent_ring* ring, const std::vector<uint64_t>& tables);

} // namespace gtrace::agent
