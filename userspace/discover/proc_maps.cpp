#include "discover/proc_maps.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "foundation/input_file.h"

namespace gtrace {

std::vector<Mapping> parse_maps(const std::string& text) {
    std::vector<Mapping> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        Mapping m;
        char perms[5] = {};
        unsigned major = 0, minor = 0;
        int path_pos = 0;
        if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end,
                   perms, &m.offset, &major, &minor, &m.inode, &path_pos) < 7)
            continue;
        m.readable = perms[0] == 'r';
        m.writable = perms[1] == 'w';
        m.executable = perms[2] == 'x';
        m.dev = makedev(major, minor);
        if (path_pos > 0 && static_cast<size_t>(path_pos) < line.size()) m.path = line.substr(path_pos);
        const std::string deleted = " (deleted)";
        if (m.path.size() > deleted.size() && m.path.ends_with(deleted)) m.path.resize(m.path.size() - deleted.size());
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<Mapping> read_maps(int pid) {
    // A large torch process has a few thousand lines (~0.5 MiB); a hostile one could list 65530
    // mappings with 4 KiB paths each, read again every second: the tail past 16 MiB is left out.
    constexpr size_t kMaxMapsBytes = 16u << 20;
    return parse_maps(read_input_file("/proc/" + std::to_string(pid) + "/maps", kMaxMapsBytes));
}

std::string mapped_file_path(int pid, const Mapping& m) {
    char range[48];
    snprintf(range, sizeof range, "%" PRIx64 "-%" PRIx64, m.start, m.end);
    return "/proc/" + std::to_string(pid) + "/map_files/" + range;
}

bool is_cuda_library_name(std::string_view filename) {
    return filename.starts_with("libcudart.so") || filename.starts_with("libcuda.so") ||
           (filename.starts_with("libcudart-") && filename.find(".so") != std::string_view::npos);
}

} // namespace gtrace
