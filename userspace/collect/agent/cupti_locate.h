// Where the agent looks for the libcupti that matches the process's CUDA.
#pragma once
#include <string>
#include <vector>

namespace gtrace::agent {

// In order: paths gtrace was told (--cupti); a libcupti the process already loaded (Kineto's:
// never load a second copy); beside each loaded libcudart (same major version: a pip wheel's
// nvidia/cuda_cupti/lib, the toolkit's extras/CUPTI/lib64); $CUDA_HOME; /usr/local/cuda; the
// loader's search path.
std::vector<std::string> cupti_candidates(const std::vector<std::string>& explicit_paths);

} // namespace gtrace::agent
