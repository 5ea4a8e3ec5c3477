#include "attach/cuda_probes.h"
#include "foundation/test_hooks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <unordered_set>

#include "format/api_table.h"
#include "foundation/elf_symbols.h"
#include "foundation/printable.h"
#include "discover/proc_maps.h"
#include "discover/library_version.h"
#include "discover/loader_cache.h"
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

// The mount namespace pid lives in: the same directory names the same files for every process
// of one namespace (read from the link, without touching the file system).
std::string mount_namespace(int pid) {
    char link[64] = {};
    ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/ns/mnt").c_str(), link, sizeof link - 1);
    return n > 0 ? std::string(link, static_cast<size_t>(n)) : "pid:" + std::to_string(pid);
}

constexpr size_t kMaxLoaderCacheBytes = 64u << 20;

} // namespace

bool CudaProbes::any_mapped() const {
    for (const auto& [key, obj] : objects_)
        if (obj.mapped) return true;
    return false;
}

Result<int> CudaProbes::probe_file(int pid, InputFile file, const std::string& shown_path, bool mapped) {
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
    ProbedObject obj{shown_path, library_version(files_, pid, shown_path), {}, mapped};
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
    // Test only: tells a case when a library's calls are traced (every probe in), so that its
    // program calls it then rather than after a fixed time.
    if (attached_ && GTRACE_TEST_HOOK("SAY_PROBED")) fprintf(stderr, "gtrace-test: probed %s\n", printable(shown_path).c_str());
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
            fprintf(stderr, "gtrace: warning: %s\n", printable(links.error().message).c_str());
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
    for (const Mapping& m : maps) // files probed already: this process maps them too
        if (m.executable && m.is_file())
            if (auto it = objects_.find({m.dev, m.inode}); it != objects_.end()) {
                it->second.mapped = true;
                cuda_pids_.insert(pid);
            }
    auto opened = files_.open_mapped(pid, maps, [this](const Mapping& m) {
        Key key{m.dev, m.inode};
        return m.executable && !objects_.contains(key) && !not_cuda_.contains(key);
    });
    int added = 0;
    for (OpenedMapping& o : opened) {
        Key key{static_cast<uint64_t>(o.file.stat().st_dev), static_cast<uint64_t>(o.file.stat().st_ino)};
        auto r = probe_file(pid, std::move(o.file), o.mapping.path, true);
        if (!r) return r.error();
        added += *r;
        if (objects_.contains(key)) cuda_pids_.insert(pid);
    }
    return added;
}

Result<int> CudaProbes::probe_candidates(int pid) {
    // Every path here is the process's to choose: resolved in its root, with its credentials,
    // a bounded number of directories, within a deadline (discover/target_files.h).
    auto env = read_environ(pid);
    // The toolkit's and CUDA_HOME's first: past TargetFiles::kMaxDirectories the rest is cut.
    std::vector<std::string> dirs = {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"};
    const std::string& cuda_home = env["CUDA_HOME"];
    if (cuda_home.starts_with('/')) dirs.push_back(cuda_home + "/lib64");
    // The executable's own RUNPATH/RPATH: where the loader will look for its libraries.
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
    if (!ec && exe.is_absolute())
        for (auto& [path, file] : files_.open_in_root(pid, {exe.string()}))
            for (auto& dir : elf_search_paths(file.fd_path(), exe.parent_path().string()))
                if (dir.starts_with('/')) dirs.push_back(std::move(dir));
    for (auto& dir : split(env["LD_LIBRARY_PATH"], ':'))
        if (dir.starts_with('/')) dirs.push_back(std::move(dir)); // relative ones name the process's cwd

    std::string ns = mount_namespace(pid);
    std::vector<std::string> fresh;
    for (auto& dir : dirs)
        if (candidate_dirs_seen_.insert(ns + "\n" + dir).second) fresh.push_back(std::move(dir));
    std::vector<std::string> paths = files_.list_in_root(pid, fresh, [](const std::string& name) { return is_cuda_library_name(name); });
    // The libraries the loader's cache names (the process's own /etc/ld.so.cache), once per namespace.
    if (candidate_dirs_seen_.insert(ns + "\nld.so.cache").second)
        for (auto& [path, cache] : files_.open_in_root(pid, {"/etc/ld.so.cache"})) {
            std::string bytes;
            bytes.resize(static_cast<size_t>(std::min<uint64_t>(cache.size(), kMaxLoaderCacheBytes)));
            ssize_t got = pread(cache.fd(), bytes.data(), bytes.size(), 0);
            bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
            for (auto& entry : parse_loader_cache(bytes))
                if (is_cuda_library_name(std::filesystem::path(entry.name).filename().string()) && entry.path.starts_with('/'))
                    paths.push_back(std::move(entry.path));
        }
    int added = 0;
    for (auto& [path, file] : files_.open_in_root(pid, paths)) {
        auto r = probe_file(pid, std::move(file), path, false);
        if (!r) return r.error();
        added += *r;
    }
    return added;
}

} // namespace gtrace
