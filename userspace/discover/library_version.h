// The release of a library a process maps, for the capture's summary ("probed: …/libcudart.so.13
// (nvidia-cuda-runtime 13.2.86; 76 functions)"): what a user compares with the CUDA their job was
// built for. From, in order:
//  - a pip wheel's metadata: the *.dist-info in the library's site-packages whose RECORD lists
//    the file (nvidia_cuda_runtime-13.2.86.dist-info);
//  - a versioned file name (libcudart.so.12.4.127 → 12.4.127);
// Read inside the process's root with its credentials (discover/target_files.h); bounded.
#pragma once
#include <string>
#include <string_view>

#include "discover/target_files.h"

namespace gtrace {

// "nvidia-cuda-runtime 13.2.86", "12.4.127", or "" when nothing says.
std::string library_version(TargetFiles& files, int pid, const std::string& path);

// The parts, for tests: the version a file name carries past its soname ("" for none), and the
// distribution and version of a dist-info directory's name.
std::string version_from_file_name(std::string_view file_name);
std::string version_from_dist_info(std::string_view dir_name);

} // namespace gtrace
