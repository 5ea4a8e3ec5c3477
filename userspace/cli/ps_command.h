// `gtrace ps`: the running jobs gtrace can attach to — torchrun agents, their ranks, and other
// processes with CUDA loaded — with their PIDs, ranks and command lines.
#pragma once
#include "foundation/result.h"

namespace gtrace {

struct PsOptions {
    bool json = false;   // one JSON object on stdout instead of the table
    bool redact = true;  // secret values of command lines written as ***
};

Result<void> run_ps(const PsOptions& options);

} // namespace gtrace
