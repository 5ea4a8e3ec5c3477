// Parsing /proc/PID/maps.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gtrace {

struct Mapping {
    uint64_t start = 0, end = 0, offset = 0;
    bool readable = false, writable = false, executable = false;
    uint64_t dev = 0; // makedev(major, minor)
    uint64_t inode = 0;
    std::string path;
    bool is_file() const { return inode != 0 && !path.empty() && path[0] == '/'; }
    bool operator==(const Mapping&) const = default;
};

std::vector<Mapping> read_maps(int pid);
std::vector<Mapping> parse_maps(const std::string& text);

// /proc/PID/map_files/START-END: the very file of a mapping, whatever path the process's mount
// namespace or chroot gives it (its maps show paths from its namespace's root, not ours).
std::string mapped_file_path(int pid, const Mapping& m);

// Whether a file name (no directory) is a CUDA runtime or driver library: libcudart.so*,
// libcudart-HASH.so* (a wheel's renamed copy), libcuda.so*.
bool is_cuda_library_name(std::string_view filename);

} // namespace gtrace
