// gtrace record -- COMMAND: start a command under capture, with the agent loaded by CUDA at its
// initialization (CUDA_INJECTION64_PATH), so GPU records are complete from the first kernel.
#pragma once
#include <string>
#include <vector>

#include "capture/capture.h"

namespace gtrace {

// What happens to the command when the capture stops before it has exited (--duration, --steps,
// --max-events, Ctrl-C, SIGTERM): --on-stop term (default: SIGTERM to every process of its tree,
// then up to 10 s for it to exit; still running then, it is left running and gtrace says so),
// kill (SIGKILL to its tree), keep (left running; gtrace prints its PID and returns).
enum class OnStop { Term, Kill, Keep };

// Runs the capture to its end (the command's own status is printed).
Result<CaptureResult> record_command(CaptureOptions options, const std::vector<std::string>& command, OnStop on_stop);

} // namespace gtrace
