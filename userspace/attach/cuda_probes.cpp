#include "attach/cuda_probes.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "decode/api_table.h"
#include "foundation/elf_symbols.h"
#include "discover/proc_maps.h"
#include "discover/proc_tree.h"

namespace gtrace {
namespace {

const std::unordered_set<std::string_view>& api_symbol_names() {
    static const std::unordered_set<std::string_view> names = [] {
        std::unordered_set<std::string_view> n;
        for (const auto& api : kApis) n.insert(api.name);
        return n;
    }();
    return names;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t end = s.find(sep, pos);
        if (end == std::string::npos) end = s.size();
        if (end > pos) out.push_back(s.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

// Paths of libcudart/libcuda known to the loader cache (ldconfig -p).
const std::vector<std::string>& loader_cache_cuda_libraries() {
    static const std::vector<std::string> paths = [] {
        std::vector<std::string> out;
        FILE* p = popen("ldconfig -p 2>/dev/null", "r");
        if (!p) return out;
        char line[4096];
        while (fgets(line, sizeof line, p)) {
            std::string l(line);
            auto arrow = l.find("=> ");
            if (arrow == std::string::npos) continue;
            std::string path = l.substr(arrow + 3);
            while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
            if (is_cuda_library_name(std::filesystem::path(path).filename().string())) out.push_back(path);
        }
        pclose(p);
        return out;
    }();
    return paths;
}

} // namespace

bool CudaProbes::any_mapped() const {
    for (const auto& [key, obj] : objects_)
        if (obj.mapped) return true;
    return false;
}

Result<int> CudaProbes::probe_file(InputFile file, const std::string& shown_path, bool mapped) {
    Key key{static_cast<uint64_t>(file.stat().st_dev), static_cast<uint64_t>(file.stat().st_ino)};
    if (auto it = objects_.find(key); it != objects_.end()) {
        it->second.mapped |= mapped;
        return 0;
    }
    if (not_cuda_.contains(key)) return 0;
    // Symbols and probes through the one open file: the path may change under a hostile user.
    auto syms = ElfSymbols::load(file.fd_path(), &api_symbol_names());
    if (!syms || (*syms)->size() == 0) {
        not_cuda_.insert(key);
        return 0;
    }
    ProbedObject obj{shown_path, {}, mapped};
    Sites s{std::move(file), shown_path, {}, {}};
    for (const auto& api : kApis) {
        const ElfSymbol* sym = (*syms)->find(api.name);
        if (!sym) continue;
        auto offset = (*syms)->vaddr_to_offset(sym->vaddr);
        if (!offset) continue;
        s.sites.push_back({*offset, GT_COOKIE(api.id, api.caps)});
        obj.apis.emplace_back(api.name);
    }
    if (s.sites.empty()) {
        not_cuda_.insert(key);
        return 0;
    }
    if (attached_) {
        auto ok = attach_sites(s);
        if (!ok) return ok.error();
        if (!*ok) {
            not_cuda_.insert(key);
            return 0;
        }
    }
    objects_.emplace(key, std::move(obj));
    sites_.emplace(key, std::move(s));
    return 1;
}

// false: the file could not be probed (vanished, ...): skipped with a warning.
Result<bool> CudaProbes::attach_sites(Sites& s) {
    for (bool at_return : {false, true}) {
        auto links = bpf_.attach_api_probes(s.file.fd_path(), s.shown_path, s.sites, at_return);
        if (!links) {
            // Only missing privileges end the capture; a file that vanished is skipped.
            if (links.error().code == ExitCode::Privileges) return links.error();
            fprintf(stderr, "gtrace: warning: %s\n", links.error().message.c_str());
            s.links.clear();
            return false;
        }
        for (auto& l : *links) s.links.push_back(std::move(l));
    }
    return true;
}

Result<void> CudaProbes::set_attached(bool attached) {
    if (attached == attached_) return {};
    attached_ = attached;
    for (auto& [key, s] : sites_) {
        if (!attached) {
            s.links.clear();
            continue;
        }
        if (auto ok = attach_sites(s); !ok) return ok.error();
    }
    return {};
}

Result<int> CudaProbes::scan_maps(int pid, const std::vector<Mapping>& maps) {
    int added = 0;
    std::set<std::string> seen;
    for (const Mapping& m : maps) {
        if (!m.executable || !m.is_file() || !seen.insert(m.path).second) continue;
        auto file = open_input_file(path_in_process_root(pid, m.path));
        if (!file) continue; // unmapped or deleted meanwhile, or not a regular file now
        Key key{static_cast<uint64_t>(file->stat().st_dev), static_cast<uint64_t>(file->stat().st_ino)};
        auto r = probe_file(std::move(*file), m.path, true);
        if (!r) return r.error();
        added += *r;
        if (objects_.contains(key)) cuda_pids_.insert(pid);
    }
    return added;
}

Result<int> CudaProbes::probe_candidates(int pid) {
    auto env = read_environ(pid);
    std::vector<std::string> dirs = split(env["LD_LIBRARY_PATH"], ':');
    // The executable's own RUNPATH/RPATH: where the loader will look for its libraries.
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
    if (!ec)
        for (auto& dir : elf_search_paths(path_in_process_root(pid, exe.string()), exe.parent_path().string()))
            dirs.push_back(std::move(dir));
    for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"}) dirs.emplace_back(d);
    const std::string& cuda_home = env["CUDA_HOME"];
    if (!cuda_home.empty()) dirs.push_back(cuda_home + "/lib64");

    std::vector<std::string> files = loader_cache_cuda_libraries();
    for (const auto& dir : dirs) {
        std::string rooted = path_in_process_root(pid, dir);
        if (!candidate_dirs_seen_.insert(rooted).second) continue;
        for (const auto& entry : std::filesystem::directory_iterator(rooted, ec))
            if (is_cuda_library_name(entry.path().filename().string())) files.push_back(entry.path().string());
    }
    int added = 0;
    for (const auto& file : files) {
        auto in = open_input_file(file);
        if (!in) continue;
        auto r = probe_file(std::move(*in), file, false);
        if (!r) return r.error();
        added += *r;
    }
    return added;
}

} // namespace gtrace
