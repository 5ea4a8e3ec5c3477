// `gtrace dump --pid PID`: the Python and native stack of every thread of every process in the
// tree, once, grouped across ranks — what a hung distributed job needs.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

struct DumpOptions {
    int pid = 0;
    bool system_wide = false;
    std::string json_path; // --json: where the ranks stand, and every thread's stacks, as JSON
    bool force = false;
};

// Writes the dump to stdout, where the ranks stand first. `stop` is set by the CLI's
// SIGINT/SIGTERM handler.
Result<void> run_dump(const DumpOptions& options, const std::atomic<int>& stop);

// `gtrace dump --merge A.json B.json ...`: several nodes' dumps of one job, where its ranks stand.
Result<void> run_dump_merge(const std::vector<std::string>& paths);

} // namespace gtrace
