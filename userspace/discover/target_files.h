// The files a traced process names, opened as that process sees them — never as root sees the
// host. gtrace runs as root; a target's paths (its mappings' names, its LD_LIBRARY_PATH,
// CUDA_HOME, the links in its container) are chosen by whoever owns it:
//  - a mapped file is opened through /proc/PID/map_files (the very file mapped, whatever path
//    the process's namespace gives it), or without the privilege for that by its path inside
//    the process's root — and kept only if it is the file mapped (device and inode);
//  - any other path is resolved inside the process's root (openat2 RESOLVE_IN_ROOT: no "..",
//    absolute link or /proc magic link leads out of it) with the process's own file-system
//    credentials: root's gtrace opens only what the process itself could;
//  - each batch of such work runs with a deadline (foundation/bounded_call.h): a file system
//    that never answers costs that process's probes (hung() says so), not the capture.
#pragma once
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "discover/proc_maps.h"
#include "foundation/input_file.h"
#include "foundation/result.h"
#include "foundation/process_observer.h"

namespace gtrace {

struct OpenedMapping {
    Mapping mapping; // the first of the file's mappings that was asked for
    InputFile file;
};

class TargetFiles final : public ProcessObserver {
public:
    // Bounds on what one target can make gtrace look at.
    static constexpr size_t kMaxDirectories = 16;   // candidate library directories per process
    static constexpr size_t kMaxEntriesPerDir = 4096; // directory entries read per directory

    // Opens the file mappings of `pid` that `wanted` picks, each file (device, inode) once.
    // A mapping whose file cannot be opened as the one mapped is left out.
    std::vector<OpenedMapping> open_mapped(int pid, const std::vector<Mapping>& maps,
                                           const std::function<bool(const Mapping&)>& wanted);
    // One mapping's file (the agent injector's libc, a sampled address's object).
    Result<InputFile> open_mapped(int pid, const Mapping& m);

    // Regular files at `paths` inside pid's root, opened with its credentials; missing ones
    // are left out. Each result names the path it was asked for.
    std::vector<std::pair<std::string, InputFile>> open_in_root(int pid, const std::vector<std::string>& paths);
    // The names in the directories `dirs` (inside pid's root, with its credentials) that
    // `wanted` picks, as "DIR/NAME"; at most kMaxDirectories directories and kMaxEntriesPerDir
    // entries each. `wanted` runs on the worker thread: a plain function of the name.
    std::vector<std::string> list_in_root(int pid, const std::vector<std::string>& dirs,
                                          const std::function<bool(const std::string&)>& wanted);

    // The process's file work missed its deadline once: what it names is not looked at again.
    bool hung(int pid) const { return hung_.contains(pid); }
    void forget(int pid) { hung_.erase(pid); }
    void process_forked(uint32_t pid, uint32_t) override { forget(static_cast<int>(pid)); }

private:
    std::set<int> hung_;
};

// Opens `path` inside the root directory `root_fd` (RESOLVE_IN_ROOT, no magic links), as a
// regular file (O_NONBLOCK; anything else refused). For TargetFiles and its tests.
Result<InputFile> open_beneath_root(int root_fd, const std::string& path);

} // namespace gtrace
