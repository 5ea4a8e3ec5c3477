// The GPU memory a running process already uses when the agent starts in it (attach mode): per
// device whose primary context the process has active, the device's used and total bytes
// (cuMemGetInfo) and, in a PyTorch process, its caching allocator's reserved and allocated
// bytes. Read on the agent's own thread; it never loads libcuda, never creates a context, and
// takes Python's GIL only on a helper thread it does not wait on for long.
#pragma once
#include <vector>

#include "gtrace/agent.h"

namespace gtrace::agent {

// One record per device with an active primary context; none when CUDA is not loaded or not
// initialized. The records' headers are filled (type, size).
std::vector<gt_gpu_memory_state> read_memory_states();
// Reads them and writes them into the session's ring (before the session's first flush, so
// gtrace has them before the memory records that change them).
void send_memory_states();

} // namespace gtrace::agent
