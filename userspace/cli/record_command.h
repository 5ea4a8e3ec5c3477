// gtrace record -- COMMAND: start a command under capture, with the agent loaded by CUDA at its
// initialization (CUDA_INJECTION64_PATH), so GPU records are complete from the first kernel.
#pragma once
#include <string>
#include <vector>

#include "cli/capture.h"

namespace gtrace {

// Runs the capture to its end (the command's own status is printed).
Result<CaptureResult> record_command(CaptureOptions options, const std::vector<std::string>& command);

} // namespace gtrace
