// gtrace record -- COMMAND: start a command under capture, with the agent loaded by CUDA at its
// initialization (CUDA_INJECTION64_PATH), so GPU records are complete from the first kernel.
#pragma once
#include <string>
#include <vector>

#include "cli/capture.h"

namespace gtrace {

// Runs the capture; returns gtrace's exit code (the command's own status is printed).
Result<int> record_command(CaptureOptions options, const std::vector<std::string>& command);

} // namespace gtrace
