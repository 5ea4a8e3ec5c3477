#include "discover/proc_maps.h"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

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
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    if (!in) return {};
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse_maps(ss.str());
}

std::string path_in_process_root(int pid, const std::string& path) {
    std::string rooted = "/proc/" + std::to_string(pid) + "/root" + path;
    if (access(rooted.c_str(), R_OK) == 0) return rooted;
    return path;
}

} // namespace gtrace
