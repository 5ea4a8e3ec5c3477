// `gtrace dump --pid PID`: the Python and native stack of every thread of every process in the
// tree, once, grouped across ranks — what a hung distributed job needs.
#pragma once
#include <atomic>

#include "foundation/result.h"

namespace gtrace {

// Writes the dump to stdout. `stop` is set by the CLI's SIGINT/SIGTERM handler.
Result<void> run_dump(int pid, bool system_wide, const std::atomic<int>& stop);

} // namespace gtrace
