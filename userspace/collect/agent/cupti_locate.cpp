#include "collect/agent/cupti_locate.h"

#include <limits.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gtrace::agent {
namespace {

std::vector<std::string> loaded_objects() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            // Relative when found through a relative LD_LIBRARY_PATH entry.
            char resolved[PATH_MAX];
            if (info->dlpi_name && info->dlpi_name[0] && realpath(info->dlpi_name, resolved))
                static_cast<std::vector<std::string>*>(data)->push_back(resolved);
            return 0;
        },
        &names);
    return names;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string dir_name(const std::string& path) { return path.substr(0, path.rfind('/')); }

} // namespace

std::vector<std::string> cupti_candidates(const std::vector<std::string>& explicit_paths) {
    std::vector<std::string> out = explicit_paths;
    auto add = [&](const std::string& p) {
        if (std::find(out.begin(), out.end(), p) == out.end() && (p.find('/') == std::string::npos || access(p.c_str(), R_OK) == 0))
            out.push_back(p);
    };
    std::vector<std::string> objects = loaded_objects();
    for (const auto& o : objects)
        if (base_name(o).starts_with("libcupti.so")) add(o);
    std::string major; // "13" from libcudart.so.13
    for (const auto& o : objects) {
        std::string base = base_name(o);
        if (!base.starts_with("libcudart.so")) continue;
        std::string suffix = base.size() > 13 ? base.substr(13) : "";
        std::string m = suffix.substr(0, suffix.find('.'));
        if (major.empty()) major = m;
        std::string lib = "libcupti.so" + (m.empty() ? "" : "." + m);
        std::string dir = dir_name(o);
        add(dir + "/" + lib);
        add(dir + "/../../cuda_cupti/lib/" + lib);      // pip: nvidia/cuda_runtime/lib → nvidia/cuda_cupti/lib
        add(dir + "/../extras/CUPTI/lib64/" + lib);     // toolkit: lib64 → extras/CUPTI/lib64
    }
    std::string lib = "libcupti.so" + (major.empty() ? "" : "." + major);
    std::vector<std::string> roots;
    if (const char* home = getenv("CUDA_HOME")) roots.push_back(home);
    if (const char* path = getenv("CUDA_PATH")) roots.push_back(path);
    roots.push_back("/usr/local/cuda");
    for (const auto& r : roots) {
        add(r + "/extras/CUPTI/lib64/" + lib);
        add(r + "/lib64/" + lib);
    }
    add(lib); // the loader's search path
    return out;
}

} // namespace gtrace::agent
